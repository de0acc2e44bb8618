"""Attack: the agent answers a checked write's question with values under an action that
is not spelled ``accept``.

The guard checks the answer to a question a checked write asks (``elicitation/create``)
as part of that write, when the answer accepts: an answer that declines or cancels
carries no values, and went to the server as it was. It took every action but ``accept``
for one of those. A server that reads answers leniently (the content of any answer that
does not decline or cancel, so ``"Accept"``, or no action at all, is a yes) got the
agent's values unchecked: a refund of 5, checked and allowed under "refunds over 100 are
stopped", was confirmed at 400 with ``{"action": "Accept", "content": {"amount": 400}}``,
and the shop refunded 400.

An answer while a checked write runs is now given to the server only as MCP spells it:
``accept`` (checked with the write, as before), or ``decline`` / ``cancel`` without any
content. Any other action, or an accept whose content is not an object, is refused
(``elicitation/create answer withheld: ...``), and the agent is told why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture
def guard(workspace: Workspace, tmp_path: Path) -> Iterator[tuple[RawGuard, CheckLog]]:
    workspace.push(rules=[AT_MOST_100])
    with CheckLog(workspace.claros.url) as check_log:
        with RawGuard(workspace, check_log.url, tmp_path, upstream=TASKING_SHOP) as raw:
            raw.initialize({"elicitation": {}})
            yield raw, check_log


def refund_answered(raw: RawGuard, n: int, answer: dict[str, Any]) -> str:
    """The agent's ``n``-th refund of 5, its question answered with ``answer``; what the
    call was answered."""
    id = f"c{n}"
    raw.send({"jsonrpc": "2.0", "id": id, "method": "tools/call",
              "params": {"name": "refund_create", "arguments": REFUND_5}})  # fmt: skip
    question = raw.asked("elicitation/create", n)
    raw.send({"jsonrpc": "2.0", "id": question["id"], "result": answer})
    return json.dumps(raw.answer(id))


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "Accept", "content": {"amount": 400}},
        {"action": "ACCEPT", "content": {"amount": 400}},
        {"content": {"amount": 400}},
        {"action": "accepted", "content": {"amount": 400}},
        {"action": None, "content": {"amount": 400}},
    ],
)
def test_values_under_an_action_mcp_does_not_spell_are_withheld(
    workspace: Workspace, guard: tuple[RawGuard, CheckLog], answer: dict[str, Any]
) -> None:
    raw, check_log = guard
    said = refund_answered(raw, 1, answer)
    assert refunds(workspace) == [], f"refunded what the agent answered unchecked: {said}"
    assert "not confirmed" in said, said  # the shop got the guard's error, not the answer
    assert checked(check_log) == [5]
    assert "Claros withheld the answer the server asked for: its action is" in said, said


def test_a_decline_goes_without_values_and_an_accept_is_checked(
    workspace: Workspace, guard: tuple[RawGuard, CheckLog]
) -> None:
    """A decline carrying content reaches the server as a bare decline (this shop would
    refuse it either way); a well-spelled accept is checked with the write, as before."""
    raw, check_log = guard
    declined = refund_answered(raw, 1, {"action": "decline", "content": {"amount": 400}})
    stopped = refund_answered(raw, 2, {"action": "accept", "content": {"amount": 400}})
    ran = refund_answered(raw, 3, {"action": "accept", "content": {"amount": 15}})
    assert "not confirmed" in declined, declined
    assert "refunds-up-to-100" in stopped, stopped
    assert '\\"amount\\": 15' in ran, ran
    assert refunds(workspace) == [{"order": "1187", "amount": 15}]
    assert checked(check_log) == [5, 5, 400, 5, 15]
    answers = [json.loads(line) for line in raw.upstream_saw('"action"')]
    assert answers[0]["result"] == {"action": "decline"}, answers


def test_an_accept_whose_content_is_no_object_is_withheld(
    workspace: Workspace, guard: tuple[RawGuard, CheckLog]
) -> None:
    raw, check_log = guard
    said = refund_answered(raw, 1, {"action": "accept", "content": [400]})
    assert refunds(workspace) == []
    assert "not confirmed" in said, said
    assert "its content is list, not an object" in said, said
    assert raw.upstream_saw("400") == []
    assert checked(check_log) == [5]
