"""A lean HTTP/1.1 keep-alive client for the guard's requests to Claros.

A check is on the agent's path, so what the client costs per request counts: measured on
the bench machine, ``httpx.AsyncClient`` spends ~2 ms of CPU per request (URL merging,
cookies, auth and redirect layers, header validation, the anyio stream wrappers), this
client ~0.3 ms, and on a busy machine CPU is wall time several times over. Its answer is a
slim ``Answer`` (what the guard reads of ``httpx.Response``, ~30 µs less to build) whose
JSON orjson reads where that gives what ``json.loads`` gives.

What it does, and no more: ``http`` and ``https`` (the TLS context httpx would build),
one write per request (headers and body together), idle connections kept open for the
next request (a few) and dropped once the server has closed them. The HTTP/1.1 itself is
h11's (the protocol library under httpx): it frames the request and reads the answer
(``Content-Length``, chunked or up to the close, 1xx interim answers, keep-alive).
Errors are httpx's exception types, so callers treat both clients alike; a request that
found a kept connection already closed (no byte of an answer) is sent once more on a new
one. ``HttpClarosApi`` falls back to httpx
where this one does not go (a proxy from the environment, a test's mock transport).

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
import h11
import httpx
import orjson

__all__ = [
    "Answer",
    "AnswerHeaders",
    "AnswerTooLarge",
    "KeepAlivePool",
    "Outgoing",
    "loads",
    "proxied",
]

_MAX_HEAD = 64 * 1024  # bytes of a status line and headers
_KEEP_IDLE = 4  # connections kept for the next requests
_READ = 64 * 1024  # bytes asked of the socket at a time


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


@dataclass(frozen=True)
class Outgoing:
    """One request of a ``pipeline``."""

    method: str
    path: str
    json_body: Any = None
    headers: Mapping[str, str] | None = None


# Made once: json.dumps with keywords builds a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# RFC 9110's token and field value (what h11 checks), only to say which header it refused.
_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_VALUE = re.compile(r"(?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?")


def _unsendable(method: str, path: str, fields: Sequence[tuple[str, str]]) -> str:
    """What h11 refused to frame, said without any header's value."""
    for name, value in fields:
        if not (name.isascii() and value.isascii()):
            return f"the header {name!r} is not ASCII"
        if not _TOKEN.fullmatch(name):
            return f"illegal header name {name!r}"
        if not _VALUE.fullmatch(value):
            return f"illegal header {name!r} (a line break or a control character in its value)"
    return (
        f"{method!r} {path!r} is not a request line (a method token, then a target of "
        "visible ASCII)"
    )


class KeepAlivePool:
    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        connect_timeout: float,
        max_body: int | None = None,
        max_answer: int | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        self.max_body = max_body
        self.max_answer = max_answer
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
        self._fixed = list(fixed.items())
        self._idle: list[_Connection] = []
        self._closed = False

    async def aclose(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def _frame(
        self, method: str, path: str, json_body: Any, headers: Mapping[str, str] | None
    ) -> tuple[h11.Request, bytes]:
        body = b""
        fields = [*self._fixed, *(headers or {}).items()]
        if json_body is not None:
            body = encoded(json_body)
            if self.max_body is not None and len(body) > self.max_body:
                raise RequestTooLarge(len(body), self.max_body)
            fields.append(("Content-Type", "application/json"))
        if body or method in ("POST", "PUT", "PATCH"):
            fields.append(("Content-Length", str(len(body))))
        try:
            request = h11.Request(method=method, target=f"{self.prefix}{path}", headers=fields)
        except (h11.LocalProtocolError, UnicodeEncodeError) as exc:
            # A line break in a header's value, a name that is no token, a character that
            # is not ASCII. h11's words quote the value, which may be the key
            # (``Authorization``): the message names the header only.
            raise httpx.LocalProtocolError(
                f"cannot send this request: {_unsendable(method, path, fields)}"
            ) from exc
        return request, body

    async def request(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        request, body = self._frame(method, path, json_body, headers)
        try:
            with anyio.fail_after(self.timeout):
                while self._idle:
                    kept = self._idle.pop()
                    if not kept.usable():
                        kept.close()
                        continue
                    try:
                        return await self._exchange(kept, request, body)
                    except _Stale:
                        continue  # closed by the server while idle: a new connection
                return await self._exchange(await self._connect(), request, body, fresh=True)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer within {self.timeout:g} s") from exc

    async def pipeline(self, requests: Sequence[Outgoing]) -> list[Answer | httpx.HTTPError]:
        """Send ``requests`` in one write on one connection and read their answers in
        order: per request its answer, or the error that kept it from one (a request the
        server may or may not have run: send only requests that are safe to send again,
        such as reports under an Idempotency-Key). What a connection closed before its
        first answer left unanswered goes once more on a new one, as in ``request``."""
        out: list[Answer | httpx.HTTPError] = []
        framed: list[tuple[h11.Request, bytes] | httpx.HTTPError] = []
        for req in requests:
            try:
                framed.append(self._frame(req.method, req.path, req.json_body, req.headers))
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
        self, conn: _Connection, framed: Sequence[tuple[h11.Request, bytes]]
    ) -> tuple[list[Answer], httpx.HTTPError | None, bool]:
        """The answers read before the connection ended (all, when it did not), the error
        that ended it, and whether it ended cleanly after a whole answer. One h11 parser
        per request: the bytes one answer's parser read past its end are the next's."""
        parsers, data = [], b""
        for request, body in framed:
            parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
            data += parser.send(request) or b""
            if body:
                data += parser.send(h11.Data(data=body)) or b""
            data += parser.send(h11.EndOfMessage()) or b""
            parsers.append(parser)
        answers: list[Answer] = []
        keep = False
        try:
            conn.writer.write(data)
            await conn.writer.drain()
            extra = b""
            for parser in parsers:
                seen = _Seen()
                if extra:
                    parser.receive_data(extra)
                answers.append(await _read_answer(conn.reader, parser, seen, self.max_answer))
                keep = parser.our_state is h11.DONE and parser.their_state is h11.DONE
                extra, _closed = parser.trailing_data
                if not keep:
                    break  # the server closes the connection after this answer
            if len(answers) < len(parsers):
                closed = httpx.RemoteProtocolError("the server closed the connection")
                return answers, closed, True
            keep = keep and not extra  # bytes past the last answer answer nothing sent
            return answers, None, True
        except (OSError, h11.RemoteProtocolError) as exc:
            keep = False  # an answer half read: what is left of it is no next answer's
            ended = httpx.RemoteProtocolError(
                f"the connection ended before a whole answer: {exc!r}"
            )
            return answers, ended, False
        except BaseException:
            # Cut off mid-answer (the pipeline's time ran out, a task cancelled): the rest
            # of this answer, and the answers after it, would come to the next request
            # sent on the connection, which would read another request's answer as its
            # own (a check given another call's allow). Closed, never kept.
            keep = False
            raise
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
        self, conn: _Connection, request: h11.Request, body: bytes, *, fresh: bool = False
    ) -> Answer:
        # h11 writes the request and reads the answer (1xx interim answers, Content-Length,
        # chunked or up to the close) and says whether the connection may carry the next.
        parser = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        data = parser.send(request) or b""  # one write: headers and body together
        if body:
            data += parser.send(h11.Data(data=body)) or b""
        data += parser.send(h11.EndOfMessage()) or b""
        seen = _Seen()
        try:
            conn.writer.write(data)
            await conn.writer.drain()
            answer = await _read_answer(conn.reader, parser, seen, self.max_answer)
            # Bytes read past the answer answer nothing sent: the connection is not reused.
            seen.keep = (
                parser.our_state is h11.DONE
                and parser.their_state is h11.DONE
                and not parser.trailing_data[0]
            )
            return answer
        except (OSError, h11.RemoteProtocolError) as exc:
            if not seen.got_any and not fresh:
                raise _Stale() from exc
            if isinstance(exc, h11.RemoteProtocolError) and not seen.closed:
                raise httpx.RemoteProtocolError(f"not an HTTP/1.1 answer: {exc}") from exc
            raise httpx.RemoteProtocolError(
                f"the connection ended before a whole answer: {exc!r}"
            ) from exc
        finally:
            if seen.keep and not self._closed and len(self._idle) < _KEEP_IDLE:
                self._idle.append(conn)
            else:
                conn.close()


def encoded(json_body: Any) -> bytes:
    """A request's JSON body as sent: compact, UTF-8, no NaN."""
    return _ENCODER.encode(json_body).encode("utf-8")


class RequestTooLarge(httpx.LocalProtocolError):
    """A request body over the pool's limit, never sent: Claros would answer 413 and close
    without reading it, and a large enough body breaks the connection before that answer
    can be read (so it would look like an outage, not the refusal it is)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the request is {size} bytes; Claros takes at most {limit}")
        self.size, self.limit = size, limit


class AnswerTooLarge(httpx.RemoteProtocolError):
    """An answer over the pool's limit: not read further, its connection closed (an
    answer that never ends held every byte in memory until the timeout)."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        said = f" (Content-Length: {size})" if size is not None else ""
        super().__init__(f"an answer over {limit} bytes{said}; not read further")
        self.limit = limit


@dataclass
class _Seen:
    got_any: bool = False  # a byte of an answer came (else a kept connection was stale)
    closed: bool = False  # the server closed the connection
    keep: bool = False  # the connection may carry the next request


def _check_declared(answer: h11.Response, limit: int | None) -> None:
    """An answer whose Content-Length is over ``limit`` is refused before its body."""
    if limit is None:
        return
    for name, value in answer.headers:
        if name == b"content-length" and value.isdigit() and len(value) < 20:
            if int(value) > limit:
                raise AnswerTooLarge(limit, int(value))


async def _read_answer(
    reader: asyncio.StreamReader, parser: h11.Connection, seen: _Seen, limit: int | None
) -> Answer:
    answer: h11.Response | None = None
    parts: list[bytes] = []
    held = 0
    while True:
        event = parser.next_event()
        if event is h11.NEED_DATA:
            chunk = await reader.read(_READ)
            seen.got_any, seen.closed = seen.got_any or bool(chunk), not chunk
            parser.receive_data(chunk)  # b"": the server closed the connection
        elif isinstance(event, h11.Response):
            answer = event
            _check_declared(event, limit)
        elif isinstance(event, h11.Data):
            parts.append(bytes(event.data))
            held += len(event.data)
            if limit is not None and held > limit:
                raise AnswerTooLarge(limit)
        elif isinstance(event, h11.EndOfMessage):
            if answer is None:  # pragma: no cover - h11 gives the Response first
                raise h11.RemoteProtocolError("an answer without a status line")
            fields = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in answer.headers]
            reason = answer.reason.decode("latin-1")
            return Answer(answer.status_code, reason, AnswerHeaders(fields), b"".join(parts))
        elif isinstance(event, h11.ConnectionClosed):
            raise h11.RemoteProtocolError("the connection closed before an answer")
        # h11.InformationalResponse: an interim 1xx answer, the real one follows
