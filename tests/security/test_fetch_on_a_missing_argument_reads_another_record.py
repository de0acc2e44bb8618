"""Attack: leave out the argument the fetch names the record by, and the facts come from
another record.

A mapping fetches the invoice ``invoice_submit`` names (``{"name": "$name"}``) and a rule
stops invoices over 500. The write also finds an invoice by ``id``; the read, given no
name, answers the newest draft. The agent submits ``{"id": "INV-9"}`` (90,000): the guard
read ``invoice_read`` with ``name: null``, took the draft (12) as the record, the rule saw
12, and INV-9 was submitted. A fetch whose ``$path`` names nothing (missing or null)
cannot read the call's record: Claros refuses the check (a missing read blocks the write,
fetching-facts.txt), as it does a read that finds nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.api.conftest import Keys, bearer, check_body, put_rule
from tests.api.test_fetching_facts import apps, put_mapping  # noqa: F401 - apps: a fixture
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.security.test_empty_record_lets_the_agent_state_the_facts import (
    FETCH_INVOICE,
    STOP_OVER_500,
)

SERVERS = Path(__file__).resolve().parent / "servers"
TWO_KEYS = [sys.executable, str(SERVERS / "two_keys_invoices.py")]


@pytest.mark.anyio
async def test_a_fetch_without_its_argument_reads_nothing(workspace: Workspace) -> None:
    ws = workspace
    async with Client(ws.guard("accounting", TWO_KEYS)) as agent:
        await wait_registered(ws, "accounting", "invoice_submit")
        ws.push(rules=[STOP_OVER_500], mappings=[FETCH_INVOICE])
        sneaky = await agent.call_tool("invoice_submit", {"id": "INV-9"})
        submitted = [c for c in ws.calls() if c["tool"] == "invoice_submit"]
        assert submitted == [], f"submitted on another record's facts: {submitted}"
        assert sneaky.is_error and "name" in text(sneaky), text(sneaky)
        plain = await agent.call_tool("invoice_submit", {"name": "INV-9"})
    assert plain.is_error and "big-invoice" in text(plain), text(plain)
    assert tools_called(ws) == ["invoice_read"]  # the named one only
    assert [r["result"] for r in ws.records("check")] == ["stop"]


@pytest.mark.usefixtures("apps")  # the apps' read tools registered
@pytest.mark.parametrize("name", [None, "absent"], ids=["null", "missing"])
def test_claros_refuses_a_fetch_on_a_path_naming_nothing(
    http: httpx.Client, keys: Keys, name: str | None
) -> None:
    """The server's side, for any guard: no need is asked, nothing is logged; a 400 that
    names the argument."""
    assert put_mapping(http, keys.admin, FETCH_INVOICE).status_code == 200
    put_rule(http, keys.admin, **STOP_OVER_500)
    arguments = {"id": "INV-9"} if name == "absent" else {"id": "INV-9", "name": None}
    body = check_body(tool="invoice_submit", app="accounting", arguments=arguments)
    first = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert first.status_code == 400, first.text
    assert "name" in first.json()["message"] and "fetch" in first.json()["message"], first.text
    answered = http.post(
        "/v1/check",
        json={**body, "fetched": {"fetch": {"name": "INV-10", "grand_total": 12}}},
        headers=bearer(keys.agent),
    )
    assert answered.status_code == 400, answered.text


@pytest.mark.anyio
@pytest.mark.parametrize(
    "arguments", [{"id": "INV-9"}, {"id": "INV-9", "name": " "}, {"id": "INV-9", "name": {}}],
    ids=["missing", "blank", "object"],
)  # fmt: skip
async def test_a_read_ahead_without_its_argument_runs_no_read(
    workspace: Workspace, arguments: dict[str, object]
) -> None:
    """The guard reads a tool's record ahead once it learnt the fetch (stop 30's note): a
    later call without the argument ran ``invoice_read`` with ``name: null`` (the newest
    draft) before Claros refused the check. Claros never used that record, but a read the
    mapping cannot mean is not run: the guard sends the check without it, as Claros would
    refuse the read it names."""
    ws = workspace
    async with Client(ws.guard("accounting", TWO_KEYS)) as agent:
        await wait_registered(ws, "accounting", "invoice_submit")
        ws.push(rules=[STOP_OVER_500], mappings=[FETCH_INVOICE])
        small = await agent.call_tool("invoice_submit", {"name": "INV-10"})
        assert not small.is_error, text(small)
        sneaky = await agent.call_tool("invoice_submit", arguments)
    assert sneaky.is_error and "name" in text(sneaky), text(sneaky)
    assert tools_called(ws) == ["invoice_read", "invoice_submit"], ws.calls()
