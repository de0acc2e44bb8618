"""Attacks on rules through the Claude Code hook's trimming of long strings.

``claros hook pre`` cuts every string of ``tool_input`` longer than 2000 characters to its
first 2000 (``hooks._trimmed``) before the check. Claude Code then runs the whole
command; Claros decided (and an approval was bound) on a prefix of it:

* a rule reading the command (``'deploy' in command``) never sees what comes after the
  first 2000 characters, so a long enough command carries anything past it;
* an approval is bound to the call's hash, computed on the trimmed call, so the person
  approves one command and the agent runs another with the same first 2000 characters
  and the same length.

Each test runs the real ``claros`` console script as Claude Code runs it against the real
local Claros server.
"""

# ruff: noqa: F811 - the tests take the guard tests' fixtures, imported below, by name

from __future__ import annotations

import pytest

from tests.guard.conftest import Workspace, anyio_backend, claros, workspace  # noqa: F401
from tests.security.test_hooks_never_loosen import (
    answer_ask,
    denied,
    open_ask,
    pre,
    run_hook,
)

STOP_DEPLOYS = {
    "id": "no-deploys",
    "app": "claude-code",
    "tools": ["Bash"],
    "when": "'deploy' in command",
    "response": "stop",
    "message": "Deploys are not run by agents",
}
ASK_DEPLOYS = {**STOP_DEPLOYS, "id": "ask-deploys", "response": "ask",
               "owners": ["dana@example.com"]}  # fmt: skip
PADDING = "true " + "#" * 2100  # a shell comment: harmless, and longer than 2000 characters


@pytest.mark.anyio
async def test_a_rule_sees_the_end_of_a_long_command(workspace: Workspace) -> None:
    ws = workspace
    ws.push(rules=[STOP_DEPLOYS])
    short = await run_hook(ws, pre("Bash", {"command": "make deploy"}, "t-short"))
    assert "no-deploys" in denied(short[0])
    # The same deploy, after a long harmless comment line: Claude Code runs all of it.
    command = PADDING + "\nmake deploy"
    stdout, _ = await run_hook(ws, pre("Bash", {"command": command}, "t-long"))
    assert stdout, "the hook said nothing: Claude Code runs the deploy, Claros never saw it"
    assert "no-deploys" in denied(stdout)


@pytest.mark.anyio
async def test_an_approval_covers_only_the_command_the_person_saw(workspace: Workspace) -> None:
    ws = workspace
    ws.push(rules=[ASK_DEPLOYS])
    # The agent asks for a harmless deploy dry run, of a length it chose ...
    approved_cmd = "make deploy-dry-run " + "#" * 2100 + "\ntrue"
    # ... and will run another command with the same first 2000 characters and length.
    tail = "\nmake deploy"
    other_cmd = approved_cmd[: len(approved_cmd) - len(tail)] + tail
    assert len(other_cmd) == len(approved_cmd) and other_cmd != approved_cmd
    # The hook waits briefly, then tells the agent to call again once it is approved.
    first, _ = await run_hook(ws, pre("Bash", {"command": approved_cmd}, "t-ask-1"))
    assert "Waiting for approval" in denied(first)
    ask_id = await open_ask(ws)
    answer_ask(ws, ask_id, "approve")  # the person approves the dry run they were shown
    # The agent calls again, but with the other command.
    stdout, _ = await run_hook(ws, pre("Bash", {"command": other_cmd}, "t-ask-2"))
    assert stdout, "the hook said nothing: Claude Code runs a command no one approved"
    denied(stdout)


@pytest.mark.anyio
async def test_a_call_too_large_to_check_whole_is_blocked_with_the_reason(
    workspace: Workspace,
) -> None:
    """The other side of checking calls whole: one larger than the check API takes (its
    1 MB body limit) is not cut to fit, it is blocked, and the agent is told why."""
    ws = workspace
    ws.push(rules=[STOP_DEPLOYS])
    command = "true " + "#" * 1_100_000
    stdout, _ = await run_hook(ws, pre("Bash", {"command": command}, "t-huge"))
    assert stdout, "the hook let a call it could not check whole run"
    reason = denied(stdout)
    assert "(413)" in reason and "at most 1000000" in reason, reason
