"""Which process is at the other end of this process's stdout: the MCP client that started
the guard, or the Claude Code that ran the hook (stdout, not stdin: the client reads it to
the end, while it may close a hook's stdin once it has written the input). A hook stays
out of an MCP call only when the guard of that server serves the very Claude Code that
runs the hook (the guard checks the call then); the agent's name alone (``claude-code``)
does not say which of several sessions a guard serves.

* a socket (Node, so Claude Code, gives its children ``socketpair`` ends): the peer's pid
  as the kernel tells it (``SO_PEERCRED``; ``LOCAL_PEERPID`` on macOS): the process that
  made the pair;
* a pipe (Linux): the topmost of this process's ancestors that holds the same pipe
  (wrappers such as ``npx`` hold it too, inherited; the client made it, above them).

None when it cannot be told (a file or a terminal, no ``/proc``). Only the standard library's
``os``, ``socket``, ``struct`` and ``pathlib``: the hooks load this.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys
from pathlib import Path

__all__ = ["stdout_peer"]

_MAX_DEPTH = 64
_LOCAL_PEERPID = 0x002  # macOS: SOL_LOCAL (0), LOCAL_PEERPID


def stdout_peer(fd: int = 1) -> int | None:
    """The pid of the process at the other end of ``fd``, or None."""
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    if stat.S_ISSOCK(info.st_mode):
        return _socket_peer(fd)
    if stat.S_ISFIFO(info.st_mode):
        return _pipe_holder(info)
    return None


def _socket_peer(fd: int) -> int | None:
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return None
    try:
        if hasattr(socket, "SO_PEERCRED"):
            raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid = int(struct.unpack("3i", raw)[0])
        elif sys.platform == "darwin":
            pid = int(sock.getsockopt(0, _LOCAL_PEERPID))
        else:
            return None
    except OSError:
        return None
    finally:
        sock.close()
    return pid if pid > 0 else None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:  # noqa: PTH123
            text = fh.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def _holds(pid: int, info: os.stat_result) -> bool:
    try:
        entries = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for entry in entries:
        try:
            found = entry.stat()
        except OSError:
            continue
        if (found.st_dev, found.st_ino) == (info.st_dev, info.st_ino):
            return True
    return False


def _pipe_holder(info: os.stat_result) -> int | None:
    holder: int | None = None
    pid: int | None = os.getpid()
    for _ in range(_MAX_DEPTH):
        pid = _parent(pid) if pid is not None else None
        if pid is None or pid < 1:  # pid 1 may be the client itself (a container's)
            break
        if _holds(pid, info):
            holder = pid
        elif holder is not None:
            break  # the holders are one unbroken line up from here: the client is found
    return holder
