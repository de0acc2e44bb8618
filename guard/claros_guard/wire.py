"""One JSON value per line over a byte stream (guards' Unix sockets). No MCP here, so the
hooks can use it without loading the MCP SDK."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = ["MAX_LINE", "LineChannel"]

MAX_LINE = 64 * 1024 * 1024


class LineChannel:
    """One JSON value per line over a byte stream (a Unix socket), with bounded lines."""

    def __init__(self, stream: anyio.abc.ByteStream, max_line: int = MAX_LINE) -> None:
        self.stream = stream
        self._buffered = BufferedByteReceiveStream(stream)
        self.max_line = max_line

    async def send(self, value: Any) -> None:
        data = json.dumps(value, separators=(",", ":"), default=str).encode() + b"\n"
        await self.stream.send(data)

    async def receive(self) -> Any:
        """The next value; raises ``EOFError`` when the peer closed, ``ValueError`` when a
        line is too long or not JSON."""
        try:
            line = await self._buffered.receive_until(b"\n", self.max_line)
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError) as exc:
            raise EOFError("the other side closed the connection") from exc
        except anyio.DelimiterNotFound as exc:
            raise ValueError(f"a line longer than {self.max_line} bytes") from exc
        return json.loads(line)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.stream.aclose()
