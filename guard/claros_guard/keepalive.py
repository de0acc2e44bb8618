"""A lean HTTP/1.1 keep-alive client for the guard's requests to Claros.

A check is on the agent's path, so what the client costs per request counts: measured on
the bench machine, ``httpx.AsyncClient`` spends ~2 ms of CPU per request (URL merging,
cookies, auth and redirect layers, header validation, the anyio stream wrappers), h11
(the protocol library under httpx) ~0.2 ms to frame a request and read its answer (its
state machine, ~0.11 ms of it, whatever the answer's size) plus ~0.03 ms to build an
``httpx.Response``, and this client ~0.08 ms (framing ~0.02, reading ~0.06 ms a 20-rule
check's 5 KB answer; the same machine, loaded).

What it does, and no more: ``http`` and ``https`` (the TLS context httpx would build),
one write per request (headers and body together), idle connections kept open for the
next request (a few) and dropped once the server has closed them. The request is framed
here: the pool's fixed headers (``Host``, ``Accept``, ``User-Agent``, the key) are checked
and written out once, each request adds its line, its own headers (checked as h11 checks
them: a token for a name, no line break or control character in a value, so nothing can
smuggle a header in) and its body. The answer is read here as RFC 9112 frames it:
``Content-Length``, chunked (extensions and trailers skipped) or up to the close, 1xx
interim answers skipped, no body for a 204 or a 304; kept for the next request unless
it said ``Connection: close``, was HTTP/1.0, or ran to the close. Anything else (a status
line that is not HTTP/1.x, a header line that is not ``name: value``, a bad length or
chunk size, both ``Content-Length`` and ``Transfer-Encoding``, a head over 64 KiB) is not
an answer. Errors are httpx's exception types, so callers treat both clients alike; a
request that found a kept connection already closed (no byte of an answer) is sent once
more on a new one. ``HttpClarosApi`` falls back to httpx where this one does not go (a
proxy from the environment, a test's mock transport).

``pipeline`` sends several requests in one write on one kept connection and reads their
answers in order (HTTP/1.1 pipelining; each is still its own request): the guard's
background reports, so that a run of them costs one write, one wake of the server's
connection thread and one read loop, not one round trip each.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import orjson

__all__ = ["Answer", "AnswerHeaders", "KeepAlivePool", "Outgoing", "proxied"]

_MAX_HEAD = 64 * 1024  # bytes of a status line and headers (and of a chunked body's trailers)
_KEEP_IDLE = 4  # connections kept for the next requests

# RFC 9110's grammar, as h11 (httpx's protocol library) checks it.
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_TARGET = re.compile(rb"[\x21-\x7e]+")
_VALUE = re.compile(rb"(?:[\x21-\x7e]+(?:[ \t]+[\x21-\x7e]+)*)?")
_STATUS = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([\t\x20-\x7e\x80-\xff]*))?")
_FIELD = re.compile(
    rb"([-!#$%&'*+.^_`|~0-9a-zA-Z]+):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*"
)
_CHUNK = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;[^\r\n]*)?[ \t]*")
_DIGITS = re.compile(rb"[0-9]+")


def proxied(url: str) -> bool:
    """Whether the environment routes ``url`` through a proxy (as httpx would)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


Fields = list[tuple[str, str]]  # (lowercase name, value), in the order received


class AnswerHeaders:
    """An answer's headers: names looked up in any case; a name given twice reads as its
    values joined by ``", "`` (as httpx reads it)."""

    __slots__ = ("_items",)

    def __init__(self, items: Fields) -> None:
        self._items = items

    def get(self, name: str, default: str | None = None) -> str | None:
        key = name.lower()
        values = [v for k, v in self._items if k == key]
        return ", ".join(values) if values else default

    def __getitem__(self, name: str) -> str:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def items(self) -> Fields:
        return list(self._items)


class Answer:
    """One answer from Claros: what the guard reads of ``httpx.Response`` (its status,
    headers, body, text and JSON), without building one (~30 µs a request)."""

    __slots__ = ("content", "headers", "reason_phrase", "status_code")

    def __init__(
        self, status_code: int, reason_phrase: str, headers: AnswerHeaders, content: bytes
    ) -> None:
        self.status_code = status_code
        self.reason_phrase = reason_phrase
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return loads(self.content)

    def __repr__(self) -> str:
        return f"<Answer [{self.status_code} {self.reason_phrase}]>"


# orjson reads an integer of 19 digits or more as a float (json keeps it exact): such a
# run of digits anywhere in the text (a need's arguments carry the agent's) sends the
# text to json. Anything orjson refuses (NaN, 1e400, a lone surrogate, a BOM, deep
# nesting) json reads or refuses in its own words; everything else both read alike. The
# run is looked for as every digit made "0" and the rest ".", then a plain substring
# search: a regular expression took longer than json itself on a 5 KB answer.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_LONG_RUN = b"0" * 19


def loads(content: bytes) -> Any:
    """``json.loads(content)``, by orjson where that gives the same value (~3x faster on
    a 20-rule check's ~5 KB answer, the digit scan included)."""
    if _LONG_RUN not in content.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError:
            pass
    return json.loads(content)


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class _Stale(Exception):
    """A kept connection the server had closed: nothing of an answer came."""


class _NotAnAnswer(Exception):
    """Bytes that are not an HTTP/1.1 answer."""


@dataclass(frozen=True)
class Outgoing:
    """One request of a ``pipeline``."""

    method: str
    path: str
    json_body: Any = None
    headers: Mapping[str, str] | None = None


def _header_line(name: str, value: str) -> bytes:
    try:
        raw_name, raw_value = name.encode("ascii"), value.encode("ascii")
    except UnicodeEncodeError:
        raise httpx.LocalProtocolError(
            f"cannot send this request: the header {name!r} is not ASCII"
        ) from None
    # The value is never in the message: it may be the key (``Authorization``).
    if not _TOKEN.fullmatch(raw_name):
        raise httpx.LocalProtocolError(f"cannot send this request: illegal header name {name!r}")
    if not _VALUE.fullmatch(raw_value):
        raise httpx.LocalProtocolError(
            f"cannot send this request: illegal header {name!r} (a line break or a control "
            "character in its value)"
        )
    return b"%s: %s\r\n" % (raw_name, raw_value)


# Made once: json.dumps with keywords builds a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class KeepAlivePool:
    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        connect_timeout: float,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._ssl: ssl.SSLContext | None = (
            httpx.create_ssl_context() if parts.scheme == "https" else None
        )
        default_port = self.port == (443 if self._ssl else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        fixed = {
            "Host": host if default_port else f"{host}:{self.port}",
            "Accept": "application/json",
            "User-Agent": "claros-guard",
            **headers,
        }
        # Checked and written out once, not per request; a header that cannot be sent
        # fails each request, as it would have with the header given per request.
        self._fixed = b""
        self._unsendable: httpx.LocalProtocolError | None = None
        try:
            self._fixed = b"".join(_header_line(k, v) for k, v in fixed.items())
        except httpx.LocalProtocolError as exc:
            self._unsendable = exc
        self._idle: list[_Connection] = []
        self._closed = False

    async def aclose(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def _frame(
        self, method: str, path: str, json_body: Any, headers: Mapping[str, str] | None
    ) -> bytes:
        """The request's bytes: its line, the pool's headers, its own, its body."""
        if self._unsendable is not None:
            raise self._unsendable
        try:
            verb, target = method.encode("ascii"), f"{self.prefix}{path}".encode("ascii")
        except UnicodeEncodeError:
            verb = target = b""
        if not _TOKEN.fullmatch(verb) or not _TARGET.fullmatch(target):
            raise httpx.LocalProtocolError(
                f"cannot send this request: {method!r} {self.prefix}{path!r} is not a "
                "request line (a method token, then a target of visible ASCII)"
            )
        parts = [b"%s %s HTTP/1.1\r\n" % (verb, target), self._fixed]
        for name, value in (headers or {}).items():
            parts.append(_header_line(name, value))
        body = b""
        if json_body is not None:
            body = _ENCODER.encode(json_body).encode("utf-8")
            parts.append(b"Content-Type: application/json\r\n")
        if body or method in ("POST", "PUT", "PATCH"):
            parts.append(b"Content-Length: %d\r\n" % len(body))
        parts.append(b"\r\n")
        parts.append(body)
        return b"".join(parts)

    async def request(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        data = self._frame(method, path, json_body, headers)
        try:
            with anyio.fail_after(self.timeout):
                while self._idle:
                    kept = self._idle.pop()
                    if not kept.usable():
                        kept.close()
                        continue
                    try:
                        return await self._exchange(kept, method, data)
                    except _Stale:
                        continue  # closed by the server while idle: a new connection
                return await self._exchange(await self._connect(), method, data, fresh=True)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer within {self.timeout:g} s") from exc

    async def pipeline(self, requests: Sequence[Outgoing]) -> list[Answer | httpx.HTTPError]:
        """Send ``requests`` in one write on one connection and read their answers in
        order: per request its answer, or the error that kept it from one (a request the
        server may or may not have run: send only requests that are safe to send again,
        such as reports under an Idempotency-Key). What a connection closed before its
        first answer left unanswered goes once more on a new one, as in ``request``."""
        out: list[Answer | httpx.HTTPError] = []
        framed: list[tuple[str, bytes] | httpx.HTTPError] = []
        for req in requests:
            try:
                framed.append((req.method, self._frame(req.method, req.path, req.json_body,
                                                       req.headers)))  # fmt: skip
            except httpx.HTTPError as exc:
                framed.append(exc)
        good = [f for f in framed if not isinstance(f, httpx.HTTPError)]
        answers: list[Answer] = []
        failure: httpx.HTTPError | None = None
        try:
            with anyio.fail_after(self.timeout):
                while len(answers) < len(good):
                    conn, fresh = await self._kept_or_new()
                    got, failure, clean = await self._exchange_many(conn, good[len(answers) :])
                    answers += got
                    if failure is None:
                        break
                    if (got and clean) or not (got or fresh):
                        # Closed by the server after a whole answer, or a kept connection
                        # it had closed while idle: the rest on a new connection.
                        failure = None
                        continue
                    break  # a fresh connection failed, or one ended mid-answer
        except TimeoutError:
            failure = httpx.ReadTimeout(f"no answer within {self.timeout:g} s")
        except httpx.HTTPError as exc:  # could not connect
            failure = exc
        answered = iter(answers)
        for item in framed:
            if isinstance(item, httpx.HTTPError):
                out.append(item)
                continue
            answer = next(answered, None)
            if answer is not None:
                out.append(answer)
            else:
                out.append(failure or httpx.RemoteProtocolError("no answer"))
        return out

    async def _kept_or_new(self) -> tuple[_Connection, bool]:
        while self._idle:
            kept = self._idle.pop()
            if kept.usable():
                return kept, False
            kept.close()
        return await self._connect(), True

    async def _exchange_many(
        self, conn: _Connection, framed: Sequence[tuple[str, bytes]]
    ) -> tuple[list[Answer], httpx.HTTPError | None, bool]:
        """The answers read before the connection ended (all, when it did not), the error
        that ended it, and whether it ended cleanly after a whole answer. The bytes past
        one answer stay in the reader for the next."""
        answers: list[Answer] = []
        keep = False
        try:
            conn.writer.write(b"".join(data for _, data in framed))
            await conn.writer.drain()
            for method, _ in framed:
                seen = _Seen()
                answer, keep = await _read_answer(conn.reader, method, seen)
                answers.append(answer)
                if not keep:
                    break  # the server closes the connection after this answer
            if len(answers) < len(framed):
                closed = httpx.RemoteProtocolError("the server closed the connection")
                return answers, closed, True
            return answers, None, True
        except (OSError, _NotAnAnswer) as exc:
            keep = False
            ended = httpx.RemoteProtocolError(
                f"the connection ended before a whole answer: {exc!r}"
            )
            return answers, ended, False
        finally:
            if keep and not self._closed and len(self._idle) < _KEEP_IDLE:
                self._idle.append(conn)
            else:
                conn.close()

    async def _connect(self) -> _Connection:
        try:
            with anyio.fail_after(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl else None,
                    limit=_MAX_HEAD,
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(
                f"could not connect within {self.connect_timeout:g} s"
            ) from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Connection(reader, writer)

    async def _exchange(
        self, conn: _Connection, method: str, data: bytes, *, fresh: bool = False
    ) -> Answer:
        seen = _Seen()
        keep = False
        try:
            conn.writer.write(data)  # one write: headers and body together
            await conn.writer.drain()
            answer, keep = await _read_answer(conn.reader, method, seen)
            return answer
        except (OSError, _NotAnAnswer) as exc:
            keep = False
            if not seen.got_any and not fresh:
                raise _Stale() from exc
            if isinstance(exc, _NotAnAnswer) and not seen.closed:
                raise httpx.RemoteProtocolError(f"not an HTTP/1.1 answer: {exc}") from exc
            raise httpx.RemoteProtocolError(
                f"the connection ended before a whole answer: {exc!r}"
            ) from exc
        finally:
            if keep and not self._closed and len(self._idle) < _KEEP_IDLE:
                self._idle.append(conn)
            else:
                conn.close()


@dataclass
class _Seen:
    got_any: bool = False  # a byte of an answer came (else a kept connection was stale)
    closed: bool = False  # the server closed the connection


async def _line(reader: asyncio.StreamReader, seen: _Seen, budget: list[int]) -> bytes:
    """One line of a head (without its line end: CRLF, or a bare LF as h11 takes it),
    counted against ``budget``, the head's bytes left."""
    try:
        raw = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        seen.got_any = seen.got_any or bool(exc.partial)
        seen.closed = True
        raise _NotAnAnswer("the connection closed before a whole answer") from exc
    except asyncio.LimitOverrunError as exc:
        seen.got_any = True  # bytes came: never taken for a stale connection and sent again
        raise _NotAnAnswer(f"a head longer than {_MAX_HEAD} bytes") from exc
    seen.got_any = True
    budget[0] -= len(raw)
    if budget[0] < 0:
        raise _NotAnAnswer(f"a head longer than {_MAX_HEAD} bytes")
    return raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]


async def _fields(reader: asyncio.StreamReader, seen: _Seen, budget: list[int]) -> Fields:
    """Header (or trailer) lines up to the blank line, names lowercased; a line starting
    with a space or a tab continues the one before (obsolete folding, as h11 reads it)."""
    fields: list[tuple[bytes, bytes]] = []
    while line := await _line(reader, seen, budget):
        if line[:1] in (b" ", b"\t") and fields:
            name, value = fields[-1]
            fields[-1] = (name, (value + b" " + line.strip(b" \t")).strip(b" \t"))
            continue
        match = _FIELD.fullmatch(line)
        if match is None:
            raise _NotAnAnswer(f"a header line that is not 'name: value': {line[:60]!r}")
        fields.append((match.group(1).lower(), match.group(2)))
    return [(n.decode("latin-1"), v.decode("latin-1")) for n, v in fields]


def _tokens(headers: Fields, name: str) -> list[str]:
    """A comma-separated header's values, lowercased (``Connection``, ``Transfer-Encoding``)."""
    return [t.strip().lower() for k, v in headers if k == name for t in v.split(",") if t.strip()]


async def _exactly(reader: asyncio.StreamReader, n: int, seen: _Seen) -> bytes:
    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError as exc:
        seen.closed = True
        raise _NotAnAnswer(f"the body ended after {len(exc.partial)} of {n} bytes") from exc


async def _chunked(reader: asyncio.StreamReader, seen: _Seen) -> bytes:
    parts: list[bytes] = []
    budget = [_MAX_HEAD]
    while True:
        size_line = await _line(reader, seen, budget)
        match = _CHUNK.fullmatch(size_line)
        if match is None:
            raise _NotAnAnswer(f"a chunk size that is not one: {size_line[:40]!r}")
        size = int(match.group(1), 16)
        if size == 0:
            await _fields(reader, seen, budget)  # trailers, skipped
            return b"".join(parts)
        parts.append(await _exactly(reader, size, seen))
        if await _exactly(reader, 2, seen) != b"\r\n":
            raise _NotAnAnswer("a chunk not followed by CRLF")


async def _read_answer(
    reader: asyncio.StreamReader, method: str, seen: _Seen
) -> tuple[Answer, bool]:
    """The next answer on ``reader`` and whether the connection may carry another."""
    while True:
        budget = [_MAX_HEAD]
        status_line = await _line(reader, seen, budget)
        match = _STATUS.fullmatch(status_line)
        if match is None:
            raise _NotAnAnswer(f"{status_line[:60]!r} is not a status line")
        minor, status = match.group(1), int(match.group(2))
        reason = (match.group(3) or b"").decode("latin-1")
        headers = await _fields(reader, seen, budget)
        if 100 <= status < 200:
            if status == 101:
                raise _NotAnAnswer("101 Switching Protocols, which the guard never asks for")
            continue  # an interim answer (100 Continue): the real one follows
        break
    keep = minor == b"1" and "close" not in _tokens(headers, "connection")
    lengths = {n.strip() for k, v in headers if k == "content-length" for n in v.split(",")}
    encodings = _tokens(headers, "transfer-encoding")
    if lengths and encodings:
        raise _NotAnAnswer("an answer with both Content-Length and Transfer-Encoding")
    if method == "HEAD" or status in (204, 304):
        body = b""
    elif encodings:
        if encodings != ["chunked"]:
            raise _NotAnAnswer(f"Transfer-Encoding {', '.join(encodings)}: only chunked is read")
        body = await _chunked(reader, seen)
    elif lengths:
        if len(lengths) != 1 or not _DIGITS.fullmatch(length := next(iter(lengths)).encode()):
            raise _NotAnAnswer(f"Content-Length {', '.join(sorted(lengths))!r}")
        body = await _exactly(reader, int(length), seen)
    else:  # no length: the body runs to the close, and the connection goes with it
        keep = False
        body = await reader.read()
        seen.closed = True
    return Answer(status, reason, AnswerHeaders(headers), body), keep
