"""Attack: leave out the argument a history check filters on, and the history is empty.

A query lookup keyed on the call's own argument (``where: {customer: $customer}``) was
sent to the guard with ``null`` for a customer the call does not name: the guard counted
the rows whose customer is null (none), and the rule over that count was decided on 0.
The agent that leaves ``customer`` out (the shop finds it from the order) got a refund
past "a customer's third refund is stopped". A $path that names nothing is a fact Claros
does not have: the query is not run and its value is unknown, so the rule answers by its
``on_unknown`` (by default it fires), as a lookup of a missing key already did
(THREATS.md, 1: "Unknown never silently means allow").
"""

from __future__ import annotations

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.security.shop_rules import REFUNDS_COUNTED, THIRD_REFUND, server_command

pytestmark = pytest.mark.anyio

HISTORY_SHOP = server_command("history_shop")


async def test_leaving_out_the_filtered_argument_does_not_empty_the_history(
    workspace: Workspace,
) -> None:
    ws = workspace
    params = ws.guard("shop", HISTORY_SHOP, "--read", "refund_list", "--write", "refund_create")
    async with Client(params) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[THIRD_REFUND], mappings=[REFUNDS_COUNTED])
        named = await agent.call_tool(
            "refund_create", {"order": "1187", "amount": 50, "customer": "C-7"}
        )
        unnamed = await agent.call_tool("refund_create", {"order": "1187", "amount": 50})
    assert named.is_error and "third-refund" in text(named), text(named)
    # The attack: the same refund without the customer it is filtered on.
    assert unnamed.is_error and "third-refund" in text(unnamed), text(unnamed)
    assert "refund_create" not in tools_called(ws)
    first, second = ws.records("check")
    assert first["vars"] == {"refunds_before": 2}
    rule = second["rules"][0]
    assert rule["unknown"] == ["refunds_before"] and rule["on_unknown"] == "fire"
