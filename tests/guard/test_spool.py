"""Reports Claros could not take, kept on disk (``claros_guard.spool``) and sent later: by
the MCP guard (at start, then every few seconds) and by the hooks (at each run), exactly
once as Claros counts them. Real guard and hook processes, a real local Claros, and a
relay in front of it that can be stopped and started again on the same port."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from claros_guard.api import Report, outcome_report, unchecked_report
from claros_guard.errors import ClarosUnavailableError, ConfigError
from claros_guard.reporter import Reporter
from claros_guard.spool import HOLD_SECONDS, MAX_LINES, Spool, encode
from tests.guard.conftest import ROOT, Workspace, example, lab
from tests.guard.http_fakes import JSON, Answer, HttpFake, Request
from tests.guard.http_fakes import relay as forward  # ``relay`` is the fixture here
from tests.guard.test_examples import REFUND_MAPPING, tools_called, wait_registered
from tests.guard.test_faults import dead_url
from tests.guard.test_hooks import hook_process, pre

pytestmark = pytest.mark.anyio


class Relay(HttpFake):
    """Claros behind a port of its own, which the test stops (connections refused, as
    when the server is down) and starts again; ``hold`` keeps report requests unanswered
    until ``release`` (then answers 503, never passing them on)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.hold = False
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if self.hold and ("outcome" in request.path or request.path == "/v1/unchecked"):
            self.release.wait(30)
            return 503, JSON, b'{"error":"unavailable","message":"held"}'
        return forward(self.target, request)


@pytest.fixture
def relay(workspace: Workspace) -> Iterator[Relay]:
    with Relay(workspace.claros.url) as proxy:
        yield proxy


def spool_files(ws: Workspace) -> list[Path]:
    return sorted(ws.state.glob("reports-*.jsonl"))


def spooled(ws: Workspace) -> list[dict[str, Any]]:
    return [json.loads(line) for path in spool_files(ws) for line in path.read_text().splitlines()]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def coverage(ws: Workspace) -> dict[str, dict[str, Any]]:
    with ws.http() as http:
        answer = http.get(
            "/api/coverage", params={"days": 1}, headers={"Authorization": f"Bearer {ws.admin}"}
        )
    assert answer.status_code == 200, answer.text
    return {a["agent"]: a for a in answer.json()["agents"]}


async def until(what: str, test: Any, seconds: float = 15) -> None:
    with anyio.fail_after(seconds):
        while not test():
            await anyio.sleep(0.05)


async def test_an_unchecked_write_outlives_the_outage_and_counts_once(workspace: Workspace) -> None:
    ws = workspace
    params = ws.guard("lab", lab(), "--url", dead_url(), "--fail-open")
    async with Client(params) as agent:
        forwarded = await agent.call_tool("note_write", {"text": "while Claros was down"})
        await until("spooled", lambda: spooled(ws))
    assert not forwarded.is_error and tools_called(ws) == ["note_write"]
    assert ws.records("unchecked") == []

    # On disk, private, named after the key without holding it.
    (path,) = spool_files(ws)
    assert mode(ws.state) == 0o700 and mode(path) == 0o600
    assert ws.agent not in path.name
    assert hashlib.sha256(ws.agent.encode()).hexdigest()[:16] not in path.name
    (line,) = spooled(ws)
    assert line["route"] == "/v1/unchecked" and len(line["key"]) == 32
    body = line["body"]
    assert (body["tool"], body["arguments"], body["status"]) == (
        "note_write",
        {"text": "while Claros was down"},
        "ok",
    )
    assert "cannot reach Claros" in body["reason"]

    # The next guard start sends it.
    async with Client(ws.guard("lab", lab())):
        await until("delivered", lambda: ws.records("unchecked"))
        await until("removed", lambda: not spool_files(ws))
    (unchecked,) = ws.records("unchecked")
    assert unchecked["arguments"] == {"text": "while Claros was down"}
    assert unchecked["status"] == "ok" and unchecked["agent"]["via"]["guard"] == "claros-guard"
    assert (coverage(ws)["mcp"]["checked"], coverage(ws)["mcp"]["unchecked"]) == (0, 1)

    # Sent again (an answer lost after Claros recorded it): the same request, kept once.
    path.write_text(json.dumps(line) + "\n")
    path.chmod(0o600)
    ran = {**pre("Bash", {"command": "ls"}, "t-after"), "hook_event_name": "PostToolUse"}
    assert await hook_process(ws, "post", {**ran, "tool_response": {"stdout": ""}}) == (None, "")
    assert not spool_files(ws)
    assert len(ws.records("unchecked")) == 1
    assert coverage(ws)["mcp"]["unchecked"] == 1


async def test_claros_stopped_mid_session_the_running_guard_sends_it_when_back(
    workspace: Workspace, relay: Relay
) -> None:
    ws = workspace
    async with Client(ws.guard("lab", lab(), "--url", relay.url, "--fail-open")) as agent:
        await wait_registered(ws, "lab")
        checked = await agent.call_tool("note_write", {"text": "checked"})
        await until("outcome", lambda: ws.records("outcome"))
        relay.stop()
        unchecked = await agent.call_tool("note_write", {"text": "unchecked"})
        await until("spooled", lambda: spooled(ws))
        relay.start()  # the same port: Claros is back
        await until("delivered", lambda: ws.records("unchecked"))
        await until("removed", lambda: not spool_files(ws))
    assert not checked.is_error and not unchecked.is_error
    (record,) = ws.records("unchecked")
    assert record["arguments"] == {"text": "unchecked"} and record["status"] == "ok"
    counted = coverage(ws)["mcp"]
    assert (counted["checked"], counted["unchecked"], counted["coverage"]) == (1, 1, 0.5)


async def test_reports_still_queued_at_exit_go_to_the_spool(
    workspace: Workspace, relay: Relay
) -> None:
    ws = workspace
    relay.hold = True  # the outcome's request hangs: it is in flight when the agent goes
    started = 0.0
    async with Client(ws.guard("lab", lab(), "--url", relay.url)) as agent:
        wrote = await agent.call_tool("note_write", {"text": "hi"})
        await until("checked", lambda: ws.records("check"))
        started = time.time()
    assert not wrote.is_error and ws.records("outcome") == []
    (line,) = spooled(ws)
    # The guard spools what is still in flight within the 2 s an MCP client waits before
    # it kills it. Timed by the spool file's own write, not the process's end, so the
    # interpreter's teardown on a loaded machine (parallel tests) is not what is measured.
    (spool,) = spool_files(ws)
    assert spool.stat().st_mtime - started < 2.0
    (check,) = ws.records("check")
    assert line["route"] == f"/v1/check/{check['check_id']}/outcome"
    assert line["key"] == f"outcome-{check['check_id']}" and line["body"]["status"] == "ok"
    relay.stop()
    async with Client(ws.guard("lab", lab())):
        await until("delivered", lambda: ws.records("outcome"))
    assert ws.records("outcome")[0]["check_id"] == check["check_id"]


async def test_hook_pre_and_post_while_claros_is_down_then_up(workspace: Workspace) -> None:
    ws = workspace
    down = {"CLAROS_URL": dead_url(), "CLAROS_FAIL_OPEN": "1"}
    event = pre("Bash", {"command": "make deploy"}, "t1")
    answer, stderr = await hook_process(ws, "pre", event, **down)
    assert answer is None  # no decision: Claude Code's own permissions decide
    assert stderr.startswith("claros hook pre: forwarding claude-code Bash unchecked (--fail-open)")
    # Kept for its post, which knows how it ended; nothing sent or spooled yet.
    (calls,) = ws.state.glob("calls-*")
    (held,) = calls.iterdir()
    assert mode(calls) == 0o700 and mode(held) == 0o600 and mode(ws.state) == 0o700
    assert not spool_files(ws)

    failed = {
        **event,
        "hook_event_name": "PostToolUse",
        "tool_response": {"stdout": "deploy failed", "exit_code": 2},
    }
    answer, stderr = await hook_process(ws, "post", failed, **down)
    assert answer is None
    assert stderr.startswith("claros hook post: Claros is unreachable (cannot reach Claros")
    assert "the unchecked call to claude-code Bash is kept in " in stderr
    assert not held.exists()
    (line,) = spooled(ws)
    assert line["body"]["status"] == "error" and line["body"]["summary"] == "deploy failed"
    assert mode(spool_files(ws)[0]) == 0o600
    assert ws.records("unchecked") == []

    # Claros is back: the next hook run sends the spool first, then checks its own call.
    answer, stderr = await hook_process(ws, "pre", pre("Bash", {"command": "ls"}, "t2"))
    assert answer is None and stderr == ""  # checked and allowed: no decision
    (unchecked,) = ws.records("unchecked")
    assert (unchecked["status"], unchecked["summary"]) == ("error", "deploy failed")
    assert unchecked["agent"]["call_id"] == "t1" and "cannot reach Claros" in unchecked["reason"]
    assert not spool_files(ws)
    counted = coverage(ws)["claude-code"]
    assert (counted["checked"], counted["unchecked"], counted["coverage"]) == (1, 1, 0.5)


async def test_a_pre_whose_post_never_came_is_reported_without_a_status(
    workspace: Workspace,
) -> None:
    ws = workspace
    down = {"CLAROS_URL": dead_url(), "CLAROS_FAIL_OPEN": "1"}
    for use in ("lost", "running"):
        answer, _ = await hook_process(ws, "pre", pre("Bash", {"command": use}, use), **down)
        assert answer is None  # fail-open: no decision
    (calls,) = ws.state.glob("calls-*")
    lost = calls / (hashlib.sha256(b"lost").hexdigest()[:40] + ".json")
    long_ago = time.time() - HOLD_SECONDS - 60
    os.utime(lost, (long_ago, long_ago))

    # Any later hook run (here a post for a call with no check) reports the lost one.
    other = {**pre("Bash", {"command": "x"}, "other"), "hook_event_name": "PostToolUse"}
    assert await hook_process(ws, "post", {**other, "tool_response": {}}) == (None, "")
    (unchecked,) = ws.records("unchecked")
    assert unchecked["arguments"] == {"command": "lost"} and unchecked.get("status") is None
    assert "never reported" in unchecked["summary"]
    assert not lost.exists() and len(list(calls.iterdir())) == 1  # "running" still waits

    # Its post, late: nothing more (no second record, no check to report on).
    late = {**pre("Bash", {"command": "lost"}, "lost"), "hook_event_name": "PostToolUse"}
    assert await hook_process(ws, "post", {**late, "tool_response": {}}) == (None, "")
    # The running one's post: reported with its status.
    done = {**pre("Bash", {"command": "running"}, "running"), "hook_event_name": "PostToolUse"}
    assert await hook_process(ws, "post", {**done, "tool_response": {"stdout": "ok"}}) == (
        None,
        "",
    )
    statuses = {u["arguments"]["command"]: u.get("status") for u in ws.records("unchecked")}
    assert statuses == {"lost": None, "running": "ok"}
    assert coverage(ws)["claude-code"]["unchecked"] == 2


async def test_lines_that_are_not_reports_are_skipped_and_refusals_dropped(
    workspace: Workspace,
) -> None:
    ws = workspace
    answer, _ = await hook_process(ws, "pre", pre("Bash", {"command": "ls"}, "t1"))
    assert answer is None  # checked and allowed: no decision
    ran = {**pre("Bash", {"command": "ls"}, "t1"), "hook_event_name": "PostToolUse"}
    assert await hook_process(ws, "post", {**ran, "tool_response": {"stdout": "a"}}) == (None, "")
    (check,) = ws.records("check")

    agent = {"name": "claude-code", "via": {"guard": "claros-hooks", "version": "1"}}
    body = {"app": "claude-code", "tool": "Bash", "arguments": {}, "agent": agent, "reason": "r"}
    good = unchecked_report(body, "unchecked call")
    again = outcome_report(check["check_id"], "ok", "again", "outcome")  # Claros has one
    again = Report(again.route, again.body, "outcome-another-key", again.what)
    nowhere = outcome_report("chk_nothing", "ok", None, "outcome of nothing")
    lines = [
        b"not json at all",
        b"[1, 2]",
        json.dumps({"route": "/api/rules/x", "key": "k", "body": {}}).encode(),
        b"",
        encode(good).rstrip(b"\n"),
        encode(again).rstrip(b"\n"),
        encode(nowhere).rstrip(b"\n"),
        b'{"route": "/v1/unchecked", "key": "k2", "bo',  # cut short: a disk that filled up
    ]
    spool = Spool(ws.state, ws.agent)
    ws.state.mkdir(mode=0o700)
    spool.path.write_bytes(b"\n".join(lines))

    other = {**pre("Bash", {"command": "x"}, "other"), "hook_event_name": "PostToolUse"}
    answer, stderr = await hook_process(ws, "post", {**other, "tool_response": {}})
    assert answer is None and "Traceback" not in stderr
    said = stderr.splitlines()
    assert said[:4] == [
        f"claros hook post: skipped line 1 of {spool.path}: not JSON (15 bytes); it is removed",
        f"claros hook post: skipped line 2 of {spool.path}: not a JSON object (6 bytes); "
        "it is removed",
        f"claros hook post: skipped line 3 of {spool.path}: no route Claros takes reports on "
        f"({len(lines[2])} bytes); it is removed",
        f"claros hook post: skipped line 8 of {spool.path}: not JSON ({len(lines[7])} bytes); "
        "it is removed",
    ]
    assert said[4].startswith("claros hook post: Claros did not take the outcome of nothing")
    assert "(404)" in said[4] and len(said) == 5
    assert len(ws.records("unchecked")) == 1  # the good one
    assert [o["summary"] for o in ws.records("outcome")] == ["a"]  # 409: Claros had one
    assert not spool.path.exists()


def reports(n: int, prefix: str = "r") -> list[Report]:
    agent = {"name": "a"}
    return [
        unchecked_report(
            {"app": "a", "tool": "t", "agent": agent, "reason": "r", "n": i},
            f"report {prefix}{i}",
            key=f"{prefix}{i}",
        )
        for i in range(n)
    ]


def test_the_spool_is_bounded_keeps_the_oldest_and_counts_what_it_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert MAX_LINES == 10_000 and Spool(tmp_path, "ck_k").max_lines == MAX_LINES
    spool = Spool(tmp_path / "state", "ck_k", max_lines=3)
    with caplog.at_level(logging.WARNING, "claros_guard.spool"):
        assert spool.append(reports(5)) == 3
        assert spool.append(reports(1, "late")) == 0
    assert [r.key for r in spool.take(10)[0]] == ["r0", "r1", "r2"]
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith(f"the report spool {spool.path} is full (3 lines, ")
    assert "dropped 2 (report r3, report r4); Claros will never hear of them" in said[0]
    assert "(2 dropped since it was last sent)" in said[0]
    assert "(3 dropped since it was last sent)" in said[1]
    assert said[2] == (
        f"3 reports were dropped while the report spool {spool.path} was full: Claros never "
        "heard of them, so coverage over that time counts up to 3 fewer unchecked writes "
        "than ran"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, "claros_guard.spool"):
        spool.take(10)
    assert caplog.records == []  # said once

    # Bytes are bounded too.
    small = Spool(tmp_path / "small", "ck_k", max_bytes=len(encode(reports(1)[0])) + 10)
    assert small.append(reports(2)) == 1


def test_an_unended_line_does_not_swallow_the_next_and_modes_are_kept(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "state", "ck_k")
    spool.append(reports(1))
    with spool.path.open("ab") as fh:
        fh.write(b'{"route": "/v1/unchecked", "ke')
    spool.path.chmod(0o644)
    old = os.umask(0o000)
    try:
        spool.append(reports(1, "next"))
    finally:
        os.umask(old)
    assert mode(spool.path) == 0o600 and mode(tmp_path / "state") == 0o700
    taken, bad = spool.take(10)
    assert [r.key for r in taken] == ["r0", "next0"] and len(bad) == 1
    spool.settle({taken[0].ident}, bad)
    assert [r.key for r in spool.take(10)[0]] == ["next0"]
    spool.settle({r.ident for r in reports(1, "next")}, [])
    assert not spool.path.exists()


def test_an_unusable_state_directory_is_named(tmp_path: Path) -> None:
    taken = tmp_path / "file"
    taken.write_text("")
    with pytest.raises(ConfigError, match=r"cannot use .*file for reports Claros could not take"):
        Spool(taken, "ck_k").append(reports(1))
    assert Spool(taken, "ck_k").has_work() is False  # a look never fails


def test_processes_appending_while_another_removes_lose_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    spool = Spool(state, "ck_k")
    spool.append(reports(300, "old"))
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from claros_guard.api import unchecked_report
        from claros_guard.spool import Spool
        spool = Spool(Path(sys.argv[1]), "ck_k")
        who = sys.argv[2]
        if who == "settle":  # removes the old lines, 50 at a time, while the others append
            for _ in range(100):
                taken, bad = spool.take(50)
                old = {r.ident for r in taken if r.key.startswith("old")}
                if not old:
                    break
                spool.settle(old, bad)
        else:
            for i in range(100):
                body = {"app": "a", "tool": "t", "agent": {"name": "a"}, "reason": "r"}
                spool.append([unchecked_report(body, "report", key=f"{who}{i}")])
        """
    )
    jobs = [
        subprocess.Popen([sys.executable, "-c", script, str(state), who], cwd=ROOT)
        for who in ("a", "settle", "b", "c", "d")
    ]
    assert [job.wait(60) for job in jobs] == [0] * 5
    keys = [r.key for r in spool.take(1000)[0]]
    assert sorted(keys) == sorted(f"{p}{i}" for p in "abcd" for i in range(100))


class Flaky:
    """Claros for a Reporter in process: down until told otherwise."""

    def __init__(self, *, up: bool = False) -> None:
        self.up = up
        self.hang = False
        self.tries = 0
        self.got: list[str] = []

    async def send_report(self, report: Report) -> None:
        self.tries += 1
        if self.hang:
            await anyio.sleep_forever()
        if not self.up:
            raise ClarosUnavailableError("cannot reach Claros")
        self.got.append(report.key)


async def test_the_reporter_spools_on_the_first_failure_and_sends_when_claros_is_back(
    tmp_path: Path,
) -> None:
    claros = Flaky()
    spool = Spool(tmp_path / "state", "ck_k")
    reporter = Reporter(claros, spool, idle=0.0, retry_every=1.0, backlog=2)
    for report in reports(5):
        reporter.submit(report)  # more than the backlog: the oldest go to the spool at once
    async with anyio.create_task_group() as tg:
        await tg.start(reporter.run)
        await until("spooled", lambda: len(spool.take(10)[0]) == 5)
        assert claros.tries == 1  # one try for all: Claros is down, the rest wait on disk
        claros.up = True
        await until("sent", lambda: len(claros.got) == 5)
        await until("removed", lambda: not spool.path.exists())
        tg.cancel_scope.cancel()
    assert sorted(claros.got) == [f"r{i}" for i in range(5)] and reporter.sent == 5


async def test_what_the_reporter_holds_at_exit_goes_to_the_spool(tmp_path: Path) -> None:
    claros = Flaky()
    claros.hang = True  # the first report's request never ends
    spool = Spool(tmp_path / "state", "ck_k")
    reporter = Reporter(claros, spool, idle=0.0)
    async with anyio.create_task_group() as tg:
        await tg.start(reporter.run)
        for report in reports(3):
            reporter.submit(report)
        await until("sending", lambda: claros.tries == 1)
        with anyio.fail_after(3):
            await reporter.drain(0.2)
        tg.cancel_scope.cancel()
    assert [r.key for r in spool.take(10)[0]] == ["r0", "r1", "r2"]


async def test_an_app_named_with_a_slash_registers_and_takes_mappings(
    workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    async with Client(ws.guard("team/shop", example("shop"))) as agent:
        registered = await wait_registered(ws, "team/shop", "order_read")
        assert {t["name"] for t in registered["tools"] if t["read"]} >= {"order_read"}
        mappings = tmp_path / "mappings.json"
        mappings.write_text(json.dumps([{**REFUND_MAPPING, "app": "team/shop"}]))
        pushed = await anyio.run_process(
            [sys.executable, "-m", "claros_guard.cli", "mappings", "push", str(mappings)],
            env={**ws.env, "CLAROS_KEY": ws.admin},
            check=False,
        )
        assert pushed.returncode == 0, pushed.stderr.decode()
        assert pushed.stdout.decode().startswith("OK: team/shop refund_create v1 created")
        wrote = await agent.call_tool("refund_create", {"order": "1187", "amount": 50})
    assert not wrote.is_error
    assert tools_called(ws) == ["order_read", "refund_create"]  # the mapping's fetch
    (check,) = ws.records("check")
    assert check["app"] == "team/shop" and check["resolved"] is True
    assert check["derived"] == {"share": 0.25}


class Watched(Reporter):
    """A Reporter whose run loop counts its passes (each one a wake)."""

    passes = 0

    def _wait_for(self, item: Any) -> float:
        self.passes += 1
        return super()._wait_for(item)


async def test_a_report_waits_for_calls_to_pause_and_never_wakes_the_reporter_meanwhile() -> None:
    claros = Flaky(up=True)
    reporter = Watched(claros, idle=0.05, max_delay=60.0)
    async with anyio.create_task_group() as tg:
        await tg.start(reporter.run)
        for n, report in enumerate(reports(3)):
            with reporter.busy():  # the agent's call: its check, the forward, the answer
                reporter.submit(report)  # its report, queued before the answer goes
                for _ in range(20):  # the rest of the call: the reporter stays asleep
                    await anyio.sleep(0)
            assert reporter.passes == 0 and claros.got == []
            if n < 2:
                await anyio.sleep(0)  # the next call comes at once: no pause yet
        # Calls paused: once ``idle`` has passed the three go, together.
        await until("sent", lambda: len(claros.got) == 3)
        # A long run of calls with reports queued leaves no pile of timers behind.
        for report in reports(200, "x"):
            with reporter.busy():
                reporter.submit(report)
                await anyio.sleep(0)
            assert len(reporter._timers) <= 2  # the head's deadline, the quiet wake
        tg.cancel_scope.cancel()
    assert claros.got[:3] == ["r0", "r1", "r2"]


async def test_calls_that_never_pause_still_have_their_reports_sent_within_max_delay() -> None:
    claros = Flaky(up=True)
    reporter = Reporter(claros, idle=60.0, max_delay=0.2)
    async with anyio.create_task_group() as tg:
        await tg.start(reporter.run)
        with anyio.fail_after(15):
            n = 0
            while len(claros.got) < 2:
                with reporter.busy():
                    if n < 2:
                        reporter.submit(reports(2)[n])
                    n += 1
                    await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert claros.got == ["r0", "r1"]


async def test_the_spool_is_paced_by_calls_pausing_too(tmp_path: Path) -> None:
    claros = Flaky(up=True)
    spool = Spool(tmp_path / "state", "ck_k")
    spool.append(reports(2, "s"))  # left by an earlier guard or hook
    reporter = Reporter(claros, spool, idle=0.05, max_delay=60.0)
    async with anyio.create_task_group() as tg:
        with reporter.busy():  # a call in flight as the guard starts: the spool waits
            await tg.start(reporter.run)
            await anyio.sleep(0.2)
            assert claros.got == []
        await until("sent", lambda: len(claros.got) == 2)
        tg.cancel_scope.cancel()
    assert claros.got == ["s0", "s1"]
