"""tests/conftest.py shares httpx's default TLS context among the clients a test process
makes (shared_default_tls); any other context is made for its client, as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest

from tests.conftest import shared_default_tls


def _context(client: httpx.Client) -> Any:
    return client._transport._pool._ssl_context  # type: ignore[attr-defined]


def test_default_clients_share_one_context_made_from_the_ca_bundle() -> None:
    with httpx.Client() as first, httpx.Client(base_url="http://127.0.0.1:1") as second:
        assert _context(first) is _context(second)
        assert _context(first).get_ca_certs()  # certifi's CAs were loaded into it


def test_other_contexts_are_made_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[Any, Any, bool]] = []

    def make(verify: Any = True, cert: Any = None, trust_env: bool = True) -> object:
        made.append((verify, cert, trust_env))
        return object()

    create = shared_default_tls(make)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    default = create()
    assert create() is default and create(verify=True) is default
    assert create(verify=False) is not create(verify=False)
    assert create(trust_env=False) is not create(trust_env=False)
    assert create(cert="client.pem") is not default
    # Another CA file in the environment: another context, kept for that setting.
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    own = create()
    assert own is not default and create() is own
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    by_dir = create()
    assert by_dir not in (own, default) and create() is by_dir
    assert made.count((True, None, True)) == 3
    assert len(made) == 3 + 5  # the three defaults, then five others, each made anew
