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
from tests.guard.conftest import Workspace, example
from tests.guard.test_examples import REFUND_MAPPING, tools_called, wait_registered
from tests.guard.test_faults import dead_url


async def hook(
    ws: Workspace, kind: str, event: dict[str, Any], **env: str
) -> dict[str, Any] | None:
    done = await anyio.run_process(
        [sys.executable, "-m", "claros_guard.cli", "hook", kind],
        input=json.dumps(event).encode(),
        env={**ws.env, "CLAROS_ASK_WAIT": "0.3", **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode().strip()
    return json.loads(out) if out else None


def pre(tool: str, tool_input: dict[str, Any], use: str = "toolu_1") -> dict[str, Any]:
    return {
        "session_id": "sess-1",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": use,
    }


def decision(answer: dict[str, Any] | None) -> tuple[str, str, str | None]:
    assert answer is not None
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out["permissionDecision"], out["permissionDecisionReason"], out.get("additionalContext")


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
    assert pre_hooks[1]["hooks"][0]["command"].endswith("hook pre")
    assert settings["hooks"]["PostToolUse"][0]["hooks"][0]["command"].endswith("hook post")
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
    allowed = decision(await hook(ws, "pre", pre("Bash", {"command": "ls -la"}, "t2")))
    assert allowed[0] == "allow" and allowed[2] is None
    nudged = decision(
        await hook(
            ws,
            "pre",
            pre("Edit", {"file_path": "/repo/.env", "old_string": "a", "new_string": "b"}, "t3"),
        )
    )
    assert (
        nudged[0] == "allow"
        and nudged[2] == "Claros (env-files): Keep secrets out of .env in the repo."
    )
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
async def test_claros_unreachable_denies_unless_fail_open(workspace: Workspace) -> None:
    event = pre("Bash", {"command": "make deploy"})
    denied = decision(await hook(workspace, "pre", event, CLAROS_URL=dead_url()))
    assert denied[0] == "deny" and "Claros could not check this call" in denied[1]
    opened = decision(
        await hook(workspace, "pre", event, CLAROS_URL=dead_url(), CLAROS_FAIL_OPEN="1")
    )
    assert opened[0] == "allow" and "CLAROS_FAIL_OPEN=1" in opened[1]
    no_key = decision(await hook(workspace, "pre", event, CLAROS_KEY=""))
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
    approved = decision(await hook(ws, "pre", event))
    assert approved[0] == "allow"
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
    assert decision(small)[0] == "allow"
    assert tools_called(ws) == ["order_read", "order_read"]  # run by the guard for the hook
    # A guard that serves Claude Code itself checks the calls; the hook stays out of it.
    claude = Implementation(name="claude-code", version="2.1.0")
    async with Client(ws.guard("shop", example("shop")), client_info=claude):
        assert (
            await hook(ws, "pre", pre("mcp__shop__refund_create", {"order": "1187", "amount": 150}))
            is None
        )
    assert len(ws.records("check")) == 2
