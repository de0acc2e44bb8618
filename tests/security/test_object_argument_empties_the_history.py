"""Attack: give the argument a history check filters on as an object, and the history is
empty.

A query counts the customer's refunds (``where: {customer: $customer}``) and "a customer's
third refund is made by a person". The shop keeps its data in a document store and takes
a customer as its id, as the object that holds it (``{"id": "C-7"}``) or as a filter
(``{"$ne": null}``); the refund goes to the customer it matches, C-7. The query was read
with that object and the guard compared each row's ``"C-7"`` with the object whole (stop
31 made it a value, not the guard's operators): no row matched, the count was 0, and
C-7's third refund ran. (With ``{"$ne": null}`` the shop's list even answered every
customer's refunds, and still none matched.)

What an app makes of an object where one value is meant (an id, a wrapper, operators)
the guard cannot know. So a ``$path`` of a query that names an object is a fact Claros
does not have, as one naming nothing is: the query is not run, its value is unknown and
the rule answers by its ``on_unknown`` (by default it fires). A fetch read by such a path
is refused (400), as one on a missing argument is. A lookup's key already was (a key
value that is an object is not read).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from claros.local import LocalServer
from claros.mapping import service as mapping_service
from claros.mapping.tools import MAPPINGS
from claros.store.base import DocWrite
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule
from tests.api.fake_guard import FakeApp
from tests.api.test_fetching_facts import apps, put_mapping  # noqa: F401 - apps: a fixture
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.security.shop_rules import REFUNDS_COUNTED, THIRD_REFUND
from tests.security.test_empty_record_lets_the_agent_state_the_facts import (
    FETCH_INVOICE,
    STOP_OVER_500,
)

DOCUMENT_SHOP = [
    sys.executable,
    str(Path(__file__).resolve().parent / "servers" / "document_shop.py"),
]


def refunded(ws: Workspace) -> list[Any]:
    return [c["arguments"]["customer"] for c in ws.calls() if c["tool"] == "refund_create"]


@pytest.mark.anyio
@pytest.mark.parametrize("customer", [{"id": "C-7"}, {"$ne": None}], ids=["wrapped-id", "operator"])
async def test_an_object_filtered_argument_does_not_empty_the_history(
    workspace: Workspace, customer: dict[str, Any]
) -> None:
    ws = workspace
    async with Client(ws.guard("shop", DOCUMENT_SHOP)) as agent:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[THIRD_REFUND], mappings=[REFUNDS_COUNTED])
        named = await agent.call_tool(
            "refund_create", {"order": "1187", "amount": 50, "customer": "C-7"}
        )
        assert named.is_error and "third-refund" in text(named), text(named)
        sneaky = await agent.call_tool(
            "refund_create", {"order": "1187", "amount": 50, "customer": customer}
        )
    assert refunded(ws) == [], f"C-7's third refund ran on an empty history: {refunded(ws)}"
    assert sneaky.is_error and "third-refund" in text(sneaky), text(sneaky)
    assert tools_called(ws) == ["refund_list"]  # the plain id's only
    rule = ws.records("check")[1]["rules"][0]
    assert rule["unknown"] == ["refunds_before"] and rule["on_unknown"] == "fire"


@pytest.mark.usefixtures("apps")  # the apps' read tools registered
def test_claros_refuses_a_fetch_on_an_object_argument(http: httpx.Client, keys: Keys) -> None:
    assert put_mapping(http, keys.admin, FETCH_INVOICE).status_code == 200
    put_rule(http, keys.admin, **STOP_OVER_500)
    body = check_body(tool="invoice_submit", app="accounting", arguments={"name": {"$ne": None}})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 400, answer.text
    assert "name" in answer.json()["message"] and "object" in answer.json()["message"], answer.text


@pytest.mark.usefixtures("apps")  # the apps' read tools registered
@pytest.mark.parametrize("key", ["customer ", "$customer", "customer..id", "", "lines[]"])
def test_a_where_key_that_is_no_path_is_not_saved(http: httpx.Client, keys: Keys, key: str) -> None:
    """A ``where`` key is a path into each row; one that is not (a trailing space, a
    ``$path``, an empty step) matched no row, so the count was 0 on every call and a rule
    over it never fired: it was saved without a word."""
    query = {"tool": "refund_list", "arguments": {}, "where": {key: "$customer"},
             "op": "count", "var": "refunds_before"}  # fmt: skip
    mapping = {"app": "shop", "tool": "refund_create", "queries": [query]}
    answer = put_mapping(http, keys.admin, mapping)
    assert answer.status_code == 400, answer.text
    assert f"where key {key!r} is not a field path" in answer.text, answer.text


@pytest.mark.usefixtures("apps")
def test_claros_mappings_push_says_which_where_key(
    server: LocalServer, keys: Keys, tmp_path: Path
) -> None:
    query = {"tool": "refund_list", "arguments": {}, "where": {"customer ": "$customer"},
             "op": "count", "var": "refunds_before"}  # fmt: skip
    path = tmp_path / "mappings.json"
    path.write_text(json.dumps([{"app": "shop", "tool": "refund_create", "queries": [query]}]))
    env = {**os.environ, "CLAROS_URL": server.url, "CLAROS_KEY": keys.admin}
    done = subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "mappings", "push", str(path)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "where key 'customer ' is not a field path" in done.stderr + done.stdout, done


def test_a_mapping_saved_before_the_where_key_check_still_reads(
    http: httpx.Client,
    keys: Keys,
    services: Services,
    apps: dict[str, FakeApp],  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mapping saved by an earlier version with such a key is read as it was saved: had
    the check made it unreadable, every registration of the workspace's tools (which
    re-validates its mappings) and every check of the tool would fail."""
    # The doc is rewritten below under its hash, which keys the process's validated
    # mappings (claros.mapping.service._SPECS): had the old "customer " spec been kept
    # there, it answered for the same mapping saved by a later test in this process
    # (test_fetching_facts' object test counted no refunds and allowed). A spec is kept
    # only under its own text's hash now; the test still starts from an empty cache.
    monkeypatch.setattr(mapping_service, "_SPECS", {})
    query = {"tool": "refund_list", "arguments": {}, "where": {"customer": "$customer"},
             "op": "count", "var": "refunds_before"}  # fmt: skip
    mapping = {"app": "shop", "tool": "refund_create", "queries": [query]}
    assert put_mapping(http, keys.admin, mapping).status_code == 200
    [doc] = services.store.query_docs(WORKSPACE, MAPPINGS, limit=10)
    old = {**mapping, "queries": [{**query, "where": {"customer ": "$customer"}}]}
    services.store.write_docs([DocWrite(WORKSPACE, MAPPINGS, doc.key,
                                        {**doc.value, "mapping": old}, doc.rev)])  # fmt: skip
    apps["shop"].register(http, keys.agent)  # re-validates the saved mappings
    body = check_body(arguments={"order": "1187", "amount": 5, "customer": "C-7"})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 200 and answer.json()["result"] == "need", answer.text
    # The rewritten doc's spec was not kept under the hash of the text it no longer has.
    assert doc.value["hash"] not in mapping_service._SPECS
