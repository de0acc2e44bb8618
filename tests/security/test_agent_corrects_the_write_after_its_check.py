"""Attack: the write asks its client a question after its check, and the agent answers
with values the check never saw.

A write may ask its client something while it runs (``elicitation/create``): here the
shop's refund asks to confirm the amount, and refunds the amount the answer gives, as
forms that let a person correct a value before they act do. The check saw the call's
arguments only. So the agent asked to refund 5 on an order of 20 (allowed by "a refund
is at most the order's total"), then answered the shop's question with 400: the shop
refunded 400 on an order of 20, and the ledger said 5 was checked and ran.

An answer the agent gives to a question a checked write asks is now checked as part of
that write: its fields over the call's arguments of the same name, by the same rules
and mappings. The question is answered only when that check lets the write go; else
the server gets an error (the refund is not confirmed) and the agent the rule. The
ledger holds both checks.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered
from tests.security.shop_rules import AT_MOST_THE_TOTAL, REFUND_READS_THE_ORDER, server_command

pytestmark = pytest.mark.anyio

CONFIRMING_SHOP = server_command("confirming_shop")


class Agent:
    """Confirms each refund with the next amount of ``amounts``."""

    def __init__(self, *amounts: float) -> None:
        self.amounts = list(amounts)
        self.asked: list[str] = []

    async def elicit(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(str(getattr(params, "message", "")))
        return ElicitResult(action="accept", content={"amount": self.amounts.pop(0)})


def refunds(ws: Workspace) -> list[dict[str, Any]]:
    return [c["arguments"] for c in ws.calls() if c["tool"] in ("refund_create", "refund_paired")]


def checked_amounts(ws: Workspace) -> list[Any]:
    return [r["arguments"].get("amount") for r in ws.records("check")]


async def test_the_agents_answer_is_checked_as_part_of_the_write(workspace: Workspace) -> None:
    ws = workspace
    agent = Agent(400)
    async with Client(ws.guard("shop", CONFIRMING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        try:
            refund = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
            said = text(refund) if refund.is_error else "the refund ran"
        except MCPError as exc:  # this shop lets the error of its question end the call
            said = exc.message
    assert refunds(ws) == [], f"refunded what the agent answered after the check: {refunds(ws)}"
    assert len(agent.asked) == 1, agent.asked
    assert "at-most-the-total" in said, said
    assert checked_amounts(ws) == [5, 400]


async def test_an_answer_the_rules_allow_still_confirms_the_write(workspace: Workspace) -> None:
    ws = workspace
    agent = Agent(15, 5)
    async with Client(ws.guard("shop", CONFIRMING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        corrected = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
        assert not corrected.is_error, text(corrected)
        confirmed = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
        assert not confirmed.is_error, text(confirmed)
    assert refunds(ws) == [{"order": "1187", "amount": 15}, {"order": "1187", "amount": 5}]
    # The correction is checked; an answer that changes nothing the check saw is not.
    assert checked_amounts(ws) == [5, 15, 5]
    outcomes = ws.records("outcome")
    assert len(outcomes) == 3, outcomes


async def test_a_question_while_two_writes_run_is_not_answered_unchecked(
    workspace: Workspace,
) -> None:
    """Over stdio a question does not say which call asks. While two checked writes run,
    the first question is refused; a later one (once the other write ended) is checked
    against the write still running. Either way no answer reaches the shop unchecked."""
    ws = workspace
    agent = Agent(400, 400)
    paired = {**REFUND_READS_THE_ORDER, "tool": "refund_paired"}
    rule = {**AT_MOST_THE_TOTAL, "tools": ["refund_paired"]}
    async with Client(ws.guard("shop", CONFIRMING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_paired")
        ws.push(rules=[rule], mappings=[paired])
        said: list[str] = []

        async def refund() -> None:
            try:
                result = await shop.call_tool("refund_paired", {"order": "1187", "amount": 5})
                said.append(text(result) if result.is_error else "the refund ran")
            except MCPError as exc:
                said.append(exc.message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(refund)
            tg.start_soon(refund)
    assert refunds(ws) == [], f"refunded an answer no check saw: {refunds(ws)}"
    assert any("several checked writes are running" in s for s in said), said
