"""The attack suite's fixtures: a local Claros server over either store, with one key of
each kind (tests/api), and real guard processes against a local Claros (tests/guard)."""

from tests.api.conftest import http, keys, server, services, settings  # noqa: F401
from tests.guard.conftest import anyio_backend, claros, workspace  # noqa: F401
