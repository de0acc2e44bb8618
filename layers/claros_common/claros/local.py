"""The local server: every function's routes over HTTP/1.1 on one machine.

Each request becomes the API Gateway v2 event the Lambda would get, and goes through the
same resolver, so local and AWS share one code path. Threads serve connections
concurrently (keep-alive honoured); each thread builds its own resolver. A heartbeat
thread signs a checkpoint whenever a tail stays unsigned too long.

At the socket: a connection that sends nothing for ``CONNECTION_TIMEOUT_S`` (30 s) is
closed, whether it idles between keep-alive requests or sends a shorter body than its
Content-Length said (408 then); a request, request line to body, must arrive whole
within as long of its first byte, however steadily it trickles in (408); a write that
cannot go out for as long gives up the same way. The request line and each header line
are at most 64 KiB, with at most 100 headers (414 and 431). A body is framed by one
Content-Length of ASCII digits, never a Transfer-Encoding (400, 411), so no proxy in
front reads a request's end elsewhere. At most ``connection_cap()`` connections are open
(one thread each); when full, the one that has waited longest on its client is closed to
make room (503 when all are busy answering). Every error, the stdlib's included (an
unknown method: 501; OPTIONS, TRACE and CONNECT: 405 with Allow; HTTP/0.9 and HTTP/2:
505), is the API's JSON error shape with a status line, or the web app's error page for
a browser on /app. A client that goes away mid-answer costs one log line.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import logging
import re
import resource
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from claros import jsonutil
from claros.api.app import FUNCTIONS, build_resolver
from claros.api.http import PERMISSIONS, PUBLIC, ClarosResolver
from claros.api.streaming import accepting
from claros.api.web import PAGE_HEADERS
from claros.checkpoints import due_checkpoints
from claros.web import pages
from claros.wiring import Services

__all__ = ["CONNECTION_TIMEOUT_S", "MAX_CONNECTIONS", "LocalServer", "connection_cap", "serve"]

log = logging.getLogger("claros.local")

CONNECTION_TIMEOUT_S = 30.0  # a connection silent this long (reading or writing) is closed
MAX_CONNECTIONS = 1000  # open at once (one thread each), or half the open-file limit
_STREAM_CHUNK = 256 * 1024  # bytes of a streamed body written per chunk
_TEXT_TYPES = ("application/json", "application/x-ndjson", "text/")
# The API's error codes for the statuses the socket layer answers itself.
_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    411: "length_required",
    413: "payload_too_large",
    414: "uri_too_long",
    417: "expectation_failed",
    431: "headers_too_large",
    501: "not_implemented",
    505: "http_version_not_supported",
}
_MESSAGES = {
    414: "the request line is over 65536 bytes",
    431: "the request headers are too large: at most 65536 bytes a line and 100 headers",
}
_WRITE_BUFFER = 64 * 1024  # an answer up to this size goes out in one write
_SPARE_RESOLVERS = 64  # resolvers kept for the next connections
_LINGER_S = 2.0  # after an error answer, what the client still sends is read this long
_LINGER_BYTES = 4 * 1024 * 1024  # ... or up to this much
_GONE = (ConnectionError, TimeoutError)  # the client reset, closed, or stopped reading


def connection_cap() -> int:
    """How many connections the server holds open at once: ``MAX_CONNECTIONS``, or half
    the process's open-file limit when that is lower (the rest is for the database, the
    key files and the listening socket), and never under 8."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):  # pragma: no cover - every POSIX system has it
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 2))


def _linger(sock: socket.socket) -> None:
    """Before closing after an error answer, read (and drop) what the client still sends
    for up to ``_LINGER_S``: closed with unread bytes, the socket sends a reset, and the
    client's system drops the answer it had not read yet (a 413 or a 408 lost)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)  # the answer, then the end of it
        deadline = time.monotonic() + _LINGER_S
        drained = 0
        while drained < _LINGER_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                return
            drained += len(chunk)


@functools.cache
def _route_pattern(template: str) -> re.Pattern[str]:
    """A route as the API Gateway writes it (``/v1/check/{check_id}/outcome``) as a regex."""
    parts = re.split(r"\{\w+\}", template)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))


def _allowed_methods(path: str) -> list[str]:
    """The methods some route takes at ``path``."""
    routes = [*PERMISSIONS, *PUBLIC]
    return sorted(
        {method for method, template in routes if _route_pattern(template).fullmatch(path)}
    )


_LINE_BREAK = re.compile(r"[\r\n\x00]")
_DIGITS = re.compile(r"[0-9]+")  # a Content-Length (int() also reads "+1", "1_0", "١")


def _header_breaking_out(result: dict[str, Any]) -> str | None:
    """The name of a header of a route's answer whose name or value holds CR, LF or NUL
    (it would not stay one header line), or None."""
    fields = [
        *(result.get("headers") or {}).items(),
        *((name, v) for name, vs in (result.get("multiValueHeaders") or {}).items() for v in vs),
        *(("Set-Cookie", cookie) for cookie in result.get("cookies") or []),
    ]
    for name, value in fields:
        if _LINE_BREAK.search(f"{name}{value}"):
            return str(name)
    return None


class _LambdaContext:
    """The few attributes Powertools reads from a Lambda context."""

    function_name = "claros-local"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:claros-local"
    memory_limit_in_mb = 1024
    aws_request_id = ""
    log_group_name = "local"
    log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


class _Paced(io.RawIOBase):
    """One connection's bytes from the client, read against two clocks: the wait for a
    request's first byte (``idle_s`` per read) and the whole request, head and body,
    which must arrive within ``request_s`` of its first byte (a client sending a byte
    now and then, each within ``idle_s``, used to hold its thread for ever).

    It also says whether the connection waits on its client (``waiting_since``: since
    when), which the server reads to pick the connection to close when it is full."""

    def __init__(self, sock: socket.socket, idle_s: float, request_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._idle_s = idle_s
        self._request_s = request_s
        self._deadline: float | None = None
        self.waiting_since: float | None = time.monotonic()
        self.evicted = False
        self.too_slow = False  # the last read found the request's time up
        self.linger = False  # an error was answered with the request maybe not all read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        timeout = self._idle_s
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                self.too_slow = True
                raise TimeoutError(f"the request did not arrive whole within {self._request_s:g} s")
            timeout = min(timeout, left)
        try:
            if timeout == self._idle_s:  # as set for the answer's writes (one syscall less)
                got = self._sock.recv_into(buffer)
            else:
                self._sock.settimeout(timeout)
                try:
                    got = self._sock.recv_into(buffer)
                finally:
                    self._sock.settimeout(self._idle_s)  # what the answer's writes wait
        except TimeoutError:
            # Mid-request (not idle before one): the client is told why it is closed.
            self.too_slow = self._deadline is not None
            raise
        if not got and self.evicted:
            raise ConnectionAbortedError("closed to make room for another connection")
        if got and self._deadline is None:
            self._deadline = time.monotonic() + self._request_s
        return got

    def close_socket(self) -> None:
        """End the connection from another thread: a read it waits in returns at once."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def request_read(self) -> None:
        """The request is whole: the next one's clock starts at its own first byte."""
        self._deadline = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server: _Server
    server_version = "claros"
    sys_version = ""
    # The answer's headers and body leave in one write (flushed when the request is
    # done): written apart, the client wakes on the headers and, on a busy machine, the
    # body waits for the server's next time slice (up to ~10 ms per answer, measured).
    wbufsize = _WRITE_BUFFER

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.connection_timeout_s)
        self.paced = self.server.paced(self.connection)
        self.rfile.close()  # the stdlib's; the same socket read through the clocks instead
        self.rfile = io.BufferedReader(self.paced)
        # A streamed answer goes out in several writes; without this, Nagle's algorithm
        # and the client's delayed ACK add ~40 ms to them on a keep-alive connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # What an error found before the request line's version is read goes out as: the
    # stdlib's default, HTTP/0.9, writes no status line, only the body.
    default_request_version = "HTTP/1.1"

    def parse_request(self) -> bool:
        """The stdlib's, but an HTTP/0.9 request (``GET /``, no version) is refused at once
        (the stdlib waited for headers HTTP/0.9 does not send, until the timeout)."""
        raw: bytes = self.raw_requestline  # type: ignore[attr-defined]  # set by the stdlib
        words = str(raw, "iso-8859-1").rstrip("\r\n").split()
        if len(words) == 2:
            self.requestline = " ".join(words)
            self.command, self.request_version = "", self.default_request_version
            self.close_connection = True
            self.send_error(
                HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
                "HTTP/0.9 is not served: send HTTP/1.1 (or HTTP/1.0)",
            )
            return False
        return super().parse_request()

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: the interim answer goes out now (the write buffer
        would hold it), or the client waits for it before sending the body."""
        answered = super().handle_expect_100()
        self.wfile.flush()
        return answered

    def log_message(self, format: str, *args: Any) -> None:
        # Formatted only when it is logged: the stdlib calls this on every request.
        if log.isEnabledFor(logging.INFO):
            log.info("%s %s", self.address_string(), format % args)

    def handle_one_request(self) -> None:
        super().handle_one_request()
        if self.paced.too_slow and self.close_connection:
            # The stdlib closes a connection whose request line or headers time out
            # without a word; this one started a request, so it gets the reason.
            self.paced.too_slow = False
            self.command, self.request_version = "", self.default_request_version
            self.requestline = getattr(self, "requestline", "")
            timeout = self.server.connection_timeout_s
            self._error(408, f"the request did not arrive whole within {timeout:g} s")
        self.server.waiting(self.paced)  # for the next request (or the close)

    def handle(self) -> None:
        try:
            super().handle()
        except _GONE as exc:
            log.info("%s went away: %s", self.address_string(), exc.__class__.__name__)
            self.close_connection = True
        finally:
            self.server.give_back_resolver()

    def _wants_page(self) -> bool:
        """A browser on the web app, which gets the error page rather than JSON."""
        path = urlsplit(getattr(self, "path", "")).path
        if not (path == "/app" or path.startswith("/app/")):
            return False
        headers = getattr(self, "headers", None)
        if headers is None:
            return False
        content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        accept = headers.get("Accept") or ""
        return content_type == "application/x-www-form-urlencoded" or "text/html" in accept

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own errors (bad request line, headers too large, unknown method) in
        the API's JSON error shape."""
        self.log_error("code %d, message %s", code, message)
        if code == HTTPStatus.NOT_IMPLEMENTED:
            text = f"method {self.command!r} is not supported"
        else:
            text = _MESSAGES.get(code) or message or HTTPStatus(code).phrase
        self._error(code, text)

    def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        """Answer an error the socket layer finds, and close the connection (what is left
        of the request, if anything, is not read)."""
        self.close_connection = True
        paced: _Paced | None = getattr(self, "paced", None)
        if paced is not None:
            paced.linger = True
        if self._wants_page():
            page = pages.error_page(pages.Chrome(None, None), status, message)
            html_headers = {**PAGE_HEADERS, "Content-Type": "text/html; charset=utf-8"}
            self._reply(status, html_headers | (headers or {}), page.encode("utf-8"))
            return
        code = _CODES.get(status, "bad_request")
        body = jsonutil.dumps({"error": code, "message": message}).encode()
        self._reply(status, {"Content-Type": "application/json"} | (headers or {}), body)

    def _not_routed(self) -> None:
        """OPTIONS, TRACE, CONNECT: no route takes them (no CORS here; the API is called by
        the guard, the CLI and same-site pages)."""
        self.server.resolver()  # the routes are declared once a resolver is built
        path = urlsplit(self.path).path
        allowed = _allowed_methods(path)
        if not allowed:
            self._error(404, f"no route {self.command} {path}")
            return
        self._error(
            405,
            f"{self.command} is not served here; {path} takes {', '.join(allowed)}",
            {"Allow": ", ".join(allowed)},
        )

    def _body_length(self) -> int | None:
        """The body's length as the one Content-Length says, or None once the request is
        refused. Only one reading is possible: a proxy in front and this server must agree
        on where the request ends (RFC 9112 section 6.3), or what follows it is smuggled."""
        codings = self.headers.get_all("Transfer-Encoding") or []
        if codings:
            # No transfer coding is decoded here (not chunked, not "gzip, chunked"): with
            # one, the body's length is not Content-Length, whatever else came.
            self._error(
                411,
                f"send the body with a Content-Length, not Transfer-Encoding "
                f"({', '.join(codings)[:100]!r})",
            )
            return None
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1:
            self._error(400, "more than one Content-Length; send one")
            return None
        text = lengths[0].strip(" \t") if lengths else "0"
        if not _DIGITS.fullmatch(text):
            self._error(400, "Content-Length is not a number (ASCII digits only)")
            return None
        return int(text) if len(text) <= 18 else 10**18

    def _handle(self) -> None:
        limit = self.server.services.settings.max_body_bytes
        length = self._body_length()
        if length is None:
            return
        if length > limit:
            # Do not read it; the connection is closed after the answer.
            size = f"{length}" if length < 10**18 else "over 10**18"
            self._error(413, f"body is {size} bytes; the limit is {limit}")
            return
        try:
            target = self.path.encode("latin-1").decode("utf-8")
        except UnicodeError:
            self._error(400, "the request path is not UTF-8; percent-encode it")
            return
        try:
            raw = self.rfile.read(length) if length else b""
        except TimeoutError:
            self.paced.too_slow = False  # answered here
            self._error(
                408, f"the body did not arrive within {self.server.connection_timeout_s:g} s"
            )
            return
        if len(raw) < length:
            log.info("%s sent %d of %d body bytes", self.address_string(), len(raw), length)
            self._error(400, f"the body ended after {len(raw)} of its {length} bytes")
            return
        self.paced.request_read()
        if not self.server.busy(self.paced):
            raise ConnectionAbortedError("closed to make room for another connection")
        event = self._event(target, raw)
        with accepting() as pending:
            result = self.server.resolver().resolve(event, _LambdaContext())
        broken = _header_breaking_out(result)
        if broken is not None:
            # Whatever let a client's text into it (a bug by definition), never send it:
            # a CR or LF there would add headers (a cookie) or start the body early.
            log.error("%s %s made header %r with a line break: answered 500",
                      self.command, urlsplit(target).path, broken)  # fmt: skip
            self._error(500, "internal error; it has been logged")
            return
        if pending.chunks is not None and int(result.get("statusCode", 200)) == 200:
            self._write_stream(result, pending.chunks)
        else:
            self._write_result(result)

    def _event(self, target: str, raw: bytes) -> dict[str, Any]:
        url = urlsplit(target)
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        content_type = headers.get("content-type", "")
        is_text = not raw or content_type.startswith(_TEXT_TYPES)
        if is_text:
            try:
                body: str = raw.decode("utf-8")
            except UnicodeDecodeError:
                is_text = False
        if not is_text:
            body = base64.b64encode(raw).decode()
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        now = time.time()
        return {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": url.path,
            "rawQueryString": url.query,
            "headers": headers,
            "queryStringParameters": query or None,
            "cookies": [c.strip() for c in headers.get("cookie", "").split(";") if c.strip()]
            or None,
            "requestContext": {
                "accountId": "local",
                "apiId": "local",
                "domainName": headers.get("host", "localhost"),
                "http": {
                    "method": self.command,
                    "path": url.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": self.client_address[0],
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": uuid.uuid4().hex,
                "routeKey": "$default",
                "stage": "$default",
                "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                "timeEpoch": int(now * 1000),
            },
            "body": body or None,
            "isBase64Encoded": not is_text,
        }

    def _write_result(self, result: dict[str, Any]) -> None:
        headers = {k: str(v) for k, v in (result.get("headers") or {}).items()}
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(values)
        body_text = result.get("body") or ""
        body = base64.b64decode(body_text) if result.get("isBase64Encoded") else body_text.encode()
        status = int(result.get("statusCode", 200))
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection"):
                self.send_header(name, value)
        for cookie in result.get("cookies") or []:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _write_stream(self, result: dict[str, Any], chunks: Iterable[bytes]) -> None:
        """A body a route streamed (claros.api.streaming): HTTP/1.1 chunked, written as it
        is made, so memory stays flat whatever its size. A failure half-way leaves out the
        last chunk: the client sees a cut-off body, never a complete-looking one."""
        self.send_response(int(result.get("statusCode", 200)))
        for name, value in (result.get("headers") or {}).items():
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, str(value))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return
        buffer: list[bytes] = []
        held = 0
        try:
            for chunk in chunks:
                buffer.append(chunk)
                held += len(chunk)
                if held >= _STREAM_CHUNK:
                    self.wfile.write(b"%x\r\n%s\r\n" % (held, b"".join(buffer)))
                    buffer, held = [], 0
            if held:
                self.wfile.write(b"%x\r\n%s\r\n" % (held, b"".join(buffer)))
            self.wfile.write(b"0\r\n\r\n")
        except _GONE as exc:
            log.info("%s went away during a streamed answer: %s", self.address_string(),
                     exc.__class__.__name__)  # fmt: skip
            self.close_connection = True
        except Exception:
            log.exception("a streamed answer failed half-way")
            self.close_connection = True
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # let the producer release what it holds (a store cursor, a file)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle
    do_OPTIONS = do_TRACE = do_CONNECT = _not_routed


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        services: Services,
        connection_timeout_s: float,
        max_connections: int,
    ) -> None:
        super().__init__(address, _Handler)
        self.services = services
        self.connection_timeout_s = connection_timeout_s
        self.max_connections = max_connections
        # Each open connection (its thread's) and how it reads; guarded by _open_lock.
        self._open: dict[socket.socket, _Paced] = {}
        self._open_lock = threading.Lock()
        self.refused_full = 0  # connections answered 503: every one was busy
        self._local = threading.local()
        # Resolvers a finished connection gave back: building one (every route declared)
        # costs milliseconds, which a client opening a connection per request (a hook run)
        # would pay each time. One thread holds a resolver at a time.
        self._spare: list[ClarosResolver] = []
        self._spare_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints the traceback to stderr; log it instead (quietly when the
        # client just went away).
        exc = sys.exc_info()[1]
        if isinstance(exc, _GONE):
            log.info("%s went away: %s", client_address, exc.__class__.__name__)
        else:
            log.exception("error serving %s", client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A new connection gets a thread, up to ``max_connections`` open. When full, the
        connection that has waited longest on its client (idle between requests, or
        sending its request slowly) is closed to make room; when every one is busy with
        a request, the new one is answered 503 and closed."""
        paced = _Paced(request, self.connection_timeout_s, self.connection_timeout_s)
        with self._open_lock:
            # One already picked to be closed is on its way out: not counted.
            if sum(not p.evicted for p in self._open.values()) >= self.max_connections:
                waiting = [p for p in self._open.values() if p.waiting_since is not None]
                if not waiting:
                    self.refused_full += 1
                    self._refuse_full(request)
                    return
                victim = min(waiting, key=lambda p: p.waiting_since or 0.0)
                victim.evicted = True
                victim.waiting_since = None  # not picked twice
                victim.close_socket()
            self._open[request] = paced
        try:
            super().process_request(request, client_address)
        except Exception:
            with self._open_lock:
                self._open.pop(request, None)
            raise

    def _refuse_full(self, request: socket.socket) -> None:
        """Answer 503 without waiting on the client (a small answer the socket buffer
        takes at once), then close."""
        body = jsonutil.dumpb(
            {"error": "overloaded",
             "message": f"the server has {self.max_connections} connections open, all busy;"
                        " retry shortly"}
        )  # fmt: skip
        head = (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        log.warning("refused a connection: all %d are busy", self.max_connections)
        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(head + body)
            request.shutdown(socket.SHUT_WR)
        self.close_request(request)  # no lingering here: this is the accepting thread

    def paced(self, request: socket.socket) -> _Paced:
        with self._open_lock:
            return self._open[request]

    def busy(self, paced: _Paced) -> bool:
        """The connection's request is whole and being answered: not one to close. False
        when it was picked to be closed already."""
        with self._open_lock:
            if paced.evicted:
                return False
            paced.waiting_since = None
            return True

    def waiting(self, paced: _Paced) -> None:
        with self._open_lock:
            if not paced.evicted:
                paced.waiting_since = time.monotonic()

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            paced = self._open.pop(request, None)
        if paced is not None and paced.linger:
            _linger(request)
        super().shutdown_request(request)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def resolver(self) -> ClarosResolver:
        app: ClarosResolver | None = getattr(self._local, "app", None)
        if app is None:
            with self._spare_lock:
                app = self._spare.pop() if self._spare else None
            if app is None:
                app = build_resolver(self.services, FUNCTIONS)
            self._local.app = app
        return app

    @property
    def spare_resolvers(self) -> int:
        return len(self._spare)

    def give_back_resolver(self) -> None:
        """The connection of this thread is done: its resolver serves the next one."""
        app: ClarosResolver | None = getattr(self._local, "app", None)
        if app is None:
            return
        self._local.app = None
        with self._spare_lock:
            if len(self._spare) < _SPARE_RESOLVERS:
                self._spare.append(app)


class LocalServer:
    """A running local server (used by ``claros serve``, ``make run`` and the tests)."""

    def __init__(
        self,
        services: Services,
        host: str = "127.0.0.1",
        port: int = 8787,
        *,
        connection_timeout_s: float = CONNECTION_TIMEOUT_S,
        max_connections: int | None = None,
    ) -> None:
        self.services = services
        # The counts the Lambdas send as metrics (e.g. ``Overloaded``: 503s because the
        # ledger was too busy), kept here when nothing else collects them.
        self.metrics: Counter[str] = Counter()
        self._metrics_lock = threading.Lock()
        if not services.counts_metrics:
            services.metric = self._count
        cap = max_connections if max_connections is not None else connection_cap()
        self.httpd = _Server((host, port), services, connection_timeout_s, cap)
        self.host, self.port = str(self.httpd.server_address[0]), int(self.httpd.server_address[1])
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _count(self, name: str, value: float) -> None:
        with self._metrics_lock:
            self.metrics[name] += int(value)
        if name == "Overloaded":
            log.warning("answered 503: the ledger is overloaded (%d so far)", self.metrics[name])

    def _heartbeat(self) -> None:
        settings = self.services.settings
        interval = max(1.0, min(30.0, settings.checkpoint_max_age_s / 4))
        while not self._stop.wait(interval):
            try:
                due_checkpoints(
                    self.services.store,
                    self.services.signer,
                    every=settings.checkpoint_every,
                    max_age_s=settings.checkpoint_max_age_s,
                    anchor=self.services.anchor,
                )
            except Exception:  # keep beating; the next round retries
                log.exception("heartbeat checkpoint failed")

    def _serve(self) -> None:
        # A short poll so stop() returns quickly (the default waits up to 0.5 s).
        self.httpd.serve_forever(poll_interval=0.05)

    def start(self) -> LocalServer:
        for target in (self._serve, self._heartbeat):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def serve_forever(self) -> None:
        beat = threading.Thread(target=self._heartbeat, daemon=True)
        beat.start()
        try:
            self.httpd.serve_forever()
        finally:
            self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=5)


def serve(services: Services, host: str, port: int) -> None:
    server = LocalServer(services, host, port)
    log.info("Claros listening on %s (data in %s)", server.url, services.settings.data_dir)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        services.close()
