"""Attack: make the history read answer with errors, and count them as the history.

A list tool that wraps an API may pass on its error answer, not as a tool error: a
GraphQL-style ``{"data": null, "errors": [{"message": "no customer c-7"}]}``. The guard
took rows from "the only member that is a list": the errors. Filtered on ``customer ==
"C-7"``, none matched, and "a customer's third refund is made by a person" counted 0:
the third refund ran. An answer that reports an error (a non-empty ``error`` or
``errors``) holds no rows: the read fails and the write is blocked (``--fail-open``
forwards it, reported as unchecked).
"""

from __future__ import annotations

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.security.shop_rules import REFUNDS_COUNTED, THIRD_REFUND
from tests.security.test_query_counts_one_page_of_the_history import PAGED_SHOP, THIRD

pytestmark = pytest.mark.anyio


async def test_the_errors_of_a_list_are_not_its_rows(workspace: Workspace) -> None:
    ws = workspace
    async with Client(ws.guard("shop", PAGED_SHOP, PAGED_SHOP_MORE="errors")) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[THIRD_REFUND], mappings=[REFUNDS_COUNTED])
        third = await agent.call_tool("refund_create", THIRD)
    assert "refund_create" not in tools_called(ws), "the third refund ran on a count of errors"
    assert third.is_error, text(third)
    said = text(third)
    assert "refund_list" in said and "reports an error" in said and "no customer" in said, said
    assert ws.records("check") == []
