"""Attack: the write's question asks for the value under a name of its own, and the agent
answers it with a value no rule reads.

The guard checks the answer to a question a checked write asks as part of that write: its
fields over the call's arguments of the same name
(tests/security/test_agent_corrects_the_write_after_its_check.py). A field that is not
an argument was added as a new one. Here the shop's refund asks for the amount as
``refund_amount`` and refunds that: the rule "a refund is at most the order's total"
reads ``amount``, which stayed 5, so the answer's check allowed it, and the shop
refunded 400 on an order of 20.

Now an answer field that is neither an argument of the call nor one the tool's input
schema lists is given to the server only when it is a yes or no (``confirm: true``,
which carries no value a write could use in place of an argument), or when no enforced
rule with a ``when`` applies to the tool (such a rule reads facts by name; the judge sees
every field). Otherwise the answer is withheld, with the field and the rule named.
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

CONFIRMING_SHOP = server_command("confirming_shop")


class Agent:
    """Answers each question with ``content``."""

    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content
        self.asked = 0

    async def elicit(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked += 1
        return ElicitResult(action="accept", content=self.content)


def refunded(ws: Workspace, tool: str) -> list[dict[str, Any]]:
    return [c["arguments"] for c in ws.calls() if c["tool"] == tool]


async def _refund(ws: Workspace, tool: str, agent: Agent, *, rules: bool) -> str:
    async with Client(ws.guard("shop", CONFIRMING_SHOP), elicitation_callback=agent.elicit) as shop:
        await wait_registered(ws, "shop", tool)
        if rules:
            rule = {**AT_MOST_THE_TOTAL, "tools": [tool]}
            ws.push(rules=[rule], mappings=[{**REFUND_READS_THE_ORDER, "tool": tool}])
        try:
            result = await shop.call_tool(tool, {"order": "1187", "amount": 5})
        except MCPError as exc:  # this shop lets the error of its question end the call
            return exc.message
        return text(result) if result.is_error else "the refund ran"


async def test_an_answer_under_a_name_no_rule_reads_is_withheld(workspace: Workspace) -> None:
    ws = workspace
    agent = Agent({"refund_amount": 400})
    said = await _refund(ws, "refund_corrected", agent, rules=True)
    refunds = refunded(ws, "refund_corrected")
    assert refunds == [], f"refunded the answer's refund_amount, which no rule read: {refunds}"
    assert agent.asked == 1
    assert "refund_amount" in said and "at-most-the-total" in said, said
    # Withheld before any check of it: the write's own check is the only one.
    assert [r["arguments"] for r in ws.records("check")] == [{"order": "1187", "amount": 5}]


async def test_a_yes_or_no_answer_still_confirms_the_write(workspace: Workspace) -> None:
    ws = workspace
    said = await _refund(ws, "refund_confirmed", Agent({"confirm": True}), rules=True)
    assert said == "the refund ran"
    assert refunded(ws, "refund_confirmed") == [{"order": "1187", "amount": 5}]


async def test_with_no_rule_reading_by_name_the_answer_goes_as_before(
    workspace: Workspace,
) -> None:
    ws = workspace
    said = await _refund(ws, "refund_corrected", Agent({"refund_amount": 15}), rules=False)
    assert said == "the refund ran"
    assert refunded(ws, "refund_corrected") == [{"order": "1187", "amount": 15}]
