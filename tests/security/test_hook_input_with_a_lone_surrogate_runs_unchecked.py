"""The agent has Claude Code run a write whose input holds half of a surrogate pair.

A model writes its tool input as JSON, and ``"\\ud800"`` is JSON: JavaScript reads it as a
string with a lone surrogate, and Claude Code hands it to the hook the same way
(``JSON.stringify`` escapes it back). Python reads it too, but no UTF-8 text holds it: the
hook's check could not be encoded, and the hook "failed unexpectedly". Without
``CLAROS_FAIL_OPEN`` that was a deny saying so; with ``CLAROS_FAIL_OPEN=1``, which is for
Claros being out of reach, it was no decision: the write ran unchecked, and its
unchecked report (holding the same string) could not be delivered either. One escape in
a command or a file's content took any write past every rule. The hook now denies such
a call with the reason, also failing open, as the guard refuses such a line.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.guard import conftest as guard_fixtures
from tests.guard.conftest import Workspace
from tests.security.test_hooks_never_loosen import CLAROS

claros = guard_fixtures.claros  # the guard tests' fixtures: one Claros, a workspace
workspace = guard_fixtures.workspace

STOP_RM: dict[str, object] = {
    "id": "no-rm",
    "app": "claude-code",
    "tools": ["Bash"],
    "when": "'rm -rf' in command",
    "response": "stop",
    "message": "No rm -rf.",
}


def pre(tool: str, tool_input: str) -> str:
    """Claude Code's hook input, as JavaScript's JSON.stringify writes it (the lone
    surrogate escaped)."""
    return (
        '{"hook_event_name": "PreToolUse", "session_id": "s", "tool_use_id": "toolu_1", '
        f'"tool_name": "{tool}", "tool_input": {tool_input}}}'
    )


@pytest.mark.parametrize("fail_open", ["0", "1"])
@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Bash", '{"command": "rm -rf ~/work # \\ud800"}'),
        ("Write", '{"file_path": "/repo/a", "content": "x\\udfff"}'),
        ("Bash", '{"command": "ls", "\\udbff": 1}'),
    ],
    ids=["bash-command", "file-content", "a-key"],
)
def test_a_lone_surrogate_in_a_write_is_denied_even_failing_open(
    workspace: Workspace, fail_open: str, tool: str, tool_input: str
) -> None:
    workspace.push(rules=[STOP_RM])
    done = subprocess.run(
        [str(CLAROS), "hook", "pre"],
        input=pre(tool, tool_input),
        env={**workspace.env, "CLAROS_FAIL_OPEN": fail_open},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), f"no decision: the write runs unchecked ({done.stderr.strip()})"
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny", answer
    assert "surrogate" in answer["permissionDecisionReason"], answer
    assert "unexpected" not in done.stderr, done.stderr


def test_a_read_with_a_lone_surrogate_still_passes(workspace: Workspace) -> None:
    done = subprocess.run(
        [str(CLAROS), "hook", "pre"],
        input=pre("Grep", '{"pattern": "\\ud800"}'),
        env=workspace.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, ""), done
