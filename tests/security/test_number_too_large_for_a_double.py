"""THREATS.md §1 and §5: a number too large for a double in a write's arguments.

The attack: ``"amount": 1e400`` (or ``-1e400``, or 400 digits after ``1.``e999). Python's
JSON reader, which the guard uses, reads it as infinity; the check API refuses infinity
(it is not JSON), so the guard's request to Claros failed to encode and the agent got
``{"code": 0, "message": "Out of range float values are not JSON compliant"}`` with a
traceback on the guard's stderr: nothing was forwarded, but it was a crash, not a refusal
saying why. The guard now refuses such a line as it refuses NaN, under the request's id:
readers disagree on that number (infinity to one, a huge exact number to another), so the
guard cannot check the call the server would run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.guard import conftest as guard_fixtures
from tests.guard.conftest import Workspace
from tests.security.raw_guard import CheckLog, RawGuard
from tests.security.test_guard_shape import INVALID_PARAMS, refusal
from tests.security.test_hooks_never_loosen import CLAROS

claros = guard_fixtures.claros  # the guard tests' fixtures: one Claros, a workspace
workspace = guard_fixtures.workspace


@pytest.fixture
def check_log(workspace: Workspace) -> Iterator[CheckLog]:
    with CheckLog(workspace.claros.url) as log:
        yield log


@pytest.fixture
def guard(workspace: Workspace, check_log: CheckLog, tmp_path: Path) -> Iterator[RawGuard]:
    with RawGuard(workspace, check_log.url, tmp_path) as raw:
        raw.initialize()
        yield raw


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1.5E+309", "9" * 400 + ".0"])
def test_a_number_past_a_double_is_refused_with_its_reason(
    guard: RawGuard, check_log: CheckLog, number: str
) -> None:
    line = (
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": '
        f'"refund_create", "arguments": {{"order": "o-1", "amount": {number}}}}}}}'
    )
    guard.send_raw(line.encode())
    message = refusal(guard.answer(5), INVALID_PARAMS, "too large")
    assert number[:8] in message
    assert guard.upstream_saw("refund_create") == []
    assert "Traceback" not in guard.stderr()
    guard.still_serves(check_log, "after")


@pytest.mark.parametrize("fail_open", ["0", "1"])
@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity"])
def test_a_hook_input_past_a_double_is_denied_even_failing_open(
    workspace: Workspace, number: str, fail_open: str
) -> None:
    """Claude Code's hook JSON never holds such a number (JavaScript writes Infinity and
    NaN as null), so one is input Claude Code did not send: ``pre`` denies it, as any
    other, also under CLAROS_FAIL_OPEN=1, which is for Claros being out of reach. Before,
    the hook failed on it unexpectedly, and failing open gave no decision."""
    event = (
        '{"hook_event_name": "PreToolUse", "session_id": "s", "tool_use_id": "toolu_1", '
        f'"tool_name": "Write", "tool_input": {{"file_path": "/repo/a", "content": "x", '
        f'"mode": {number}}}}}'
    )
    done = subprocess.run(
        [str(CLAROS), "hook", "pre"],
        input=event,
        env={**workspace.env, "CLAROS_FAIL_OPEN": fail_open},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny", answer
    assert "not JSON Claude Code sends" in answer["permissionDecisionReason"]
    assert "Traceback" not in done.stderr
