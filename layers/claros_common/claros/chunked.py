"""A binary stream's lines, read a quarter of a megabyte at a time.

``next_line`` hands them out one by one, as iterating over the file would. A reader that
works on many lines at once (``ChainVerifier.feed_written_run``) takes the buffer itself:
``buf[pos:end]`` holds whole lines only (each ended by ``\\n``, the last line of the
stream perhaps not), and it moves ``pos`` past the lines it took. That saves a bytes
object and a Python call per line, and lets a digest of the lines be updated once per
buffer.

Pure code: no storage, no network.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mmap import mmap

__all__ = ["CHUNK", "ChunkedLines", "LineTooLong"]

# Big enough that a Python call per buffer costs nothing per line, small enough to
# stay in the caches (and to keep the reader's memory small).
CHUNK = 1 << 18


class LineTooLong(ValueError):
    """A line longer than the reader's ``max_line``: not read further."""

    def __init__(self, length: int, max_line: int) -> None:
        super().__init__(f"a line is longer than {max_line:,} bytes (read {length:,} of it)")
        self.length = length
        self.max_line = max_line


def _nothing(_: int) -> bytes:
    return b""


class ChunkedLines:
    def __init__(
        self, read: Callable[[int], bytes], size: int | None = None, max_line: int | None = None
    ) -> None:
        """``read``: a binary stream's ``read`` (``b""`` at its end); ``size``: how much
        to ask for at a time (``CHUNK``); ``max_line``: a line longer than this raises
        ``LineTooLong`` once that much of it is read (memory stays bounded however long a
        line an untrusted stream holds)."""
        self._read = read
        self._size = size or CHUNK
        self.max_line = max_line
        self._eof = False
        self.buf: bytes | mmap = b""
        self.pos = 0  # the first byte not handed out yet
        self.end = 0  # after the last whole line in ``buf`` (or the stream's last line)

    @classmethod
    def whole(cls, buf: bytes | mmap, end: int) -> ChunkedLines:
        """The lines of ``buf[:end]``, read in place (``buf``, e.g. a buffer of shared
        memory, is not copied): the whole stream, its last line perhaps unended."""
        lines = cls(_nothing)
        lines.buf, lines.end, lines._eof = buf, end, True
        return lines

    def fill(self) -> bool:
        """Make ``buf[pos:end]`` hold at least one line; False at the end of the stream."""
        if self.pos < self.end:
            return True
        if self._eof:  # every line handed out (at the end, ``end`` is where data ends)
            return False
        parts = [self.buf[self.pos :]]  # the start of a line the last read cut
        held = len(parts[0])
        while not self._eof:
            if self.max_line is not None and held > self.max_line:
                raise LineTooLong(held, self.max_line)
            chunk = self._read(self._size)
            if not chunk:
                self._eof = True
                break
            parts.append(chunk)
            if b"\n" in chunk:
                break
            held += len(chunk)
        self.buf = b"".join(p for p in parts if p)  # one chunk alone: no copy
        self.pos = 0
        # The last line of the stream may have no newline: then it ends at the end.
        self.end = len(self.buf) if self._eof else self.buf.rfind(b"\n") + 1
        return self.end > 0

    def next_line(self) -> bytes | None:
        """The next line with its ``\\n`` (the stream's last perhaps without), or None."""
        if not self.fill():
            return None
        at = self.buf.find(b"\n", self.pos, self.end)
        stop = self.end if at < 0 else at + 1
        line = self.buf[self.pos : stop]
        self.pos = stop
        return line
