"""The wrapped server as a child process: started in a session (so a process group) of its
own, its stdio carried as JSON-RPC lines, and stopped as the MCP SDK's stdio client stops
a server: its stdin closed, ``GRACE`` seconds to exit, then SIGTERM to the whole group,
``TERM_WAIT`` seconds more, then SIGKILL to the group.

Two things go further than the SDK, so that a session through the guard leaves nothing
running: the group is stopped even when the server itself exits on time but leaves
children of its own behind (the SDK stops only a server that is still there), and
``hurry`` (the guard signalled again while it stops: the agent's client escalating) sends
SIGTERM at once and SIGKILL ``HURRIED`` seconds later, so the guard is done before a
client that also waits 2 s then 2 s kills it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

__all__ = ["GRACE", "HURRIED", "TERM_WAIT", "child_stdio", "group_alive", "stop_group"]

log = logging.getLogger("claros_guard.child")

GRACE = 2.0  # the SDK's PROCESS_TERMINATION_TIMEOUT
TERM_WAIT = 2.0  # the SDK's FORCE_KILL_TIMEOUT
HURRIED = 0.5
_KILL_WAIT = 2.0
_POLL = 0.02
_CHUNK = 1 << 16


@contextlib.asynccontextmanager
async def child_stdio(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    hurry: anyio.Event,
    max_line: int,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``argv`` and carry its stdout/stdin as JSON-RPC message streams; on exit,
    stop it and its whole group (``stop_group``)."""
    process = await anyio.open_process(
        argv, env=env, cwd=cwd, stderr=sys.stderr, start_new_session=True
    )
    # No await between the spawn and the try below: a cancellation there would leak it.
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tg:
        try:
            tg.start_soon(_read_stdout, process, read_send, max_line)
            tg.start_soon(_write_stdin, process, write_receive)
            yield read_receive, write_send
        finally:
            with anyio.CancelScope(shield=True):
                write_send.close()
                read_receive.close()
                await stop_group(process, hurry)
            tg.cancel_scope.cancel()


async def _read_stdout(
    process: anyio.abc.Process, send: MemoryObjectSendStream[SessionMessage | Exception], limit: int
) -> None:
    """The server's stdout as messages, one per line. Linear in a line's length: the
    chunks of a line are kept and joined once, when it ends (adding each chunk to the whole
    and splitting it again took most of a minute over a 40 MB answer:
    tests/security/test_bulky_record_stalls_the_guard.py)."""
    assert process.stdout is not None
    parts: list[bytes] = []  # the line so far
    size = 0
    skipping = False  # inside a line longer than ``limit``, dropped
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        async with send:
            async for chunk in process.stdout:
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    piece = chunk[start:end]
                    start = end + 1
                    if skipping:
                        skipping = False
                        continue
                    line = b"".join([*parts, piece]) if parts else piece
                    parts, size = [], 0
                    if line.strip():
                        await _deliver(send, _parse(line))
                rest = chunk[start:]
                if rest and not skipping:
                    parts.append(rest)
                    size += len(rest)
                    if size > limit:
                        parts, size, skipping = [], 0, True
                        await _deliver(send, ValueError(f"a message longer than {limit} bytes"))


async def _deliver(
    send: MemoryObjectSendStream[SessionMessage | Exception], item: SessionMessage | Exception
) -> None:
    """Hand on a message; once nobody reads (the guard is stopping), drop it, and keep
    reading: a server blocked writing to a full pipe could not see its stdin close."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        await send.send(item)


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:  # handed to the dispatcher's on_stream_exception
        return exc


async def _write_stdin(
    process: anyio.abc.Process, receive: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    assert process.stdin is not None
    try:
        async with receive:
            async for message in receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass  # the server closed its stdin or exited: its stdout ending says the rest


async def stop_group(process: anyio.abc.Process, hurry: anyio.Event) -> None:
    """Close stdin, wait ``GRACE``; SIGTERM the group, wait ``TERM_WAIT``; SIGKILL it.
    Each wait ends as soon as no process of the group is left (zombies do not count:
    orphans are reaped by whoever is PID 1, which may be slow or never)."""
    pgid = process.pid  # start_new_session: the leader's pid is the group's id
    if process.stdin is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _gone(process, pgid, GRACE, hurry):
        _signal(pgid, signal.SIGTERM)
        stopped = await _gone(process, pgid, TERM_WAIT, hurry)
        if not stopped and hurry.is_set():
            stopped = await _gone(process, pgid, HURRIED)
        if not stopped:
            _signal(pgid, signal.SIGKILL)
            if not await _gone(process, pgid, _KILL_WAIT):
                log.warning("the wrapped server's processes (group %d) outlived SIGKILL", pgid)
    # Bounded: a survivor still holding the stdout pipe would keep ``aclose`` waiting.
    with anyio.move_on_after(1.0), contextlib.suppress(ProcessLookupError, OSError):
        await process.aclose()


async def _gone(
    process: anyio.abc.Process, pgid: int, timeout: float, hurry: anyio.Event | None = None
) -> bool:
    """Whether the whole group is gone within ``timeout`` (False at once on ``hurry``)."""
    deadline = anyio.current_time() + timeout
    while process.returncode is None or group_alive(pgid):
        if anyio.current_time() >= deadline or (hurry is not None and hurry.is_set()):
            return False
        await anyio.sleep(_POLL)
    return True


def _signal(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs. On Linux /proc says, and a zombie
    (exited, not yet reaped) does not count; elsewhere signal 0 to the group."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False
