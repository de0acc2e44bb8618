"""THREATS.md §1 ("the ability to make reads fail") and fetching-facts.txt ("a failed or
missing read blocks the write"): a read that finds nothing is a missing read, even when
it answers an empty object rather than an error.

The attack: a mapping fetches the invoice ``invoice_submit`` names into the top level
(``into: ""``) and a rule stops invoices over 500. The read tool matches names exactly and
answers ``{}`` for a name it does not know; the write finds the invoice in any case. The
agent submits ``inv-9`` (INV-9 is 90,000) and adds ``grand_total: 1``, which the write
ignores. ``{}`` was taken as the record, so every fact was the agent's own: the rule saw
1, and the 90,000 invoice was submitted. An empty record is now a failed read: the guard
blocks the write (``--fail-open`` would forward it, reported as unchecked), and Claros
refuses ``fetched.fetch: {}`` from any guard.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.api.conftest import Keys, bearer, check_body
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered

LENIENT = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "lenient_invoices.py")]

FETCH_INVOICE = {
    "app": "accounting",
    "tool": "invoice_submit",
    "fetch": {"tool": "invoice_read", "arguments": {"name": "$name"}, "into": ""},
}
STOP_OVER_500 = {
    "id": "big-invoice",
    "app": "accounting",
    "tools": ["invoice_submit"],
    "response": "stop",
    "when": "grand_total > 500",
    "message": "Invoices over 500 are submitted by people",
}


@pytest.mark.anyio
async def test_an_empty_record_is_a_failed_read(workspace: Workspace) -> None:
    ws = workspace
    async with Client(ws.guard("accounting", LENIENT)) as agent:
        await wait_registered(ws, "accounting", "invoice_submit")
        ws.push(rules=[STOP_OVER_500], mappings=[FETCH_INVOICE])
        sneaky = await agent.call_tool("invoice_submit", {"name": "inv-9", "grand_total": 1})
        submitted = [c for c in ws.calls() if c["tool"] == "invoice_submit"]
        assert submitted == [], f"submitted on the agent's own facts: {submitted}"
        assert sneaky.is_error and "empty record" in text(sneaky), text(sneaky)
        plain = await agent.call_tool("invoice_submit", {"name": "INV-9"})
    assert plain.is_error and "big-invoice" in text(plain), text(plain)
    assert tools_called(ws) == ["invoice_read", "invoice_read"]
    assert [r["result"] for r in ws.records("check")] == ["stop"]


def test_claros_refuses_an_empty_fetched_record(http: httpx.Client, keys: Keys) -> None:
    tools = [{"name": "invoice_read", "read": True}, {"name": "invoice_submit", "read": False}]
    registered = http.post(
        "/v1/apps/accounting/tools", json={"tools": tools}, headers=bearer(keys.agent)
    )
    assert registered.status_code == 200, registered.text
    saved = http.put("/api/mappings/accounting/invoice_submit",
                     json={"mapping": FETCH_INVOICE}, headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text
    arguments = {"name": "inv-9", "grand_total": 1}
    body = check_body(
        app="accounting", tool="invoice_submit", arguments=arguments, fetched={"fetch": {}}
    )
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 400, answer.text
    assert "empty record" in answer.json()["message"]
