"""Attack: a Claros (or anything on the path to it) slow to answer one of the guard's
pipelined reports makes a later check read another request's answer, so a write runs on
the allow Claros gave a different call.

The guard sends its background reports pipelined on one kept connection
(``KeepAlivePool.pipeline``). When the time ran out after the first answer and before the
second, the connection went back to the idle pool with the second answer still to come.
The next check on it read that report's answer (no result: "Claros unavailable"), and
its own answer stayed in the socket for the check after, which read it as its own: the
check of ``delete_everything`` answered with the allow of ``order_read``.

What must hold (THREATS.md section 1 and 5): no write runs unchecked; an answer is read
by the request it answers or by nobody. A connection an exchange did not finish cleanly
(timed out, cut off, garbled) is closed, never kept."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import anyio
import h11
import pytest

from claros_guard.api import HttpClarosApi, Report
from claros_guard.errors import ClarosUnavailableError

SLOW_S = 1.5  # the slow report's answer comes this long after its request
TIMEOUT_S = 0.5  # the guard waits this long for an answer


class ScriptedClaros:
    """A Claros on a real socket that answers each request in order on its connection:
    a check with allow for a tool named ``order_read``, block for any other (naming the
    tool it answers), a report with ``recorded``; a report whose body holds ``slow`` is
    answered ``SLOW_S`` later."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        parser = h11.Connection(h11.SERVER)
        target, body = b"", b""
        with conn:
            while not self.stopped.is_set():
                event = parser.next_event()
                if event is h11.NEED_DATA:
                    data = conn.recv(65536)
                    if not data:
                        return
                    parser.receive_data(data)
                elif isinstance(event, h11.Request):
                    target, body = event.target, b""
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    if b"slow" in body:
                        self.stopped.wait(SLOW_S)
                    if target == b"/v1/check":
                        tool = json.loads(body)["tool"]
                        result = "allow" if tool == "order_read" else "block"
                        answer = {"result": result, "allowed": result == "allow", "for": tool}
                    else:
                        answer = {"recorded": True}
                    out = json.dumps(answer).encode()
                    headers = [("Content-Type", "application/json"),
                               ("Content-Length", str(len(out)))]  # fmt: skip
                    with_body = parser.send(h11.Response(status_code=200, headers=headers))
                    conn.sendall(
                        (with_body or b"")
                        + (parser.send(h11.Data(data=out)) or b"")
                        + (parser.send(h11.EndOfMessage()) or b"")
                    )
                    parser.start_next_cycle()
                else:
                    return

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()


@pytest.fixture
def claros() -> Iterator[ScriptedClaros]:
    server = ScriptedClaros()
    try:
        yield server
    finally:
        server.close()


def test_a_check_never_reads_the_answer_of_another_request(claros: ScriptedClaros) -> None:
    async def run() -> list[object]:
        api = HttpClarosApi(claros.url, "ck_agent_test", timeout=TIMEOUT_S)
        try:
            reports = [
                Report("/v1/unchecked", {"n": 1}, "key-1"),
                Report("/v1/unchecked", {"n": "slow"}, "key-2"),
            ]
            failed = await api.send_reports(reports)
            assert any(isinstance(f, ClarosUnavailableError) for f in failed), failed
            await anyio.sleep(SLOW_S)  # the slow answer has come by now
            seen: list[object] = []
            for tool in ("order_read", "delete_everything"):
                try:
                    seen.append(await api.check({"tool": tool}))
                except ClarosUnavailableError as exc:
                    seen.append(exc)
            return seen
        finally:
            await api.aclose()

    read, write = anyio.run(run)
    # Each check gets its own answer: the write's block (it was the read's allow), the
    # read's allow (it was the report's answer).
    assert write == {"result": "block", "allowed": False, "for": "delete_everything"}, write
    assert read == {"result": "allow", "allowed": True, "for": "order_read"}, read
