"""Attack tests: the API tests' real local server (over either store) and keys."""

from __future__ import annotations

from tests.api.conftest import (  # noqa: F401 - fixtures used by the security tests
    http,
    keys,
    server,
    services,
    settings,
)
