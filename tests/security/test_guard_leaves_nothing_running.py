"""The agent's session ends (its client closes the guard's stdin, or signals it) while the
wrapped server will not go quietly: it ignores stdin closing, perhaps SIGTERM too, and has
a child of its own. Nothing of the wrapped server may keep running: the guard stops its
whole process group as the MCP SDK's stdio client stops a server (stdin closed, 2 s,
SIGTERM, 2 s, SIGKILL), and no signal kills the guard while it does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.guard import conftest as guard_fixtures
from tests.guard.conftest import EVERYTHING, Workspace, requires_npx

claros = guard_fixtures.claros  # the guard tests' fixtures: one Claros, a workspace
workspace = guard_fixtures.workspace
npm_servers = guard_fixtures.npm_servers

STUBBORN = Path(__file__).resolve().parent / "servers" / "stubborn_server.py"
WAIT = 15.0  # bound on any one wait; the guard's own stop takes about 4 s at most


def live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that still run (zombies, which PID 1 here may never
    reap, have exited: they do not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, group = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(group) == pgid and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def wait_until(done: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout}s")
        time.sleep(0.05)


class Pids:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, int]:
        wait_until(lambda: self.path.exists() and self.path.read_text(), "the server started")
        return dict(json.loads(self.path.read_text()))

    def assert_all_gone(self) -> None:
        group = self.read()["group"]
        wait_until(lambda: not live_members(group), f"group {group} gone")

    def kill_leftovers(self) -> None:
        """A failed test must not leave its processes on the machine."""
        if self.path.exists() and self.path.read_text():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.read()["group"], signal.SIGKILL)


@pytest.fixture
def pids(tmp_path: Path) -> Iterator[Pids]:
    found = Pids(tmp_path / "pids.json")
    try:
        yield found
    finally:
        found.kill_leftovers()


def stubborn(*flags: str) -> list[str]:
    return [sys.executable, str(STUBBORN), *flags]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    """Files and pipes a test opened, closed after it."""
    files: list[Any] = []
    try:
        yield files
    finally:
        for file in files:
            with contextlib.suppress(OSError):
                file.close()


def start_guard(
    ws: Workspace, pids: Pids, opened: list[Any], tmp: Path, *flags: str
) -> subprocess.Popen[bytes]:
    params = ws.guard("clock", stubborn(*flags), STUBBORN_PIDS=str(pids.path))
    stderr = (tmp / "guard.stderr").open("wb")
    opened.append(stderr)
    guard = subprocess.Popen(
        [params.command, *params.args],
        env=params.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
    assert guard.stdin is not None and guard.stdout is not None
    opened += [guard.stdin, guard.stdout]
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-agent", "version": "1"},
    }
    guard.stdin.write(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode()
        + b"\n"
    )
    guard.stdin.flush()
    assert b'"result"' in guard.stdout.readline()
    pids.read()
    return guard


def guard_exits(guard: subprocess.Popen[bytes]) -> int:
    try:
        return guard.wait(timeout=WAIT)
    finally:
        if guard.poll() is None:
            guard.kill()
            guard.wait(WAIT)


@pytest.mark.anyio
@pytest.mark.parametrize("on_term", ["die", "ignore"])
async def test_a_session_through_the_sdk_client_leaves_nothing_running(
    workspace: Workspace, pids: Pids, on_term: str
) -> None:
    """The SDK client closes the guard's stdin, waits 2 s, SIGTERMs it, waits 2 s and
    SIGKILLs it: the guard must have stopped its server by then."""
    params = workspace.guard("clock", stubborn("--on-term", on_term), STUBBORN_PIDS=str(pids.path))
    with anyio.fail_after(WAIT):
        async with Client(params) as agent:
            result = await agent.call_tool("clock_read", {})
            assert not result.is_error
            started = pids.read()
    assert started["server"] != started["child"]
    pids.assert_all_gone()


@pytest.mark.parametrize("on_term", ["die", "ignore"])
def test_the_agent_closing_stdin_stops_the_whole_group(
    workspace: Workspace, pids: Pids, opened: list[Any], tmp_path: Path, on_term: str
) -> None:
    guard = start_guard(workspace, pids, opened, tmp_path, "--on-term", on_term)
    assert guard.stdin is not None
    guard.stdin.close()
    assert guard_exits(guard) == 0
    pids.assert_all_gone()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signalled_guard_stops_the_whole_group(
    workspace: Workspace, pids: Pids, opened: list[Any], tmp_path: Path, sig: signal.Signals
) -> None:
    guard = start_guard(workspace, pids, opened, tmp_path, "--on-term", "ignore")
    guard.send_signal(sig)
    assert guard_exits(guard) == 0  # it handled the signal: stopped its server, then itself
    pids.assert_all_gone()


def test_a_second_signal_hurries_the_stop_and_does_not_kill_the_guard_first(
    workspace: Workspace, pids: Pids, opened: list[Any], tmp_path: Path
) -> None:
    guard = start_guard(workspace, pids, opened, tmp_path, "--on-term", "ignore")
    guard.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    guard.send_signal(signal.SIGTERM)  # a client escalating: the stop hurries
    assert guard_exits(guard) == 0  # not killed by the second signal
    pids.assert_all_gone()


def test_children_left_by_a_server_that_exits_are_stopped(
    workspace: Workspace, pids: Pids, opened: list[Any], tmp_path: Path
) -> None:
    guard = start_guard(
        workspace, pids, opened, tmp_path, "--on-eof", "exit", "--on-term", "ignore"
    )
    assert guard.stdin is not None
    guard.stdin.close()
    guard_exits(guard)
    pids.assert_all_gone()


def marked(marker: str) -> list[int]:
    """Running processes whose environment holds ``marker`` (the guard, the server and
    whatever the server started inherit it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@requires_npx
@pytest.mark.anyio
@pytest.mark.usefixtures("npm_servers")
async def test_server_everything_left_logging_through_the_guard_leaves_no_orphan(
    workspace: Workspace, tmp_path: Path
) -> None:
    """The issue's report: toggle-simulated-logging on server-everything, through the
    guard, then the session ends; the server kept running with parent 1."""
    marker = f"CLAROS_TEST_MARK={tmp_path.name}"
    name, value = marker.split("=")
    params = workspace.guard("everything", EVERYTHING, **{name: value})
    with anyio.fail_after(60):
        async with Client(params) as agent:
            await agent.call_tool("toggle-simulated-logging", {})
            assert len(marked(marker)) >= 2  # the guard, npx, node
    try:
        wait_until(lambda: not marked(marker), "nothing of the session left")
    finally:
        for pid in marked(marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
