"""Attack: give the argument a history check filters on as empty text, and the history is
empty.

tests/security/test_query_on_a_missing_argument_counts_nothing.py closed leaving
``customer`` out (or null): a ``$path`` that names nothing is a fact Claros does not have.
The agent writes ``customer: ""`` instead. The shop reads ``""`` as "no customer" (``customer
or the order's``, as Python apps do) and refunds order 1187's customer, C-7; the query,
read with ``customer: ""`` and filtered by the guard on ``customer == ""``, counted no
rows, and "a customer's third refund is made by a person" let C-7's third refund through.

Empty text (or only spaces) names nothing either: the query is not run, its value is
unknown, and the rule answers by its ``on_unknown`` (by default it fires). A fetch whose
``$path`` is empty text is refused as one on a missing argument is.
"""

from __future__ import annotations

import httpx
import pytest
from mcp import Client

from tests.api.conftest import Keys, bearer, check_body, put_rule
from tests.api.test_fetching_facts import apps, put_mapping  # noqa: F401 - apps: a fixture
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.security.shop_rules import REFUNDS_COUNTED, THIRD_REFUND
from tests.security.test_empty_record_lets_the_agent_state_the_facts import (
    FETCH_INVOICE,
    STOP_OVER_500,
)
from tests.security.test_query_on_a_missing_argument_counts_nothing import HISTORY_SHOP


@pytest.mark.anyio
@pytest.mark.parametrize("customer", ["", "  "], ids=["empty", "spaces"])
async def test_an_empty_filtered_argument_does_not_empty_the_history(
    workspace: Workspace, customer: str
) -> None:
    ws = workspace
    params = ws.guard("shop", HISTORY_SHOP, "--read", "refund_list", "--write", "refund_create")
    async with Client(params) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[THIRD_REFUND], mappings=[REFUNDS_COUNTED])
        emptied = await agent.call_tool(
            "refund_create", {"order": "1187", "amount": 50, "customer": customer}
        )
    assert "refund_create" not in tools_called(ws), "C-7's third refund ran on an empty history"
    assert emptied.is_error and "third-refund" in text(emptied), text(emptied)
    [check] = ws.records("check")
    rule = check["rules"][0]
    assert rule["unknown"] == ["refunds_before"] and rule["on_unknown"] == "fire"


@pytest.mark.usefixtures("apps")  # the apps' read tools registered
def test_claros_refuses_a_fetch_on_an_empty_argument(http: httpx.Client, keys: Keys) -> None:
    assert put_mapping(http, keys.admin, FETCH_INVOICE).status_code == 200
    put_rule(http, keys.admin, **STOP_OVER_500)
    body = check_body(tool="invoice_submit", app="accounting", arguments={"name": " "})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 400, answer.text
    assert "the call has no name" in answer.json()["message"], answer.text
