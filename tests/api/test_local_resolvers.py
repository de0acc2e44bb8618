"""The local server builds a resolver (every route declared, milliseconds) per thread; a
connection that ends gives its resolver to the next one, so a client that opens a
connection per request (a hook run) does not pay for building one each time."""

from __future__ import annotations

import http.client
import time
from typing import Any

import pytest

from claros import local
from claros.api.app import build_resolver as real
from claros.api.http import ClarosResolver
from claros.local import LocalServer
from claros.wiring import Services
from tests.api.conftest import Keys, bearer

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def test_connections_one_after_another_share_one_resolver(
    services: Services, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[ClarosResolver] = []

    def counting(*args: Any) -> ClarosResolver:
        built.append(real(*args))
        return built[-1]

    monkeypatch.setattr(local, "build_resolver", counting)
    server = LocalServer(services, "127.0.0.1", 0).start()
    try:
        for _ in range(5):
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            conn.request("GET", "/v1/me", headers={**bearer(keys.agent), "Connection": "close"})
            response = conn.getresponse()
            assert response.status == 200
            assert b'"kind":"agent"' in response.read()
            conn.close()
            # The server thread gives its resolver back once the connection is closed.
            server_threads_done(server)
    finally:
        server.stop()
    assert len(built) == 1


def server_threads_done(server: LocalServer) -> None:
    """Wait (bounded) until the connection's thread has given its resolver back."""
    deadline = time.monotonic() + 10
    while server.httpd.spare_resolvers < 1:
        if time.monotonic() > deadline:
            raise AssertionError("the connection's resolver was not given back within 10 s")
        time.sleep(0.01)
