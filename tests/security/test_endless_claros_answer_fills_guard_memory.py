"""Attack: whatever answers at the check API's address (a wrong ``CLAROS_URL``, a proxy,
a broken or hostile server) answers a check with a body that never ends. The guard read
every byte into memory until its timeout: a gigabyte in five seconds on the test
machine, and more the faster the link, until the agent's guard was killed for memory.

What must hold (THREATS.md section 5): a Claros answer is at most ``MAX_ANSWER_BYTES``
(docs/guard.md); past that the guard stops reading, closes the connection and fails the
check with a clear error (unavailable: the write is blocked, or forwarded with
``--fail-open`` as for any outage), with no more memory than that spent."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import anyio
import httpx
import pytest

from claros_guard.api import MAX_ANSWER_BYTES, HttpClarosApi
from claros_guard.errors import ClarosUnavailableError

CHUNK = b" " * (1 << 20)


class EndlessClaros:
    """Answers any request ``200``, chunked, with ``{"result":"allow","x":"`` and then
    spaces for ever (or, ``framed="length"``, a Content-Length of 2**40); counts the
    bytes it got out."""

    def __init__(self, framed: str) -> None:
        self.framed = framed
        self.sent = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(30)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            if self.framed == "chunked":
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                head += b"Transfer-Encoding: chunked\r\n\r\n"
                frame = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
                start = b'%x\r\n{"result":"allow","x":"\r\n' % len(b'{"result":"allow","x":"')
            else:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                head += b"Content-Length: %d\r\n\r\n" % (1 << 40)
                frame = CHUNK
                start = b'{"result":"allow","x":"'
            try:
                conn.sendall(head + start)
                while not self.done.is_set():
                    conn.sendall(frame)
                    self.sent += len(frame)
            except OSError:
                pass  # the guard closed the connection: what it must do

    def close(self) -> None:
        self.done.set()
        self.sock.close()


@pytest.fixture(params=["chunked", "length"])
def endless(request: pytest.FixtureRequest) -> Iterator[EndlessClaros]:
    server = EndlessClaros(request.param)
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("client", ["lean", "httpx"])
def test_an_endless_answer_is_cut_off_with_a_clear_error(
    endless: EndlessClaros, client: str
) -> None:
    """Both clients: the lean one, and httpx (through a proxy from the environment)."""

    async def run() -> BaseException | None:
        # The cut must come from the size, not from the clock: the old code read until
        # this timeout (a gigabyte, here).
        transport = httpx.AsyncHTTPTransport() if client == "httpx" else None
        api = HttpClarosApi(endless.url, "ck_agent_test", timeout=5, transport=transport)
        try:
            await api.check({"tool": "delete_everything"})
        except ClarosUnavailableError as exc:
            return exc
        finally:
            await api.aclose()
        return None

    failure = anyio.run(run)
    assert failure is not None, "an endless answer was taken as a check's answer"
    assert f"over {MAX_ANSWER_BYTES} bytes" in str(failure), failure
    endless.done.set()
    # What the guard took in is the limit and what the sockets' buffers held, no more.
    assert endless.sent <= MAX_ANSWER_BYTES + (32 << 20), endless.sent
