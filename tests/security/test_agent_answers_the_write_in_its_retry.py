"""Attack: the agent sends the answer to the write's question with the call itself, where
the check does not look.

MCP 2026-07-28 lets a server ask without a request of its own: ``tools/call`` answers
``input_required`` with the question, and the client calls again with its answer in the
call's params (``inputResponses``; ``requestState`` echoes the server's state). The MCP
SDK's server hands those answers to the tool (``ctx.input_responses``) whatever protocol
was negotiated, and its client lets a caller send them with its first call. The guard
checked the call's ``arguments`` and forwarded the rest of its params as they were. So
the agent asked to refund 5 on an order of 20 (allowed by "a refund is at most the
order's total") with ``inputResponses`` confirming 400, and the shop, which takes an
answer that came with the call before asking over ``elicitation/create``, refunded 400:
the ledger said 5 was checked and ran. The answer to a question asked over
``elicitation/create`` is checked as part of the write
(test_agent_corrects_the_write_after_its_check.py); this one went around it.

The guard speaks the handshake protocol (2025-11-25) to the agent, in which a call
carries no answers: a ``tools/call`` with ``inputResponses`` or ``requestState`` is now
refused as the call's shape, never forwarded. Questions still go over
``elicitation/create``, where their answers are checked.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequestParams, ElicitResult

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered
from tests.security.shop_rules import AT_MOST_THE_TOTAL, REFUND_READS_THE_ORDER, server_command

pytestmark = pytest.mark.anyio

RETRYING_SHOP = server_command("retrying_shop")


class Agent:
    """Answers each question it is asked over ``elicitation/create`` with ``amount``."""

    def __init__(self, amount: float) -> None:
        self.amount = amount
        self.asked: list[str] = []

    async def elicit(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(str(getattr(params, "message", "")))
        return ElicitResult(action="accept", content={"amount": self.amount})


def refunds(ws: Workspace) -> list[dict[str, Any]]:
    return [c["arguments"] for c in ws.calls() if c["tool"] == "refund_create"]


def checked_amounts(ws: Workspace) -> list[Any]:
    return [r["arguments"].get("amount") for r in ws.records("check")]


async def refund(shop: Client, **more: Any) -> str:
    """What the agent is told of a refund of 5 on order 1187 (``more``: the call's other
    params)."""
    try:
        result = await shop.call_tool("refund_create", {"order": "1187", "amount": 5}, **more)
    except MCPError as exc:
        return exc.message
    return text(result) if result.is_error else "the refund ran"


async def test_an_answer_sent_with_the_call_is_refused(workspace: Workspace) -> None:
    ws = workspace
    agent = Agent(5)
    confirmed_400 = {"confirm": ElicitResult(action="accept", content={"amount": 400})}
    async with Client(ws.guard("shop", RETRYING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        said = await refund(shop, input_responses=confirmed_400)
    assert refunds(ws) == [], f"refunded what the agent sent with the call: {refunds(ws)}"
    assert "inputResponses" in said and "not sent to the server" in said, said
    assert checked_amounts(ws) == []  # refused before any check: nothing ran unchecked
    assert agent.asked == []


async def test_server_state_sent_with_the_call_is_refused(workspace: Workspace) -> None:
    """``requestState`` carries the answers of earlier rounds to the server, out of the
    check's sight too."""
    ws = workspace
    agent = Agent(5)
    async with Client(ws.guard("shop", RETRYING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_create")
        said = await refund(shop, request_state="v1.state-of-an-earlier-round")
    assert refunds(ws) == []
    assert "requestState" in said and "not sent to the server" in said, said


async def test_a_question_asked_over_elicitation_is_still_checked(workspace: Workspace) -> None:
    """The same shop asks over ``elicitation/create`` when no answer came with the call:
    that answer is checked as part of the write, as before."""
    ws = workspace
    agent = Agent(400)
    async with Client(ws.guard("shop", RETRYING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        stopped = await refund(shop)
        agent.amount = 15
        corrected = await refund(shop)
    assert len(agent.asked) == 2, agent.asked
    assert "at-most-the-total" in stopped, stopped
    assert corrected == "the refund ran", corrected
    assert refunds(ws) == [{"order": "1187", "amount": 15}]
    assert checked_amounts(ws) == [5, 400, 5, 15]
