"""A lean HTTP/1.1 keep-alive client for the guard's requests to Claros.

A check is on the agent's path, so what the client costs per request counts: measured on
the bench machine, ``httpx.AsyncClient`` spends ~2 ms of CPU per request (URL merging,
cookies, auth and redirect layers, header validation, the anyio stream wrappers), this
client ~0.3 ms, and on a busy machine CPU is wall time several times over.

What it does, and no more: ``http`` and ``https`` (the TLS context httpx would build),
one write per request (headers and body together), responses with ``Content-Length``,
chunked or up to the close, idle connections kept open for the next request (a few) and
dropped once the server has closed them. Errors are httpx's exception types, so callers
treat both clients alike; a request that found a kept connection already closed (no
byte of an answer) is sent once more on a new one. ``HttpClarosApi`` falls back to httpx
where this one does not go (a proxy from the environment, a test's mock transport).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

__all__ = ["KeepAlivePool", "proxied"]

_MAX_HEAD = 64 * 1024  # bytes of a status line and headers
_KEEP_IDLE = 4  # connections kept for the next requests


def proxied(url: str) -> bool:
    """Whether the environment routes ``url`` through a proxy (as httpx would)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


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
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._idle: list[_Connection] = []
        self._closed = False

    async def aclose(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    async def request(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        body = b""
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        if json_body is not None:
            body = json.dumps(
                json_body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode("utf-8")
            extra += "Content-Type: application/json\r\n"
        if body or method in ("POST", "PUT", "PATCH"):
            extra += f"Content-Length: {len(body)}\r\n"
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n{self._fixed}{extra}\r\n"
        data = head.encode("latin-1") + body
        try:
            with anyio.fail_after(self.timeout):
                while self._idle:
                    kept = self._idle.pop()
                    if not kept.usable():
                        kept.close()
                        continue
                    try:
                        return await self._exchange(kept, data, method)
                    except _Stale:
                        continue  # closed by the server while idle: a new connection
                return await self._exchange(await self._connect(), data, method, fresh=True)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer within {self.timeout:g} s") from exc

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
        self, conn: _Connection, data: bytes, method: str, *, fresh: bool = False
    ) -> httpx.Response:
        keep = False
        got_any = False
        try:
            conn.writer.write(data)
            await conn.writer.drain()
            while True:
                try:
                    head = await conn.reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    got_any = got_any or bool(exc.partial)
                    raise
                got_any = True
                status, version, fields = _parse_head(head)
                if status >= 200:
                    break  # 1xx: an interim answer, the real one follows
            content, keep = await _read_body(conn.reader, status, version, fields, method)
            return httpx.Response(status, headers=fields, content=content)
        except (OSError, asyncio.IncompleteReadError) as exc:
            if not got_any and not fresh:
                raise _Stale() from exc
            raise httpx.RemoteProtocolError(
                f"the connection ended before a whole answer: {exc!r}"
            ) from exc
        except (asyncio.LimitOverrunError, ValueError) as exc:
            raise httpx.RemoteProtocolError(f"not an HTTP/1.1 answer: {exc}") from exc
        finally:
            if keep and not self._closed and len(self._idle) < _KEEP_IDLE:
                self._idle.append(conn)
            else:
                conn.close()


def _parse_head(head: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"status line {lines[0][:80]!r}")
    status = int(rest[:3])
    fields: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"header line {line[:80]!r}")
        fields.append((name.strip(), value.strip()))
    return status, version, fields


async def _read_body(
    reader: asyncio.StreamReader,
    status: int,
    version: str,
    fields: list[tuple[str, str]],
    method: str,
) -> tuple[bytes, bool]:
    """The body, and whether the connection can carry the next request."""
    found = {name.lower(): value for name, value in fields}
    connection = found.get("connection", "").lower()
    keep = version == "HTTP/1.1" and "close" not in connection
    if method == "HEAD" or status in (204, 304):
        return b"", keep
    if "chunked" in found.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass  # trailers
                return b"".join(parts), keep
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = found.get("content-length")
    if length is not None:
        return await reader.readexactly(int(length)), keep
    return await reader.read(), False  # up to the close
