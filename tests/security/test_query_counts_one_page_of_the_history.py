"""Attack: push the history a rule counts off the first page of the list tool's answer.

A query lookup reads rows and reduces them (fetching-facts.txt); ``where`` is applied by
the guard too, "for servers that ignore their own filters", so the guard must see every
row. A list tool that answers a page at a time (``{"refunds": [...], "next_cursor":
"2"}``, ``"has_more": true``, ``"total_count": 4``) says itself that the rows it gave are not
all of them. The guard took the first page as the whole history: an agent that first
makes a couple of small refunds to another customer (each allowed) pushes customer C-7's
two earlier refunds onto the second page, and "a customer's third refund is stopped" saw
``refunds_before == 0`` and let the third refund through.

A page that says more rows follow is not the history: the read fails and the write is
blocked (``--fail-open`` forwards it and reports it unchecked, as for any failed read).
"""

from __future__ import annotations

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.security.shop_rules import REFUNDS_COUNTED, THIRD_REFUND, server_command

pytestmark = pytest.mark.anyio

PAGED_SHOP = server_command("paged_shop")
THIRD = {"order": "1187", "amount": 50, "customer": "C-7"}


@pytest.mark.parametrize("more", ["next_cursor", "has_more", "total_count"])
async def test_a_page_of_the_history_is_not_the_history(workspace: Workspace, more: str) -> None:
    ws = workspace
    async with Client(ws.guard("shop", PAGED_SHOP, PAGED_SHOP_MORE=more)) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[THIRD_REFUND], mappings=[REFUNDS_COUNTED])
        third = await agent.call_tool("refund_create", THIRD)
    assert "refund_create" not in tools_called(ws), (
        "C-7's third refund ran, decided on one page of the history"
    )
    assert third.is_error, text(third)
    said = text(third)
    assert "refund_list" in said and "more rows" in said, said
    assert ws.records("check") == []  # nothing decided on part of the rows


async def test_the_whole_history_in_one_answer_is_counted(workspace: Workspace) -> None:
    ws = workspace
    guard = ws.guard("shop", PAGED_SHOP, PAGED_SHOP_PAGE="10")  # every row, next_cursor: null
    async with Client(guard) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[THIRD_REFUND], mappings=[REFUNDS_COUNTED])
        third = await agent.call_tool("refund_create", THIRD)
    assert third.is_error and "third-refund" in text(third), text(third)
    assert "refund_create" not in tools_called(ws)
    [check] = ws.records("check")
    assert check["result"] == "stop" and check["vars"] == {"refunds_before": 2}
