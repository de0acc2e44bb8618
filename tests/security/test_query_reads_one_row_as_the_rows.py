"""Attack: a history of one row, sent as one text block, is read as the rows of that
row's own list.

A list tool with unstructured output (``structured_output=False`` in the MCP SDK, and
SDKs before structured output) sends one text block per row. The guard reads several
blocks as the list of their values, but one block as that value: for one row, the row's
object. ``rows_of`` then takes "the only member that is a list" of that object as the
rows: the refund's ``lines``. Filtered on ``customer == "C-7"``, no line matched, and "a
customer's second refund is made by a person" counted 0: C-7's second refund ran.

Now the guard knows how the value came (``records.rows_of``): one text block holding an
object with none of the row keys (``result``, ``items``, ``rows``...) whose only list has
members beside it that say nothing of pages, totals or errors may be a single row, and is
a failed read, not a count of the wrong list: the write is blocked. A wrapper in one block
(``{"refunds": [...], "next_cursor": null}``) and structured content are read as before.
"""

from __future__ import annotations

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import tools_called, wait_registered
from tests.security.shop_rules import REFUNDS_COUNTED, server_command

pytestmark = pytest.mark.anyio

ROW_BLOCKS = server_command("row_blocks_shop")
SECOND_REFUND = {
    "id": "second-refund",
    "app": "shop",
    "tools": ["refund_create"],
    "when": "refunds_before >= 1",
    "response": "stop",
    "message": "A customer's second refund is made by a person.",
}


async def test_one_row_in_one_block_is_counted_as_one_row(workspace: Workspace) -> None:
    ws = workspace
    async with Client(ws.guard("shop", ROW_BLOCKS)) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[SECOND_REFUND], mappings=[REFUNDS_COUNTED])
        await agent.call_tool("refund_create", {"order": "1187", "amount": 50, "customer": "C-7"})
    assert "refund_create" not in tools_called(ws), "C-7's second refund ran on a count of 0"
