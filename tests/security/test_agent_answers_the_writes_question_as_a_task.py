"""Attack: the agent says it runs a server's questions as tasks, and gives the answer to
a checked write's question where the guard does not look for one.

MCP 2025-11-25 lets a client run a server's request as a task: a client that declares
``capabilities.tasks.requests.elicitation.create`` may be asked ``elicitation/create``
with ``params.task``; it answers with a task at once, and the server fetches the answer
later with ``tasks/result``. The guard passed the agent's capabilities to the server as
they were, and relayed every request the server sent. It checks the answer to a question
a checked write asks (its fields over the call's arguments:
test_agent_corrects_the_write_after_its_check.py), but the answer to
``elicitation/create`` was now a task, with no values, and the values came as the answer
to ``tasks/result``, which the guard relayed to the server unchecked. A refund of 5,
checked and allowed under "refunds over 100 are stopped", was confirmed at 400 that way,
and the shop refunded 400.

The guard relays no tasks: the ``tasks`` capability is left out of what the agent's
``initialize`` tells the server (and of what the server's answer tells the agent), and
a server's request the guard does not know (``tasks/result``, ...) or one asked as a
task is refused, never relayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.guard import conftest as guard_fixtures
from tests.guard.conftest import Workspace
from tests.security.raw_guard import CheckLog, RawGuard
from tests.security.test_agent_runs_the_write_as_a_task import (
    AT_MOST_100,
    REFUND_5,
    TASKING_SHOP,
    checked,
    refunds,
)

claros = guard_fixtures.claros  # the guard tests' fixtures: one Claros, a workspace
workspace = guard_fixtures.workspace
# The agent says it runs elicitation/create (and tools/call answers) as tasks.
TASKS = {"requests": {"elicitation": {"create": {}}}, "list": {}, "cancel": {}}


def open_guard(ws: Workspace, tmp: Path, check_log: CheckLog, **env: str) -> RawGuard:
    return RawGuard(ws, check_log.url, tmp, upstream=TASKING_SHOP, **env)


@pytest.fixture
def check_log(workspace: Workspace) -> Iterator[CheckLog]:
    workspace.push(rules=[AT_MOST_100])
    with CheckLog(workspace.claros.url) as log:
        yield log


def answer_as_a_task(raw: RawGuard, amount: float) -> str:
    """The agent's part: the shop's question answered with a task, then the task's result
    with ``amount``; what the refund's call was answered."""
    question = raw.asked("elicitation/create")
    assert "task" in question["params"], question
    when = "2026-01-01T00:00:00Z"
    task = {"taskId": "t-1", "status": "working", "ttl": 60000,
            "createdAt": when, "lastUpdatedAt": when}  # fmt: skip
    raw.send({"jsonrpc": "2.0", "id": question["id"], "result": {"task": task}})
    fetch = raw.asked("tasks/result")
    confirmed = {"action": "accept", "content": {"amount": amount}}
    raw.send({"jsonrpc": "2.0", "id": fetch["id"], "result": confirmed})
    return json.dumps(raw.answer("c1"))


def call_refund(raw: RawGuard) -> None:
    raw.send({"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
              "params": {"name": "refund_create", "arguments": REFUND_5}})  # fmt: skip


def test_the_server_is_not_told_the_agent_runs_questions_as_tasks(
    workspace: Workspace, check_log: CheckLog, tmp_path: Path
) -> None:
    with open_guard(workspace, tmp_path, check_log) as raw:
        hello = raw.initialize({"elicitation": {}, "tasks": TASKS})
        call_refund(raw)
        question = raw.asked("elicitation/create")
        if "task" in question["params"]:  # the shop was told: it asks as a task
            said = answer_as_a_task(raw, 400)
        else:
            answer = {"action": "accept", "content": {"amount": 400}}
            raw.send({"jsonrpc": "2.0", "id": question["id"], "result": answer})
            said = json.dumps(raw.answer("c1"))
        initialize = raw.upstream_saw('"initialize"')
    assert refunds(workspace) == [], f"refunded what the agent answered as a task: {said}"
    assert "refunds-up-to-100" in said, said
    assert checked(check_log) == [5, 400]
    assert len(initialize) == 1 and '"tasks"' not in initialize[0], initialize
    assert "tasks" not in hello["capabilities"], hello  # the shop said it runs calls as tasks
    assert hello["capabilities"].get("tools") == {}


def test_a_question_asked_as_a_task_is_not_relayed(
    workspace: Workspace, check_log: CheckLog, tmp_path: Path
) -> None:
    """A server that asks as a task all the same (not told it may) is refused, and so is
    the ``tasks/result`` it would send: the guard relays no tasks."""
    with open_guard(workspace, tmp_path, check_log, TASKING_SHOP_ASKS_AS_TASKS="1") as raw:
        raw.initialize({"elicitation": {}, "tasks": TASKS})
        call_refund(raw)
        said = json.dumps(raw.answer("c1"))
        relayed = [m.get("method") for m in raw.received if "method" in m and "id" in m]
    assert refunds(workspace) == []
    assert relayed == [], f"the guard relayed the shop's requests: {relayed}"
    assert "not confirmed" in said, said
    assert checked(check_log) == [5]
