"""Transports: byte streams in, JSON-RPC messages (or JSON lines) out. Nothing MCP-aware.

* ``agent_stdio()``: the agent's client speaks to the guard on stdin/stdout. File
  descriptors 0 and 1 are claimed as the SDK's ``stdio_server`` does (0 then reads
  /dev/null, 1 writes to stderr, so nothing stray reaches the wire); the wire itself runs
  on asyncio pipes, without a thread hop per message (through a thread when stdin or
  stdout is a regular file). Every line is screened (``claros_guard.shape``): what is not
  one well-formed MCP message is answered with a JSON-RPC error and goes no further.
* ``upstream(spec)``: the wrapped server, a command over stdio (``child``: its own
  process group, stopped as the SDK's ``stdio_client`` stops a server; with the guard's
  environment less the Claros key) or a Streamable HTTP URL. A server's message is at
  most ``MAX_LINE`` either way: a line over stdio, a JSON answer or an SSE event over HTTP
  (``_http_client``).

``wire.LineChannel`` (newline-delimited JSON over a Unix socket) carries the guards' talk
with each other and with the hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import anyio
import anyio.abc
import anyio.to_thread
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from claros_guard.child import child_stdio
from claros_guard.shape import parse_line, screened, too_long

__all__ = [
    "MAX_LINE",
    "UpstreamSpec",
    "agent_stdio",
    "describe_bad_message",
    "upstream",
]

log = logging.getLogger("claros_guard.transport")

MAX_LINE = 64 * 1024 * 1024  # one JSON-RPC message on stdio, or one peer line

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


@dataclass(frozen=True)
class UpstreamSpec:
    """The wrapped server: a command (``command`` + ``args``) or a Streamable HTTP ``url``."""

    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    # The Claros key: no variable holding it reaches the wrapped server (THREATS.md §2:
    # with it, another process could pass as a guard of this key to the peers).
    withhold: str | None = field(default=None, repr=False)

    def child_env(self) -> dict[str, str]:
        """The guard's environment less every variable holding the key, then ``env``."""
        key = (self.withhold or "").strip()

        def holds_key(value: str) -> bool:  # a key too short to look for in text: as is
            return bool(key) and (key in value if len(key) >= 16 else value.strip() == key)

        inherited = {name: value for name, value in os.environ.items() if not holds_key(value)}
        return {**inherited, **dict(self.env)}

    def describe(self) -> str:
        if self.url:
            return self.url
        return " ".join([self.command or "", *self.args]).strip()


def _encode(message: SessionMessage) -> bytes:
    return (message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


def _decode(line: bytes) -> SessionMessage | Exception:
    try:
        return parse_line(line)
    except Exception as exc:  # a Refusal: ``shape.screened`` answers it
        return exc


def _is_stream_fd(fd: int) -> bool:
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@contextlib.contextmanager
def _claim_stdio() -> Any:
    """Private duplicates of fds 0 and 1; meanwhile 0 reads /dev/null and 1 goes to stderr."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
    finally:
        os.close(devnull)
    try:
        yield wire_in, wire_out
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
            os.dup2(wire_out, 1)


async def _pump_in(reader: asyncio.StreamReader, send: MemoryObjectSendStream[Any]) -> None:
    async with send:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    await send.send(_decode(exc.partial))
                return
            except asyncio.LimitOverrunError as exc:
                await _skip_line(reader, exc.consumed)
                await send.send(too_long(MAX_LINE))
                continue
            except (ConnectionError, OSError):
                return
            if line.strip():
                await send.send(_decode(line))


async def _skip_line(reader: asyncio.StreamReader, consumed: int) -> None:
    """Drop an oversized line: what was buffered, then the rest up to its newline."""
    while True:
        await reader.readexactly(consumed)
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            consumed = exc.consumed


async def _file_pump_in(file: BinaryIO, send: MemoryObjectSendStream[Any]) -> None:
    """As ``_pump_in``, from a regular file (through a thread)."""
    async with send:
        while line := await anyio.to_thread.run_sync(file.readline, MAX_LINE + 1):
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):
                    line = await anyio.to_thread.run_sync(file.readline, MAX_LINE + 1)
                await send.send(too_long(MAX_LINE))
            elif line.strip():
                await send.send(_decode(line))


async def _file_pump_out(
    file: anyio.AsyncFile[bytes], receive: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    async with receive:
        async for message in receive:
            await file.write(_encode(message))
            await file.flush()


async def _pump_out(
    writer: asyncio.StreamWriter, receive: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    async with receive:
        async for message in receive:
            try:
                writer.write(_encode(message))
                await writer.drain()
            except (ConnectionError, OSError):
                return


@contextlib.asynccontextmanager
async def agent_stdio() -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """The agent's side: JSON-RPC messages on the process's stdin and stdout."""
    async with _agent_wire() as (read, write), screened(read, write) as streams:
        yield streams


@contextlib.asynccontextmanager
async def _agent_wire() -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    if not (_is_stream_fd(0) and _is_stream_fd(1)):
        async with _agent_files() as streams:
            yield streams
        return
    loop = asyncio.get_running_loop()
    with _claim_stdio() as (wire_in, wire_out):
        reader = asyncio.StreamReader(limit=MAX_LINE)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0)
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        in_send, in_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump_in, reader, in_send)
                tg.start_soon(_pump_out, writer, out_receive)
                try:
                    yield in_receive, out_send
                finally:
                    tg.cancel_scope.cancel()
        finally:
            read_transport.close()
            write_transport.close()
            for stream in (in_send, in_receive, out_send, out_receive):
                stream.close()


@contextlib.asynccontextmanager
async def _agent_files() -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Stdin or stdout a regular file: the same lines, read and written in a thread."""
    with _claim_stdio() as (wire_in, wire_out):
        reader = os.fdopen(wire_in, "rb")
        writer = anyio.wrap_file(os.fdopen(wire_out, "wb"))
        in_send, in_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_file_pump_in, reader, in_send)
                tg.start_soon(_file_pump_out, writer, out_receive)
                try:
                    yield in_receive, out_send
                finally:
                    tg.cancel_scope.cancel()
        finally:
            for stream in (in_send, in_receive, out_send, out_receive):
                stream.close()
            with contextlib.suppress(OSError):
                reader.close()
                await writer.aclose()


class _NoSdkTraceback(logging.Filter):
    """The SDK logs a traceback for every line a wrapped server writes that is not
    JSON-RPC (a server printing to stdout). The guard says so itself, in one line
    (``Upstream``); here the stdio client's record is dropped and the HTTP client's is cut
    to one line."""

    DROP = frozenset({"Failed to parse JSONRPC message from server"})
    SHORTEN = frozenset({"Error parsing JSON response", "Error parsing SSE message"})

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in self.DROP:
            return False
        if record.msg in self.SHORTEN and record.exc_info and record.exc_info[1] is not None:
            first = str(record.exc_info[1]).strip().splitlines()[:1]
            record.msg = f"{record.msg} from the wrapped server: {' '.join(first)[:200]}"
            record.exc_info = None
            record.exc_text = None
        return True


_FILTER = _NoSdkTraceback()


def _quiet_sdk() -> None:
    for name in ("mcp.client.stdio", "mcp.client.streamable_http"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def describe_bad_message(exc: Exception) -> str:
    """One line on a message that is not JSON-RPC: what is wrong, and its start."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors(include_url=False)[0]
            shown = repr(first.get("input"))
            shown = shown[:80] + ("..." if len(shown) > 80 else "")
            return f"{first.get('msg')}: {shown}"
        except Exception:  # not pydantic's shape after all: say it plainly below
            pass
    return " ".join(str(exc).split())[:200] or type(exc).__name__


@contextlib.asynccontextmanager
async def upstream(
    spec: UpstreamSpec, hurry: anyio.Event | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The wrapped server's side: its JSON-RPC messages as SDK streams. A command runs in
    a process group of its own, stopped as a whole on exit (``child``); ``hurry`` cuts
    that stop short."""
    _quiet_sdk()
    if spec.url:
        async with (
            _http_client() as client,
            streamable_http_client(
                spec.url, http_client=client, max_sse_event_size=MAX_LINE
            ) as streams,
        ):
            yield streams
        return
    if not spec.command:
        raise ValueError("the wrapped server needs a command or a URL")
    async with child_stdio(
        [spec.command, *spec.args],
        env=spec.child_env(),
        cwd=spec.cwd,
        hurry=hurry or anyio.Event(),
        max_line=MAX_LINE,
    ) as streams:
        yield streams


class AnswerTooLongError(httpx2.StreamError):
    """A Streamable HTTP answer past ``MAX_LINE``. A ``StreamError``: the SDK fails the
    request that waits on the answer with it, as it fails one it cannot parse."""


class _Bounded(httpx2.AsyncByteStream):
    """A response body that stops being read past ``limit`` bytes."""

    def __init__(self, stream: httpx2.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise AnswerTooLongError(
                    f"the wrapped server's answer is over {self._limit} bytes, the most the "
                    "guard reads of one message; it was not read further"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


async def _bound_body(response: httpx2.Response) -> None:
    # An SSE stream is bounded per event by the SDK (max_sse_event_size) and may run for
    # hours; any other body is one message.
    sse = response.headers.get("content-type", "").lower().startswith("text/event-stream")
    if not sse and isinstance(response.stream, httpx2.AsyncByteStream):
        response.stream = _Bounded(response.stream, MAX_LINE)


def _http_client() -> httpx2.AsyncClient:
    """The SDK's default client (its timeouts), with each answer that is not an SSE
    stream read up to ``MAX_LINE``: the SDK reads a JSON answer whole. A response hook,
    so that a proxy from the environment is bounded too."""
    client = create_mcp_http_client()
    client.event_hooks = {**client.event_hooks, "response": [_bound_body]}
    return client


def command_spec(argv: Sequence[str], cwd: str | None = None) -> UpstreamSpec:
    return UpstreamSpec(command=argv[0], args=tuple(argv[1:]), cwd=cwd)
