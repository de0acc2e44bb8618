"""Attack: whatever answers at Claros's address sends its answer a byte at a time, each
byte sooner than the timeout. httpx's timeout is per read, not per request, so the
client-side commands (``claros rules push``, ``mappings push``, ``verify --url``,
``tools confirm``: ``claros_guard.client.Client``) and the guard and hooks when they go
through httpx (a proxy from the environment) waited for as long as the bytes kept
coming: a hang, with no message. (The guard's own keep-alive client bounds the whole
request; it is not concerned.)

What must hold (THREATS.md section 5): a request to Claros takes at most its timeout,
whatever the pace of the answer; then the command says so (exit 2), the guard fails the
check as unavailable. And an answer is read up to a bound, never into memory without
one."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest

from claros_guard.api import HttpClarosApi
from claros_guard.client import MAX_ANSWER_BYTES, Client, ClientError
from claros_guard.errors import ClarosUnavailableError

DRIP_S = 0.2  # a byte this often: never silent for the 1 s timeout
HELD_S = 15.0  # the test gives up (the attack worked) after this long


class TricklingClaros:
    """Answers 200 with a Content-Length of ``size`` and then one byte every ``DRIP_S``
    (``drip``), or all at once as fast as it can (not ``drip``)."""

    def __init__(self, *, drip: bool, size: int = 1_000_000) -> None:
        self.drip, self.size = drip, size
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            try:
                conn.sendall(head + b"Content-Length: %d\r\n\r\n" % self.size)
                sent = 0
                while sent < self.size and not self.stop.is_set():
                    if self.drip:
                        conn.sendall(b" ")
                        sent += 1
                        self.stop.wait(DRIP_S)
                    else:
                        part = b" " * min(1 << 20, self.size - sent)
                        conn.sendall(part)
                        sent += len(part)
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def trickling() -> Iterator[TricklingClaros]:
    server = TricklingClaros(drip=True)
    try:
        yield server
    finally:
        server.close()


def _within(seconds: float, call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a thread; the exception it ended with (None if none). Fails the
    test if it is still running after ``seconds``."""
    ended: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            ended.append(exc)
        else:
            ended.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"a trickled answer held the request for {seconds:g} s (timeout: 1 s)")
    return ended[0]


def test_the_cli_client_gives_up_at_its_timeout(trickling: TricklingClaros) -> None:
    started = time.monotonic()
    with Client(trickling.url, "ck_admin_test", timeout=1) as client:
        failure = _within(HELD_S, lambda: client.json("GET", "/v1/ledger/pubkey"))
    assert isinstance(failure, ClientError), failure
    assert "did not answer in time (1 s)" in str(failure)
    assert time.monotonic() - started < HELD_S


def test_the_guard_through_httpx_gives_up_at_its_timeout(trickling: TricklingClaros) -> None:
    async def check() -> None:
        api = HttpClarosApi(
            trickling.url, "ck_agent_test", timeout=1, transport=httpx.AsyncHTTPTransport()
        )
        try:
            await api.check({"tool": "delete_everything"})
        finally:
            await api.aclose()

    failure = _within(HELD_S, lambda: anyio.run(check))
    assert isinstance(failure, ClarosUnavailableError), failure
    assert "did not answer in time" in str(failure)


def test_the_cli_client_reads_an_answer_up_to_a_bound() -> None:
    server = TricklingClaros(drip=False, size=MAX_ANSWER_BYTES + (1 << 20))
    try:
        with Client(server.url, "ck_admin_test", timeout=30) as client:
            with pytest.raises(ClientError, match=f"over {MAX_ANSWER_BYTES} bytes"):
                client.json("GET", "/v1/ledger/pubkey")
    finally:
        server.close()
