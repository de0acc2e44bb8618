"""Attacks on Claude Code's own permissions through the Claros hooks (issue 11, item 5).

A ``PreToolUse`` hook that answers ``"permissionDecision": "allow"`` makes Claude Code skip
its own permission prompt: installing Claros would then loosen Claude Code for every call
Claros lets through (an allowed check, a nudge, an approval, Claros unreachable under
fail-open). Each test runs the real ``claros`` console script as Claude Code runs it (a
process, the hook's JSON on stdin) against the real local Claros server (or a real HTTP
fake), and checks what Claude Code would read on stdout.
"""

# ruff: noqa: F811 - the tests take the guard tests' fixtures, imported below, by name

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.guard.conftest import (  # noqa: F401 - the fixtures these tests use
    ROOT,
    Workspace,
    anyio_backend,
    claros,
    workspace,
)
from tests.guard.http_fakes import JSON, Answer, HttpFake, Request
from tests.guard.test_faults import dead_url

CLAROS = Path(sys.executable).parent / "claros"  # the console script pip installed
HOOK_MODULES = [ROOT / "guard" / "claros_guard" / name for name in ("hooks.py", "hook_gate.py")]


def pre(tool: str, tool_input: dict[str, Any], use: str = "toolu_1") -> dict[str, Any]:
    return {
        "session_id": "sess-attack",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": use,
    }


async def run_hook(
    ws: Workspace, event: dict[str, Any], kind: str = "pre", **env: str
) -> tuple[str, str]:
    """(stdout, stderr) of ``claros hook KIND``; it always exits 0 (Claude Code runs the
    tool unchecked after a hook exits 1)."""
    done = await anyio.run_process(
        [str(CLAROS), "hook", kind],
        input=json.dumps(event).encode(),
        env={**ws.env, "CLAROS_ASK_WAIT": "0.3", **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip(), done.stderr.decode()


def assert_no_decision(stdout: str) -> None:
    """Claude Code's own permission flow decides: the hook printed no decision at all."""
    assert "permissionDecision" not in stdout, stdout
    assert '"allow"' not in stdout, stdout


def denied(stdout: str) -> str:
    out = json.loads(stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny", out
    return str(out["permissionDecisionReason"])


def answer_ask(ws: Workspace, ask_id: str, decision: str) -> None:
    with ws.http() as http:
        answer = http.post(
            f"/api/asks/{ask_id}/answer",
            json={"decision": decision},
            headers={"Authorization": f"Bearer {ws.admin}"},
        )
    assert answer.status_code == 200, answer.text


async def open_ask(ws: Workspace) -> str:
    """The id of the question the hook's check opened, once Claros has recorded it."""
    with anyio.fail_after(30):
        while True:
            asks = [c for c in ws.records("check") if c["result"] == "ask"]
            if asks:
                return str(asks[-1]["ask_id"])
            await anyio.sleep(0.05)


async def hook_answered_during_wait(ws: Workspace, decision: str) -> str:
    """Start the hook on a call that asks, answer the question while it waits, and return
    what the hook printed. The wait is long (60 s): the hook must return on the answer."""
    ws.push(rules=[ASK_RULE])
    event = json.dumps(pre("Bash", {"command": "make deploy"}, "t-ask")).encode()
    env = {**ws.env, "CLAROS_ASK_WAIT": "60"}
    with anyio.fail_after(45):
        async with await anyio.open_process([str(CLAROS), "hook", "pre"], env=env) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.send(event)
            await proc.stdin.aclose()
            ask_id = await open_ask(ws)
            await anyio.to_thread.run_sync(answer_ask, ws, ask_id, decision)
            chunks = [chunk async for chunk in proc.stdout]
            assert await proc.wait() == 0
    return b"".join(chunks).decode().strip()


ASK_RULE = {
    "id": "deploys",
    "app": "claude-code",
    "tools": ["Bash"],
    "when": "'deploy' in command",
    "response": "ask",
    "owners": ["dana@example.com"],
}


class FailingClaros(HttpFake):
    """Claros failing (503) on every request, counting them."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        self.requests.append(request)
        return 503, JSON, b'{"error": "unavailable"}'


@pytest.mark.anyio
async def test_hook_never_answers_allow_when_claros_allows(workspace: Workspace) -> None:
    ws = workspace
    for event in (
        pre("Bash", {"command": "ls -la"}, "t1"),
        pre("Write", {"file_path": "/repo/a.py", "content": "x = 1\n"}, "t2"),
        pre("mcp__shop__refund_create", {"order": "1187", "amount": 5}, "t3"),
    ):
        stdout, _ = await run_hook(ws, event)
        assert stdout == ""  # exit 0, nothing said: Claude Code asks its person as before
    checks = ws.records("check")
    assert [(c["agent"]["call_id"], c["result"]) for c in checks] == [
        ("t1", "allow"),
        ("t2", "allow"),
        ("t3", "allow"),
    ]


@pytest.mark.anyio
async def test_hook_never_answers_allow_under_fail_open(workspace: Workspace) -> None:
    ws = workspace
    event = pre("Bash", {"command": "make deploy"}, "t-open")
    # Claros unreachable.
    stdout, stderr = await run_hook(ws, event, CLAROS_URL=dead_url(), CLAROS_FAIL_OPEN="1")
    assert_no_decision(stdout)
    assert stdout == ""
    assert "CLAROS_FAIL_OPEN=1" in stderr and "Traceback" not in stderr
    # Claros failing (503), through a real HTTP server.
    with FailingClaros() as failing:
        stdout, stderr = await run_hook(ws, event, CLAROS_URL=failing.url, CLAROS_FAIL_OPEN="1")
        assert failing.requests, "the hook never asked Claros"
    assert stdout == ""
    # The hook itself failing (a setting it cannot use).
    stdout, stderr = await run_hook(ws, event, CLAROS_ASK_WAIT="soon", CLAROS_FAIL_OPEN="1")
    assert stdout == ""
    assert "unexpected error" in stderr and "Traceback" not in stderr
    # Without fail-open each of these is a deny, never silence.
    assert "could not check" in denied((await run_hook(ws, event, CLAROS_URL=dead_url()))[0])


@pytest.mark.anyio
async def test_nudge_gives_context_not_a_decision(workspace: Workspace) -> None:
    ws = workspace
    ws.push(
        rules=[
            {
                "id": "env-files",
                "app": "claude-code",
                "tools": ["Edit"],
                "when": "'.env' in file_path",
                "response": "nudge",
                "message": "Keep secrets out of .env in the repo.",
            }
        ]
    )
    edit = {"file_path": "/repo/.env", "old_string": "a", "new_string": "b"}
    stdout, _ = await run_hook(ws, pre("Edit", edit, "t-nudge"))
    assert json.loads(stdout) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": "Claros (env-files): Keep secrets out of .env in the repo.",
        }
    }


@pytest.mark.anyio
async def test_ask_waits_and_denies_when_denied(workspace: Workspace) -> None:
    stdout = await hook_answered_during_wait(workspace, "deny")
    assert "Not approved" in denied(stdout) and "deploys" in denied(stdout)
    assert [c["result"] for c in workspace.records("check")] == ["ask"]


@pytest.mark.anyio
async def test_ask_waits_and_defers_to_claude_code_when_approved(workspace: Workspace) -> None:
    stdout = await hook_answered_during_wait(workspace, "approve")
    assert stdout == ""  # approved: no decision, Claude Code's own permissions still apply
    assert [c["result"] for c in workspace.records("check")] == ["ask", "allow"]


@pytest.mark.anyio
async def test_ask_unanswered_denies_when_the_wait_ends(workspace: Workspace) -> None:
    ws = workspace
    ws.push(rules=[ASK_RULE])
    stdout, _ = await run_hook(ws, pre("Bash", {"command": "make deploy"}, "t-exp"))
    assert "Waiting for approval" in denied(stdout)


def test_ask_wait_cannot_outlast_the_hooks_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code kills a hook at its timeout and then runs the tool: the hook's wait for
    an answer stops well before that, however long CLAROS_ASK_WAIT asks for."""
    from claros_guard import hooks
    from claros_guard.policy import ASK_WAIT

    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path))
    path, _ = hooks.install("project")
    (entry,) = json.loads(path.read_text())["hooks"]["PreToolUse"]
    timeout = entry["hooks"][0]["timeout"]
    assert hooks.ask_wait({}) == ASK_WAIT  # the guard's own budget
    for asked in ("100000", "inf"):
        assert hooks.ask_wait({"CLAROS_ASK_WAIT": asked}) == ASK_WAIT
    assert ASK_WAIT + 30 <= timeout
    for bad in ("nan", "-1", "soon"):
        with pytest.raises(ValueError, match="CLAROS_ASK_WAIT"):
            hooks.ask_wait({"CLAROS_ASK_WAIT": bad})


def _path_without_claros() -> str:
    return os.pathsep.join(
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "claros").exists()
    )


def _install(project: Path, path_env: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project), "PATH": path_env}
    return subprocess.run(
        [str(CLAROS), "hooks", "install", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _claros_commands(settings: dict[str, Any]) -> dict[str, list[str]]:
    return {
        event: [h["command"] for e in entries for h in e["hooks"] if "claros" in h["command"]]
        for event, entries in settings["hooks"].items()
    }


def test_installed_hook_command_has_no_machine_path(tmp_path: Path) -> None:
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "claros").symlink_to(CLAROS)
    for path_env, runner in (
        (f"{on_path}{os.pathsep}{_path_without_claros()}", "claros"),
        (_path_without_claros(), "npx getclaros"),
    ):
        project = tmp_path / runner.replace(" ", "-")
        project.mkdir()
        done = _install(project, path_env)
        assert done.returncode == 0, done.stderr
        settings = json.loads((project / ".claude" / "settings.json").read_text())
        assert _claros_commands(settings) == {
            "PreToolUse": [f"{runner} hook pre"],
            "PostToolUse": [f"{runner} hook post"],
            "PostToolUseFailure": [f"{runner} hook post"],
        }
        text = (project / ".claude" / "settings.json").read_text()
        assert str(tmp_path) not in text and sys.prefix not in text


def test_installing_twice_changes_nothing(tmp_path: Path) -> None:
    lint = {"type": "command", "command": "./lint.sh"}
    old_pre = {"type": "command", "command": f"{CLAROS} hook pre", "timeout": 120}
    old_post = {"type": "command", "command": f"{sys.executable} -m claros_guard.cli hook post"}
    before = {
        "model": "opus",
        "permissions": {"deny": ["Bash(rm -rf *)"]},
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [lint]},
                {"matcher": "*", "hooks": [old_pre]},
            ],
            "PostToolUse": [{"matcher": "*", "hooks": [lint, old_post]}],
            "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
        },
    }
    settings_file = tmp_path / ".claude" / "settings.json"
    settings_file.parent.mkdir()
    settings_file.write_text(json.dumps(before))
    path_env = _path_without_claros()  # npx getclaros: the plainest command
    first = _install(tmp_path, path_env)
    assert first.returncode == 0, first.stderr
    once = settings_file.read_bytes()
    second = _install(tmp_path, path_env, "--project")
    assert second.returncode == 0, second.stderr
    assert settings_file.read_bytes() == once
    assert "already" in second.stdout
    after = json.loads(once)
    assert after["model"] == "opus" and after["permissions"] == before["permissions"]
    assert after["hooks"]["Stop"] == before["hooks"]["Stop"]
    assert after["hooks"]["PreToolUse"][0] == {"matcher": "Bash", "hooks": [lint]}
    assert lint in after["hooks"]["PostToolUse"][0]["hooks"]
    # The old absolute-path hooks are replaced, not kept beside the new ones.
    assert _claros_commands(after) == {
        "PreToolUse": ["npx getclaros hook pre"],
        "PostToolUse": ["npx getclaros hook post"],
        "PostToolUseFailure": ["npx getclaros hook post"],
        "Stop": [],
    }


class CountingClaros(HttpFake):
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        super().__init__()

    def respond(self, request: Request) -> Answer:
        with self.lock:
            self.requests.append(request)
        return 500, JSON, b"{}"


HEAVY = ("httpx", "pydantic", "mcp", "anyio", "claros_guard.api", "claros_guard.policy")


@pytest.mark.parametrize("tool", ["Read", "Glob", "Grep"])
def test_read_hook_starts_no_http_client(workspace: Workspace, tool: str) -> None:
    """A read Claros never checks costs Claude Code a process start and nothing more: no
    request, no HTTP client, none of the heavy modules imported."""
    with CountingClaros() as fake:
        done = subprocess.run(
            [str(CLAROS), "hook", "pre"],
            input=json.dumps(pre(tool, {"file_path": "/repo/a.py", "pattern": "x"})),
            env={**workspace.env, "CLAROS_URL": fake.url, "PYTHONPROFILEIMPORTTIME": "1"},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert fake.requests == []
    assert done.returncode == 0 and done.stdout == ""
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "json" in imported  # the profile is there to read
    heavy = sorted(m for m in imported if m.split(".")[0] in HEAVY or m in HEAVY)
    assert heavy == []


def test_no_hook_code_can_answer_allow() -> None:
    """Not one "allow" in the hooks' code: no path through them can print that decision."""
    for module in HOOK_MODULES:
        tree = ast.parse(module.read_text(encoding="utf-8"))
        allows = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value == "allow"
        ]
        assert allows == [], f"{module.name} holds 'allow' at lines {allows}"


def test_post_hook_for_a_read_is_silent_and_offline(workspace: Workspace) -> None:
    event = {**pre("Read", {"file_path": "/repo/a.py"}), "hook_event_name": "PostToolUse"}
    with CountingClaros() as fake:
        done = subprocess.run(
            [str(CLAROS), "hook", "post"],
            input=json.dumps({**event, "tool_response": {"content": "x"}}),
            env={**workspace.env, "CLAROS_URL": fake.url},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert fake.requests == []
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
