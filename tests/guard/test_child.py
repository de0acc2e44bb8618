"""``claros_guard.child.stop_group`` alone, on real processes in sessions of their own:
stdin closed, then SIGTERM, then SIGKILL, the whole group, as far as each needs. (Each
sleeps 60 s at most: a failed test leaves nothing running for long.)"""

from __future__ import annotations

import signal
import sys

import anyio
import anyio.abc
import pytest

from claros_guard.child import GRACE, TERM_WAIT, group_alive, stop_group

pytestmark = pytest.mark.anyio

READS_STDIN = "import sys; sys.stdin.read()"
IGNORES_EOF = "import time; time.sleep(60)"
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('started', flush=True); time.sleep(60)"
)
LEAVES_A_CHILD = (
    "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; "
    "time.sleep(60)']); print('started', flush=True)"
)


async def spawn(code: str) -> anyio.abc.Process:
    process = await anyio.open_process(
        [sys.executable, "-c", code], start_new_session=True, stderr=None
    )
    if "started" in code:  # wait until it is set up (its SIGTERM handler, its child)
        assert process.stdout is not None
        with anyio.fail_after(30):
            assert b"started" in await process.stdout.receive()
    return process


async def stopped(process: anyio.abc.Process, hurry: anyio.Event | None = None) -> int:
    with anyio.fail_after(GRACE + TERM_WAIT + 10):
        await stop_group(process, hurry or anyio.Event())
    assert not group_alive(process.pid)
    assert process.returncode is not None
    return process.returncode


async def test_a_server_that_exits_on_eof_is_only_asked() -> None:
    assert await stopped(await spawn(READS_STDIN)) == 0


async def test_a_server_that_ignores_eof_gets_sigterm() -> None:
    assert await stopped(await spawn(IGNORES_EOF)) == -signal.SIGTERM


async def test_a_server_that_ignores_sigterm_gets_sigkill() -> None:
    assert await stopped(await spawn(IGNORES_TERM)) == -signal.SIGKILL


async def test_hurry_skips_the_grace_periods() -> None:
    hurry = anyio.Event()
    hurry.set()
    started = anyio.current_time()
    assert await stopped(await spawn(IGNORES_TERM), hurry) == -signal.SIGKILL
    # Without hurry this takes GRACE + TERM_WAIT at least; with it, about HURRIED.
    assert anyio.current_time() - started < GRACE + TERM_WAIT


async def test_children_a_server_leaves_behind_are_stopped() -> None:
    process = await spawn(LEAVES_A_CHILD)
    with anyio.fail_after(10):
        while process.returncode is None:
            await anyio.sleep(0.02)
    assert group_alive(process.pid)  # the server is gone, its child is not
    assert await stopped(process) == 0
