"""THREATS.md §1: "a rule that cannot be decided for lack of a fact answers on_unknown".

The attack: a query lookup counts the customer's refunds (``where: {customer:
$customer}``) and a rule stops a third refund (``refunds >= 2``). ``refund_create`` takes
the customer optionally and finds it from the order when it is left out. The agent leaves
it out: Claros asked the guard to count the refunds whose customer is null, the guard
counted 0, and the rule, decided on that 0, let the refund through. A query whose
``where`` names a value the facts do not have is not run now: its value is unknown (null),
and the rule answers by its ``on_unknown`` (by default, it fires).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered

REFUNDS = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "refunds_server.py")]

COUNT_REFUNDS = {
    "app": "shop",
    "tool": "refund_create",
    "queries": [{"tool": "refund_list", "arguments": {"customer": "$customer"},
                 "where": {"customer": "$customer"}, "op": "count", "var": "refunds"}],
}  # fmt: skip
THIRD_REFUND = {
    "id": "third-refund",
    "app": "shop",
    "tools": ["refund_create"],
    "response": "stop",
    "when": "refunds >= 2",
    "message": "A customer's third refund goes to a person",
}


@pytest.mark.anyio
async def test_leaving_out_the_customer_does_not_count_as_no_refunds(
    workspace: Workspace,
) -> None:
    ws = workspace
    async with Client(ws.guard("shop", REFUNDS)) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[THIRD_REFUND], mappings=[COUNT_REFUNDS])
        named = await agent.call_tool("refund_create", {"order": "O-1", "amount": 5,
                                                        "customer": "C-7"})  # fmt: skip
        assert named.is_error and "third-refund" in text(named), text(named)
        unnamed = await agent.call_tool("refund_create", {"order": "O-1", "amount": 5})
    refunded = [c for c in ws.calls() if c["tool"] == "refund_create"]
    assert refunded == [], f"refunded on a count of nothing: {refunded}"
    assert unnamed.is_error and "third-refund" in text(unnamed), text(unnamed)
    assert tools_called(ws) == ["refund_list"]  # nothing to count without a customer
    stopped = ws.records("check")[-1]
    assert stopped["result"] == "stop" and stopped["rules"][0]["unknown"] == ["refunds"]
    assert (stopped.get("vars") or {}).get("refunds") is None
