"""Fault: the write ends before the check of its answer does, and that check gets no
outcome.

The answer to a question a checked write asks is checked as part of the write, and that
check gets the write's outcome (tests/security/test_agent_corrects_the_write_after_its_check.py).
A check can take long: here the answer (a refund corrected to 400) asks a person. A shop
that does not wait for the answer answered the call meanwhile, and the write's outcome was
reported; the person then approved, the answer's check was logged as allowed, and no
outcome ever followed it: a check of the ledger with no word of whether it ran
(evidence.txt: every checked action's outcome is reported).

Now an answer checked after its write ended is reported on its own (an error: the answer
was not given to the server, which no write waits for), and the server gets an error
instead of the answer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered

pytestmark = pytest.mark.anyio

HASTY_SHOP = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "hasty_shop.py")]
BIG_REFUNDS = {
    "id": "big-refunds",
    "app": "shop",
    "tools": ["refund_create"],
    "when": "amount > 100",
    "response": "ask",
    "owners": ["dana@example.com"],
    "message": "A refund over 100 needs a person.",
}


async def _until(found: Callable[[], list[dict[str, Any]]], what: str) -> list[dict[str, Any]]:
    with anyio.move_on_after(15):
        while not (got := found()):
            await anyio.sleep(0.05)
        return got
    raise AssertionError(f"no {what} within 15 s")


async def test_the_answers_check_gets_an_outcome_when_the_write_ended_first(
    workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    go = tmp_path / "go"

    async def answer(ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"amount": 400})

    guard = ws.guard("shop", HASTY_SHOP, "--ask-wait", "30", HASTY_SHOP_GO=str(go))
    async with Client(guard, elicitation_callback=answer) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[BIG_REFUNDS])
        said: list[str] = []

        async def refund() -> None:
            result = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
            said.append(text(result))

        async with anyio.create_task_group() as tg:
            tg.start_soon(refund)
            (asked,) = await _until(
                lambda: [c for c in ws.records("check") if c["result"] == "ask"], "ask"
            )
            go.touch()  # the shop answers the call now, the answer's check still asking
            with anyio.fail_after(15):
                while not said:
                    await anyio.sleep(0.05)
            async with httpx.AsyncClient(base_url=ws.claros.url) as http:
                approved = await http.post(
                    f"/api/asks/{asked['ask_id']}/answer",
                    json={"decision": "approve"},
                    headers={"Authorization": f"Bearer {ws.admin}"},
                )
            assert approved.status_code == 200, approved.text
        checks = await _until(
            lambda: [c for c in ws.records("check") if c.get("approval")], "approved check"
        )
        (allowed,) = checks
        assert allowed["result"] == "allow" and allowed["arguments"]["amount"] == 400
        with anyio.move_on_after(10):
            while not [o for o in ws.records("outcome") if o["check_id"] == allowed["check_id"]]:
                await anyio.sleep(0.05)
    outcomes = {o["check_id"]: o for o in ws.records("outcome")}
    assert allowed["check_id"] in outcomes, (
        f"the answer's check {allowed['check_id']} got no outcome; outcomes: {outcomes}"
    )
    got = outcomes[allowed["check_id"]]
    assert got["status"] == "error" and "had ended" in got["summary"], got
    (write,) = [c for c in ws.records("check") if c["arguments"]["amount"] == 5]
    assert outcomes[write["check_id"]]["status"] == "ok"
    answers = [c["arguments"] for c in ws.calls() if c["tool"] == "<answer>"]
    assert answers and "error" in answers[0] and "had ended" in str(answers[0]), answers
