"""Fault: a server wrapped over Streamable HTTP (``--upstream-url``) answers a call with
a JSON body far larger than any message the guard takes over stdio.

Over stdio the guard reads one message up to 64 MiB (``transport.MAX_LINE``); longer ones
fail the request that waits on them, saying so. Over Streamable HTTP the MCP SDK's client
read an ``application/json`` answer whole, however long (its own bound covers an SSE
event only, at 1 MiB: an answer over 1 MiB in an event failed there, one of 72 MiB as
JSON was held and relayed whole). A broken or hostile server at the URL could fill the
guard's memory.

Now both kinds of answer are bounded as a stdio message is: a JSON body past 64 MiB
stops being read and fails its request with the reason, and an SSE event may be as long
as a stdio message.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from claros_guard.transport import MAX_LINE, UpstreamSpec, upstream

PAST_THE_BOUND = MAX_LINE + (8 << 20)
CHUNK = b" " * (1 << 20)


class BulkyServer:
    """Answers the first POST ``200`` with a chunked JSON-RPC result whose text is
    ``size`` spaces, as a JSON body or (``sse``) as one SSE event; counts the bytes it got
    out."""

    def __init__(self, size: int, *, sse: bool = False) -> None:
        self.size = size
        self.sse = sse
        self.sent = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.done = threading.Event()
        self.closed = threading.Event()
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
            kind = b"text/event-stream" if self.sse else b"application/json"
            head = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\n" % kind
            head += b"Transfer-Encoding: chunked\r\n\r\n"
            start = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"'
            end = b'"}]}}'
            if self.sse:
                start, end = b"event: message\ndata: " + start, end + b"\n\n"
            try:
                conn.sendall(head + b"%x\r\n%s\r\n" % (len(start), start))
                while self.sent < self.size and not self.done.is_set():
                    conn.sendall(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                    self.sent += len(CHUNK)
                conn.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(end), end))
            except OSError:
                pass  # the guard closed the connection: what it must do
            # Open until the test ends: closed with the request's body unread, the socket
            # would reset the connection before the client read the answer.
            self.closed.wait(30)

    def close(self) -> None:
        self.done.set()
        self.closed.set()
        self.sock.close()


@contextlib.contextmanager
def serving(size: int, *, sse: bool = False) -> Iterator[BulkyServer]:
    server = BulkyServer(size, sse=sse)
    try:
        yield server
    finally:
        server.close()


def _call(url: str) -> SessionMessage | Exception:
    """What the guard's side of the wrapped server gives for one tools/call."""

    async def run() -> SessionMessage | Exception:
        async with upstream(UpstreamSpec(url=url)) as (read, write):
            call = JSONRPCRequest(jsonrpc="2.0", id=1, method="tools/call",
                                  params={"name": "refund_create", "arguments": {}})  # fmt: skip
            await write.send(SessionMessage(call))
            with anyio.fail_after(60):
                got: SessionMessage | Exception = await read.receive()
            return got

    return anyio.run(run)


@pytest.fixture
def bulky() -> Iterator[BulkyServer]:
    with serving(PAST_THE_BOUND) as server:
        yield server


def test_a_json_answer_past_the_stdio_bound_fails_its_request(bulky: BulkyServer) -> None:
    got = _call(bulky.url)
    assert isinstance(got, SessionMessage), got
    assert isinstance(got.message, JSONRPCError), (
        f"the guard took the server's {PAST_THE_BOUND >> 20} MiB answer whole: "
        f"{type(got.message).__name__}"
    )
    assert f"over {MAX_LINE} bytes" in got.message.error.message, got.message.error
    bulky.done.set()
    # What the guard took in is the bound and what the sockets' buffers held, no more.
    assert bulky.sent <= MAX_LINE + (8 << 20), bulky.sent


def test_an_sse_answer_as_long_as_a_stdio_message_may_be_is_read() -> None:
    """The SDK's own bound on an SSE event was 1 MiB: a 2 MiB answer, read over stdio,
    failed over Streamable HTTP."""
    with serving(2 << 20, sse=True) as server:
        got = _call(server.url)
    assert isinstance(got, SessionMessage) and isinstance(got.message, JSONRPCResponse), got
    assert len(got.message.result["content"][0]["text"]) == 2 << 20


def test_an_sse_event_past_the_stdio_bound_fails_its_request() -> None:
    with serving(PAST_THE_BOUND, sse=True) as server:
        got = _call(server.url)
        server.done.set()
    assert isinstance(got, SessionMessage) and isinstance(got.message, JSONRPCError), got
    assert server.sent <= MAX_LINE + (8 << 20), server.sent
