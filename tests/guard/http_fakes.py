"""Real HTTP servers for tests that need Claros to answer, fail or vanish on cue: a
``ThreadingHTTPServer`` on 127.0.0.1 in a daemon thread, so the code under test goes
through real sockets (keep-alive, refused connections, timeouts) rather than a mock."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import httpx

Answer = tuple[int, dict[str, str], bytes]
"""Status, headers (Content-Length is added) and body."""

JSON = {"Content-Type": "application/json"}
RELAYED_HEADERS = ("authorization", "content-type", "idempotency-key")


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # with the query, as sent
    headers: dict[str, str]
    body: bytes


class HttpFake:
    """Answers every request with ``respond``, which subclasses override. ``port`` 0
    picks a free one; ``stop`` then ``start`` serves again on the same port, so a client
    sees the server go down and come back. A ``respond`` that holds a request waits on
    ``release``, which ``stop`` sets: nothing held outlives the server."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.release = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def respond(self, request: Request) -> Answer:
        raise NotImplementedError

    def start(self) -> None:
        if self._httpd is not None:
            return
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # The headers and the body leave in two writes: without this, Nagle's
                # algorithm holds the body for the client's delayed ACK, ~40 ms an answer
                # on a kept-alive connection (720 polls of a login test took 34 s).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with fake._lock:
                    fake._open.add(self.connection)

            def finish(self) -> None:
                with fake._lock:
                    fake._open.discard(self.connection)
                super().finish()

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = Request(self.command, self.path, dict(self.headers.items()), body)
                status, headers, content = fake.respond(request)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PUT = do_DELETE = _answer

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
        with self._lock:
            connections, self._open = list(self._open), set()
        for conn in connections:  # keep-alive connections too: the server is gone
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.stop()  # a method, not ``close = stop``, so a subclass's ``stop`` is kept

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def relay(target: str, request: Request, *, timeout: float = 30) -> Answer:
    """``request`` passed on to ``target`` (Claros) with only the headers Claros reads;
    the answer comes back as JSON, whatever Claros said."""
    headers = {k: v for k, v in request.headers.items() if k.lower() in RELAYED_HEADERS}
    answer = httpx.request(
        request.method,
        target + request.path,
        headers=headers,
        content=request.body,
        timeout=timeout,
    )
    return answer.status_code, JSON, answer.content
