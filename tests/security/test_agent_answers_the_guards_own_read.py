"""Attack: answer the question the wrapped server asks during the guard's own read.

fetching-facts.txt: "The guard calls those read tools on the wrapped server itself. The
agent never sees these calls." A read tool may ask its client something while it runs
(``elicitation/create``, ``sampling/createMessage``, ``roots/list``): here, which of
several orders ``1187`` means. The guard relayed every request the server sent to the
agent, its own reads' too. So the agent saw the guard's read and chose the record it
read: order 1187-A (total 500) for the check, where "a refund is at most the order's
total" let a refund of 400 through, then order 1187-B (total 20) when the write asked
the same question. The write refunded 400 on an order of 20.

A request the server sends while the guard runs a read of its own is not the agent's
to answer: the guard refuses it (the read then fails, and a failed read blocks the
write). The agent's own calls are asked as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered
from tests.security.shop_rules import AT_MOST_THE_TOTAL, REFUND_READS_THE_ORDER, server_command

pytestmark = pytest.mark.anyio

ASKING_SHOP = server_command("asking_shop")


class Agent:
    """Answers each question it is asked with the next order of ``picks``."""

    def __init__(self, *picks: str) -> None:
        self.picks = list(picks)
        self.asked: list[str] = []

    async def elicit(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(str(getattr(params, "message", "")))
        return ElicitResult(action="accept", content={"order": self.picks.pop(0)})


def refunds(ws: Workspace) -> list[dict[str, Any]]:
    return [c["arguments"] for c in ws.calls() if c["tool"] == "refund_create"]


async def test_the_agent_cannot_pick_the_record_the_guard_reads(workspace: Workspace) -> None:
    ws = workspace
    agent = Agent("1187-A", "1187-B")
    async with Client(ws.guard("shop", ASKING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        refund = await shop.call_tool("refund_create", {"order": "1187", "amount": 400})
    assert refunds(ws) == [], f"refunded on the record the agent chose: {refunds(ws)}"
    assert agent.asked == [], f"the agent saw the guard's read: {agent.asked}"
    assert refund.is_error, text(refund)
    assert "order_read" in text(refund), text(refund)
    assert ws.records("check") == []


async def test_the_agents_own_calls_are_still_asked(workspace: Workspace) -> None:
    ws = workspace
    agent = Agent("1187-B", "1187-A")
    async with Client(ws.guard("shop", ASKING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        # The agent's read: its question is the agent's.
        read = await shop.call_tool("order_read", {"order": "1187"})
        assert not read.is_error and read.structured_content == {
            "id": "1187-B",
            "customer": "C-7",
            "total": 20,
        }
        # A write on an order the guard's read finds without asking; the write itself
        # asks nothing either.
        small = await shop.call_tool("refund_create", {"order": "1187-A", "amount": 5})
        assert not small.is_error, text(small)
        too_much = await shop.call_tool("refund_create", {"order": "1187-B", "amount": 400})
        assert too_much.is_error and "at-most-the-total" in text(too_much), text(too_much)
    assert len(agent.asked) == 1 and "Several orders match 1187" in agent.asked[0]
    assert refunds(ws) == [{"order": "1187-A", "amount": 5}]
