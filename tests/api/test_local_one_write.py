"""The local server sends each answer, headers and body, in one write: written apart, the
client wakes on the headers and the body waits for the server's next time slice (on a busy
machine, up to ~10 ms an answer). ``Expect: 100-continue`` is still answered at once."""

from __future__ import annotations

import http.client
import json
import socket
import socketserver
import threading
from typing import Any

import pytest

from claros.local import LocalServer
from tests.api.conftest import Keys, bearer, check_body

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every write the server's threads make to a socket, whichever file
    object they write through (buffered or not)."""
    writes: list[int] = []
    lock = threading.Lock()
    main = threading.main_thread()

    def counted(original: Any) -> Any:
        def write(self: Any, data: Any) -> Any:
            if threading.current_thread() is not main:  # the client runs in this thread
                with lock:
                    writes.append(len(data))
            return original(self, data)

        return write

    monkeypatch.setattr(socket.SocketIO, "write", counted(socket.SocketIO.write))
    unbuffered = socketserver._SocketWriter  # type: ignore[attr-defined]
    monkeypatch.setattr(unbuffered, "write", counted(unbuffered.write))
    return writes


def test_a_check_is_answered_in_one_write(
    server: LocalServer, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("GET", "/v1/ledger/pubkey", headers=bearer(keys.agent))  # warm up
        conn.getresponse().read()
        writes = _count_writes(monkeypatch)
        for n in range(3):
            body = json.dumps(check_body(agent={"name": "a", "call_id": f"c{n}"}))
            headers = {**bearer(keys.agent), "Content-Type": "application/json"}
            conn.request("POST", "/v1/check", body=body, headers=headers)
            response = conn.getresponse()
            answer = response.read()
            assert response.status == 200, answer
            assert len(writes) == n + 1, writes  # one write per answer
            assert writes[-1] > len(answer)  # ... holding the headers and the whole body
    finally:
        conn.close()


def test_expect_100_continue_is_answered_before_the_body(server: LocalServer, keys: Keys) -> None:
    body = json.dumps(check_body()).encode()
    head = (
        f"POST /v1/check HTTP/1.1\r\nHost: {server.host}\r\nAuthorization: Bearer {keys.agent}"
        f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Expect: 100-continue\r\n\r\n"
    ).encode()
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(head)
        interim = sock.recv(65536)  # the body is not sent until this comes (10 s at most)
        assert interim.startswith(b"HTTP/1.1 100 Continue\r\n"), interim
        sock.sendall(body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 "), answer
