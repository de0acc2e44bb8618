"""Attack: the agent asks the server to run a checked write as a task, so that the
write's question comes after the write was answered, where the guard takes it for no
write's.

MCP 2025-11-25 lets a client ask for a call to run as a task (``params.task``): a server
that supports it answers at once with the task, and the call goes on after that answer.
The guard checked the call's arguments and forwarded its params as they were, ``task``
included. The shop's refund asks the client to confirm or correct the amount
(``elicitation/create``); the guard checks such an answer as part of the write, but only
while the write runs (test_agent_corrects_the_write_after_its_check.py). Run as a task,
the write had been answered when it asked: the guard relayed the question as any other
and the agent's answer to the shop unchecked. A refund of 5, checked and allowed under
"refunds over 100 are stopped", was confirmed at 400, and the shop refunded 400; the
ledger said 5 was checked and ran ``ok``.

The guard does not relay tasks (``tasks/get``, ``tasks/result`` are no client methods
it passes on), so it cannot follow a write past its answer: a ``tools/call`` asking to
run as a task is now refused as the call's shape, never forwarded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.guard import conftest as guard_fixtures
from tests.guard.conftest import Workspace
from tests.security.raw_guard import WAIT, CheckLog, RawGuard
from tests.security.shop_rules import SERVERS

claros = guard_fixtures.claros  # the guard tests' fixtures: one Claros, a workspace
workspace = guard_fixtures.workspace
TASKING_SHOP = SERVERS / "tasking_shop.py"
AT_MOST_100 = {
    "id": "refunds-up-to-100",
    "app": "shop",
    "tools": ["refund_create"],
    "when": "amount > 100",
    "response": "stop",
    "message": "Refunds over 100 are made by a person.",
}
REFUND_5 = {"order": "1187", "amount": 5}


@pytest.fixture
def guard(workspace: Workspace, tmp_path: Path) -> Iterator[tuple[RawGuard, CheckLog]]:
    workspace.push(rules=[AT_MOST_100])
    with CheckLog(workspace.claros.url) as check_log:
        with RawGuard(workspace, check_log.url, tmp_path, upstream=TASKING_SHOP) as raw:
            raw.initialize()
            yield raw, check_log


def confirm(raw: RawGuard, n: int, amount: float) -> None:
    """Answer the ``n``-th question the shop asked through the guard with ``amount``."""
    question = raw.asked("elicitation/create", n)
    answer = {"action": "accept", "content": {"amount": amount}}
    raw.send({"jsonrpc": "2.0", "id": question["id"], "result": answer})


def refunds(ws: Workspace) -> list[dict[str, Any]]:
    return [c["arguments"] for c in ws.calls() if c["tool"] == "refund_create"]


def checked(check_log: CheckLog) -> list[Any]:
    return [body["arguments"].get("amount") for _, body in check_log.checked()]


def test_a_write_run_as_a_task_is_refused(
    workspace: Workspace, guard: tuple[RawGuard, CheckLog]
) -> None:
    raw, check_log = guard
    params = {"name": "refund_create", "arguments": REFUND_5, "task": {"ttl": 60000}}
    answer = raw.request("t1", "tools/call", params)
    if "result" in answer:  # forwarded: the shop asks once it answered; the agent says 400
        confirm(raw, 1, 400)
        deadline = time.monotonic() + WAIT
        while not refunds(workspace) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert refunds(workspace) == [], (
        f"refunded what the agent answered after its write was answered: {refunds(workspace)}"
    )
    error = answer.get("error") or {}
    assert error.get("code") == -32602, answer
    assert "as a task" in error["message"] and "not sent to the server" in error["message"]
    assert checked(check_log) == []
    assert raw.upstream_saw("refund_create") == []


def test_the_same_write_run_as_a_call_has_its_answer_checked(
    workspace: Workspace, guard: tuple[RawGuard, CheckLog]
) -> None:
    raw, check_log = guard
    raw.send({"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
              "params": {"name": "refund_create", "arguments": REFUND_5}})  # fmt: skip
    confirm(raw, 1, 400)
    stopped = raw.answer("c1")
    raw.send({"jsonrpc": "2.0", "id": "c2", "method": "tools/call",
              "params": {"name": "refund_create", "arguments": REFUND_5}})  # fmt: skip
    confirm(raw, 2, 15)
    ran = raw.answer("c2")
    assert refunds(workspace) == [{"order": "1187", "amount": 15}]
    assert "refunds-up-to-100" in json.dumps(stopped), stopped
    assert ran["result"].get("structuredContent") == {"ok": True, "order": "1187", "amount": 15}
    assert checked(check_log) == [5, 400, 5, 15]
