"""Attack: a shell command run through a Claude Code tool other than ``Bash``.

evidence.txt counts "a shell command or file edit in a coding agent" as a write. The hooks
checked five built-in tools by name (``Bash``, ``Edit``, ``Write``, ``MultiEdit``,
``NotebookEdit``) and let every other built-in tool pass at once. Claude Code also runs
shell commands as ``PowerShell`` (on by default on Windows without Git Bash, opt-in
elsewhere) and ``Monitor`` (a command run in the background, its output fed back): the
agent that a rule on shell commands stops as ``Bash`` ran the same command as ``Monitor``
or ``PowerShell``; the hook printed nothing, Claude Code's own permissions ran it, and
Claros neither decided nor recorded it. The same for any built-in tool Claude Code adds
later that runs a command or edits a file.

Now only the built-in tools known to run no command and edit no file pass at once (the
hook's first step still loads nothing else for them); every other non-MCP tool, known or
not, is a write of ``claude-code``, checked with its input (and, Claros unreachable,
denied). Each test runs the real ``claros`` console script as Claude Code runs it against
the real local Claros server.
"""

# ruff: noqa: F811 - the tests take the guard tests' fixtures, imported below, by name

from __future__ import annotations

import pytest

from tests.guard.conftest import Workspace, anyio_backend, claros, workspace  # noqa: F401
from tests.guard.test_faults import dead_url
from tests.security.test_hooks_never_loosen import denied, pre, run_hook

SHELL_TOOLS = ["Bash", "PowerShell", "Monitor"]
STOP_FORCE_PUSH = {
    "id": "no-force-push",
    "app": "claude-code",
    "tools": SHELL_TOOLS,
    "when": "'--force' in command",
    "response": "stop",
    "message": "Force pushes are not run by agents",
}


@pytest.mark.anyio
@pytest.mark.parametrize("tool", SHELL_TOOLS)
async def test_a_rule_on_shell_commands_stops_every_shell_tool(
    workspace: Workspace, tool: str
) -> None:
    ws = workspace
    ws.push(rules=[STOP_FORCE_PUSH])
    stdout, _ = await run_hook(ws, pre(tool, {"command": "git push --force"}, f"t-{tool}"))
    assert stdout, f"the hook said nothing: Claude Code runs the force push as {tool}, unchecked"
    assert "no-force-push" in denied(stdout)
    checks = ws.records("check")
    assert [(c["app"], c["tool"]) for c in checks] == [("claude-code", tool)]


@pytest.mark.anyio
async def test_a_tool_claros_has_not_heard_of_is_checked(workspace: Workspace) -> None:
    """A built-in tool added after this release: checked as a write (recorded, counted),
    not waved through because its name is not on a list of writes."""
    ws = workspace
    event = pre("RunScript", {"script": "git push --force"}, "t-new")
    stdout, _ = await run_hook(ws, event)
    assert stdout == ""  # no rule names it: allowed, so Claude Code's permissions decide
    assert [(c["app"], c["tool"]) for c in ws.records("check")] == [("claude-code", "RunScript")]
    # Claros unreachable: denied, as any write is.
    down, _ = await run_hook(ws, pre("RunScript", {"script": "x"}, "t-down"), CLAROS_URL=dead_url())
    assert "could not" in denied(down).lower() or "unreachable" in denied(down).lower()


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["Read", "Grep", "Glob", "WebFetch", "TodoWrite", "Agent"])
async def test_tools_that_run_nothing_still_pass_unchecked(workspace: Workspace, tool: str) -> None:
    ws = workspace
    stdout, stderr = await run_hook(ws, pre(tool, {"pattern": "x"}, f"t-{tool}"))
    assert (stdout, stderr) == ("", "")
    assert ws.records("check") == []


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["", None, ["Bash"], 5])
async def test_an_input_naming_no_tool_is_denied_with_the_reason(
    workspace: Workspace, name: object
) -> None:
    """Not Claude Code's input: nothing to pass it by, nothing to check; denied, saying why."""
    event = pre("Bash", {"command": "git push --force"}, "t-noname")
    if name is None:
        del event["tool_name"]
    else:
        event["tool_name"] = name
    stdout, stderr = await run_hook(workspace, event)
    assert "no tool_name" in denied(stdout) and "no tool_name" in stderr
    assert workspace.records("check") == []
    after, _ = await run_hook(workspace, {**event, "hook_event_name": "PostToolUse"}, "post")
    assert after == ""
