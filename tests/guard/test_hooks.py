"""Claude Code hooks: ``claros hooks install`` and ``claros hook pre|post``, run as Claude
Code runs them (a process, the hook's JSON on stdin, the answer on stdout)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import Implementation

from claros_guard.hooks import install, settings_path
from claros_guard.login import credentials_path, save_credentials
from tests.guard.conftest import Workspace, example
from tests.guard.test_examples import REFUND_MAPPING, tools_called, wait_registered
from tests.guard.test_faults import dead_url


async def hook_process(
    ws: Workspace, kind: str, event: dict[str, Any], **env: str
) -> tuple[dict[str, Any] | None, str]:
    """(the hook's answer, its stderr); the exit code is always 0, as Claude Code would
    otherwise run the tool unchecked."""
    done = await anyio.run_process(
        [sys.executable, "-m", "claros_guard.cli", "hook", kind],
        input=json.dumps(event).encode(),
        env={**ws.env, "CLAROS_ASK_WAIT": "0.3", **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode().strip()
    return (json.loads(out) if out else None), done.stderr.decode()


async def hook(
    ws: Workspace, kind: str, event: dict[str, Any], **env: str
) -> dict[str, Any] | None:
    return (await hook_process(ws, kind, event, **env))[0]


def pre(tool: str, tool_input: dict[str, Any], use: str = "toolu_1") -> dict[str, Any]:
    return {
        "session_id": "sess-1",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": use,
    }


def decision(answer: dict[str, Any] | None) -> tuple[str | None, str | None, str | None]:
    """(permissionDecision, its reason, additionalContext); all None when the hook said
    nothing (Claros has no objection: Claude Code's own permissions decide). The hook never
    answers ``allow``."""
    if answer is None:
        return None, None, None
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    assert out.get("permissionDecision") in (None, "deny"), out
    return (
        out.get("permissionDecision"),
        out.get("permissionDecisionReason"),
        out.get("additionalContext"),
    )


def test_install_adds_the_hooks_once_and_keeps_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = settings_path("project")
    path.parent.mkdir()
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    path.write_text(json.dumps({"model": "opus", "hooks": {"PreToolUse": [mine]}}))
    assert install("project") == (path, ["PreToolUse", "PostToolUse", "PostToolUseFailure"])
    assert install("project") == (path, [])  # idempotent
    settings = json.loads(path.read_text())
    assert settings["model"] == "opus"
    pre_hooks = settings["hooks"]["PreToolUse"]
    assert pre_hooks[0] == mine and len(pre_hooks) == 2
    assert pre_hooks[1]["matcher"] == "*"
    assert pre_hooks[1]["hooks"][0]["command"] in ("claros hook pre", "npx getclaros hook pre")
    assert pre_hooks[1]["hooks"][0]["timeout"] == 180  # the 120 s wait for an ask, and more
    assert settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"].endswith(" hook post")
    user = settings_path("user")
    assert install("user") == (user, ["PreToolUse", "PostToolUse", "PostToolUseFailure"])
    assert user == tmp_path / "home" / ".claude" / "settings.json"


@pytest.mark.anyio
async def test_shell_commands_and_edits_are_checked_and_reads_pass(workspace: Workspace) -> None:
    ws = workspace
    ws.push(
        rules=[
            {
                "id": "no-force-push",
                "app": "claude-code",
                "tools": ["Bash"],
                "when": "'push --force' in command",
                "response": "stop",
                "message": "Force pushes rewrite shared history.",
            },
            {
                "id": "env-files",
                "app": "claude-code",
                "tools": ["Edit", "Write"],
                "when": "'.env' in file_path",
                "response": "nudge",
                "message": "Keep secrets out of .env in the repo.",
            },
        ]
    )
    assert await hook(ws, "pre", pre("Read", {"file_path": "/repo/a.py"})) is None
    assert await hook(ws, "pre", pre("Grep", {"pattern": "TODO"})) is None
    denied = decision(await hook(ws, "pre", pre("Bash", {"command": "git push --force"}, "t1")))
    assert denied[0] == "deny" and "no-force-push" in denied[1] and "shared history" in denied[1]
    allowed = await hook(ws, "pre", pre("Bash", {"command": "ls -la"}, "t2"))
    assert allowed is None  # no decision: Claude Code's own permission flow runs
    nudged = decision(
        await hook(
            ws,
            "pre",
            pre("Edit", {"file_path": "/repo/.env", "old_string": "a", "new_string": "b"}, "t3"),
        )
    )
    assert nudged == (None, None, "Claros (env-files): Keep secrets out of .env in the repo.")
    post = {
        "session_id": "sess-1",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls -la"},
        "tool_use_id": "t2",
        "tool_response": {"stdout": "total 0\n", "stderr": "", "interrupted": False},
    }
    assert await hook(ws, "post", post) is None
    failed = {
        "session_id": "sess-1",
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Edit",
        "tool_input": {},
        "tool_use_id": "t3",
        "error": "old_string not found",
    }
    assert await hook(ws, "post", failed) is None
    checks = {c["agent"]["call_id"]: c for c in ws.records("check")}
    assert {k: c["result"] for k, c in checks.items()} == {
        "t1": "stop",
        "t2": "allow",
        "t3": "nudge",
    }
    assert checks["t2"]["agent"]["via"]["guard"] == "claros-hooks"
    assert checks["t2"]["agent"]["session"] == "sess-1"
    outcomes = {o["check_id"]: (o["status"], o["summary"]) for o in ws.records("outcome")}
    assert outcomes == {
        checks["t2"]["check_id"]: ("ok", "total 0"),
        checks["t3"]["check_id"]: ("error", "old_string not found"),
    }


@pytest.mark.anyio
async def test_claros_unreachable_denies_unless_fail_open(
    workspace: Workspace, tmp_path: Path
) -> None:
    event = pre("Bash", {"command": "make deploy"})
    denied = decision(await hook(workspace, "pre", event, CLAROS_URL=dead_url()))
    assert denied[0] == "deny" and "Claros could not check this call" in denied[1]
    opened, stderr = await hook_process(
        workspace, "pre", event, CLAROS_URL=dead_url(), CLAROS_FAIL_OPEN="1"
    )
    assert opened is None and "CLAROS_FAIL_OPEN=1" in stderr  # no decision, never allow
    nowhere = str(tmp_path)  # no saved sign-in either
    no_key = decision(await hook(workspace, "pre", event, CLAROS_KEY="", XDG_CONFIG_HOME=nowhere))
    assert no_key[0] == "deny" and "no Claros key" in no_key[1]


@pytest.mark.anyio
async def test_an_ask_denies_then_allows_the_retry_once_approved(workspace: Workspace) -> None:
    ws = workspace
    ws.push(
        rules=[
            {
                "id": "deploys",
                "app": "claude-code",
                "tools": ["Bash"],
                "when": "'deploy' in command",
                "response": "ask",
                "owners": ["dana@example.com"],
            }
        ]
    )
    event = pre("Bash", {"command": "make deploy"}, "t9")
    waiting = decision(await hook(ws, "pre", event))
    assert waiting[0] == "deny" and "Waiting for approval" in waiting[1]
    (ask,) = ws.records("check")
    with httpx.Client(base_url=ws.claros.url) as http:
        answer = http.post(
            f"/api/asks/{ask['ask_id']}/answer",
            json={"decision": "approve"},
            headers={"Authorization": f"Bearer {ws.admin}"},
        )
        assert answer.status_code == 200, answer.text
    approved = await hook(ws, "pre", event)
    assert approved is None  # approved: Claude Code's own permissions decide
    assert [c["result"] for c in ws.records("check")] == ["ask", "allow"]


@pytest.mark.anyio
async def test_mcp_tools_use_that_servers_guard(workspace: Workspace) -> None:
    ws = workspace
    ws.push(
        rules=[
            {
                "id": "big-share",
                "app": "shop",
                "tools": ["refund_create"],
                "when": "share > 0.5",
                "response": "stop",
                "message": "Too much.",
            }
        ]
    )
    async with Client(ws.guard("shop", example("shop"))):
        await wait_registered(ws, "shop")
        ws.push(mappings=[REFUND_MAPPING])
        read = await hook(ws, "pre", pre("mcp__shop__order_read", {"id": "1187"}))
        big = await hook(
            ws, "pre", pre("mcp__shop__refund_create", {"order": "1187", "amount": 150})
        )
        small = await hook(
            ws, "pre", pre("mcp__shop__refund_create", {"order": "1187", "amount": 5})
        )
    assert read is None  # the guard says it is a read
    assert decision(big)[0] == "deny" and "big-share" in decision(big)[1]
    assert small is None
    assert tools_called(ws) == ["order_read", "order_read"]  # run by the guard for the hook
    # A guard that serves Claude Code itself checks the calls; the hook stays out of it.
    claude = Implementation(name="claude-code", version="2.1.0")
    async with Client(ws.guard("shop", example("shop")), client_info=claude):
        assert (
            await hook(ws, "pre", pre("mcp__shop__refund_create", {"order": "1187", "amount": 150}))
            is None
        )
    assert len(ws.records("check")) == 2


LOOKUP_MAPPING: dict[str, Any] = {
    "app": "shop",
    "tool": "refund_create",
    "lookups": [
        {
            "key": "order",
            "tool": "order_read",
            "arguments": {"id": "$"},
            "pick": "total",
            "var": "order_total",
        }
    ],
}


@pytest.mark.anyio
async def test_saved_login_credentials_are_enough(workspace: Workspace, tmp_path: Path) -> None:
    """No CLAROS_KEY or CLAROS_URL: the hooks (and the guard) use what `claros login` saved,
    and the lookups a hook needs are read once by the shop's guard, for every hook process."""
    ws = workspace
    config = tmp_path / "config"
    saved = {"url": ws.claros.url, "key": ws.agent, "kind": "agent", "person": "dana@example.com"}
    save_credentials(saved, credentials_path({"XDG_CONFIG_HOME": str(config)}))
    signed_in = {"CLAROS_KEY": "", "CLAROS_URL": "", "XDG_CONFIG_HOME": str(config)}
    ws.push(
        rules=[
            {
                "id": "no-rm",
                "app": "claude-code",
                "tools": ["Bash"],
                "when": "'rm -rf' in command",
                "response": "stop",
            },
            {
                "id": "over-total",
                "app": "shop",
                "tools": ["refund_create"],
                "when": "amount > order_total",
                "response": "stop",
                "message": "More than the order.",
            },
        ]
    )
    rm = decision(await hook(ws, "pre", pre("Bash", {"command": "rm -rf /"}, "t1"), **signed_in))
    ls = decision(await hook(ws, "pre", pre("Bash", {"command": "ls"}, "t2"), **signed_in))
    assert rm[0] == "deny" and "no-rm" in rm[1]
    assert ls == (None, None, None)
    async with Client(ws.guard("shop", example("shop"), **signed_in)):
        await wait_registered(ws, "shop")
        ws.push(mappings=[LOOKUP_MAPPING])
        answers = [
            decision(
                await hook(
                    ws,
                    "pre",
                    pre("mcp__shop__refund_create", {"order": "1187", "amount": amount}, use),
                    **signed_in,
                )
            )
            for amount, use in ((150, "t3"), (250, "t4"), (20, "t5"))
        ]
    assert [a[0] for a in answers] == [None, "deny", None]
    assert "over-total" in answers[1][1]
    # Three hook processes, one lookup value: the shop's guard read it once (60 s cache).
    assert tools_called(ws) == ["order_read"]
    checks = ws.records("check")
    assert [c["agent"]["call_id"] for c in checks] == ["t1", "t2", "t3", "t4", "t5"]
    assert {c["on_behalf_of"] for c in checks} == {"dana@example.com"}
    assert [c["vars"] for c in checks[2:]] == [{"order_total": 200}] * 3


@pytest.mark.anyio
async def test_an_unexpected_error_denies_in_one_line_never_a_traceback(
    workspace: Workspace,
) -> None:
    ws = workspace
    event = pre("Bash", {"command": "make deploy"}, "t7")
    broken = {"CLAROS_ASK_WAIT": "soon"}  # a setting the hook cannot use: not a number
    answer, stderr = await hook_process(ws, "pre", event, **broken)
    denied = decision(answer)
    assert denied[0] == "deny" and denied[1] is not None
    assert "the hook failed unexpectedly (ValueError: CLAROS_ASK_WAIT='soon' is not" in denied[1]
    assert "The call was not run" in denied[1]
    assert "Traceback" not in stderr
    assert stderr.splitlines() == [
        "claros hook pre: unexpected error: ValueError: CLAROS_ASK_WAIT='soon' is not a number "
        "of seconds"
    ]
    assert ws.records("check") == [] and ws.records("unchecked") == []

    # With fail-open: no decision (Claude Code's own permissions decide, never an allow),
    # and kept for its post, which reports it as unchecked with how it ended.
    answer, stderr = await hook_process(ws, "pre", event, CLAROS_FAIL_OPEN="1", **broken)
    assert answer is None
    lines = stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in stderr
    assert lines[1].startswith(
        "claros hook pre: Claros could not check this call and CLAROS_FAIL_OPEN=1 leaves it "
        "to Claude Code's own permissions: the hook failed unexpectedly (ValueError"
    )
    assert ws.records("unchecked") == []
    ran = {**event, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "deployed"}}
    assert await hook_process(ws, "post", ran) == (None, "")
    (unchecked,) = ws.records("unchecked")
    assert (unchecked["app"], unchecked["tool"]) == ("claude-code", "Bash")
    assert unchecked["arguments"] == {"command": "make deploy"}
    assert "failed unexpectedly (ValueError" in unchecked["reason"]
    assert (unchecked["status"], unchecked["summary"]) == ("ok", "deployed")
    assert unchecked["agent"]["via"]["guard"] == "claros-hooks"
    assert unchecked["agent"]["call_id"] == "t7"

    # ... and when it can be neither kept nor sent, still no decision, and stderr says so.
    not_a_dir = ws.log.parent / "state-file"
    not_a_dir.write_text("")
    answer, stderr = await hook_process(
        ws,
        "pre",
        {**event, "tool_use_id": "t8"},
        CLAROS_FAIL_OPEN="1",
        CLAROS_URL=dead_url(),
        CLAROS_STATE_DIR=str(not_a_dir),
        **broken,
    )
    assert answer is None
    lines = stderr.splitlines()
    assert len(lines) == 4 and "Traceback" not in stderr
    assert lines[1].startswith("claros hook pre: cannot keep the unchecked call for its outcome: ")
    assert lines[2].startswith(
        "claros hook pre: cannot report the unchecked call to claude-code Bash: cannot reach "
    )
    assert "and it cannot be kept: cannot use " in lines[2]
    assert len(ws.records("unchecked")) == 1

    # A post hook never blocks: nothing on stdout, one line on stderr.
    post = {**event, "hook_event_name": "PostToolUse", "tool_response": {"stdout": ""}}
    answer, stderr = await hook_process(ws, "post", post, CLAROS_TIMEOUT="later")
    assert answer is None
    assert stderr.splitlines() == [
        "claros hook post: unexpected error: ValueError: CLAROS_TIMEOUT='later' is not a number "
        "of seconds > 0"
    ]


def test_install_keeps_one_claros_hook_per_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Claros hook with today's command keeps its timeout (it may be the user's);
    duplicates and older ones go, and an entry they leave empty goes with them; a command
    shlex cannot split is still read, and a hook of someone else's is left alone."""
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))  # no claros: npx getclaros
    path = settings_path("project")
    path.parent.mkdir()
    odd = {"type": "command", "command": "echo 'unbalanced"}
    mine = {"type": "command", "command": "npx getclaros hook pre", "timeout": 300}
    old = {"type": "command", "command": "/opt/venv/bin/claros hook pre"}
    quoted = {
        "type": "command",
        "command": "'/opt/my venv/bin/python' -m claros_guard.cli hook pre",
    }
    not_ours = {"type": "command", "command": "claros-lint hook pre"}
    pre_hooks = [
        {"matcher": "*", "hooks": [odd, mine]},
        {"matcher": "Bash", "hooks": [old]},
        {"matcher": "*", "hooks": [quoted, not_ours]},
    ]
    path.write_text(json.dumps({"hooks": {"PreToolUse": pre_hooks}}))
    assert install("project") == (path, ["PreToolUse", "PostToolUse", "PostToolUseFailure"])
    after = json.loads(path.read_text())["hooks"]["PreToolUse"]
    assert after == [{"matcher": "*", "hooks": [odd, mine]}, {"matcher": "*", "hooks": [not_ours]}]
    once = path.read_bytes()
    assert install("project") == (path, [])
    assert path.read_bytes() == once


def test_install_names_claros_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claros").symlink_to(Path(sys.executable).parent / "claros")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path))
    path, _ = install("project")
    hooks = json.loads(path.read_text())["hooks"]
    assert hooks["PreToolUse"][0]["hooks"][0]["command"] == "claros hook pre"
    assert hooks["PostToolUseFailure"][0]["hooks"][0]["command"] == "claros hook post"


def test_a_broken_install_still_answers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hooks module cannot be loaded (a broken install): pre denies in one line (no
    decision under fail-open), post says nothing; never a traceback or exit 1."""
    from claros_guard import hook_gate

    monkeypatch.setitem(sys.modules, "claros_guard.hooks", None)  # its import now fails
    bash = json.dumps(pre("Bash", {"command": "ls"}))
    code, out = hook_gate.run("pre", bash)
    reason = decision(json.loads(out))
    assert code == 0 and reason[0] == "deny" and reason[1] is not None
    assert reason[1].startswith("Blocked: Claros could not check this call (ModuleNotFound")
    assert capsys.readouterr().err.startswith("claros hook pre: cannot load the hooks: ")
    assert hook_gate.run("post", bash) == (0, "")
    monkeypatch.setenv("CLAROS_FAIL_OPEN", "1")
    assert hook_gate.run("pre", bash) == (0, "")
    assert hook_gate.run("pre", json.dumps(pre("Read", {}))) == (0, "")  # reads never load it
