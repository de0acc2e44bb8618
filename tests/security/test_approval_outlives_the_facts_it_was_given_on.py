"""THREATS.md §1: an approval covers the call a person was asked about, on the facts the
rules asked on, not whatever the record says by the time the agent uses it.

The attack: a rule asks before an invoice over 500 is submitted; the guard reads the
invoice (fetch) and the person sees a 600 invoice and approves. The agent then raises the
invoice to 600,000 with another write that no rule stops, and calls ``invoice_submit``
again with the same arguments. The approval was bound only to app, tool and arguments
(and the rule versions), all unchanged, so the 600,000 invoice went out under the
approval given for 600. An approval lasts 15 minutes by default: far beyond the read-to-
write window fetching-facts.txt accepts ("the record is read just before the write").
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered

SERVERS = Path(__file__).resolve().parent / "servers"
EDITABLE = [sys.executable, str(SERVERS / "editable_invoices.py")]

SUBMIT_OVER_500 = {
    "id": "big-invoice",
    "app": "accounting",
    "tools": ["invoice_submit"],
    "response": "ask",
    "when": "grand_total > 500",
    "message": "Invoices over 500 need an admin's approval",
}
FETCH_INVOICE = {
    "app": "accounting",
    "tool": "invoice_submit",
    "fetch": {"tool": "invoice_read", "arguments": {"name": "$name"}, "into": ""},
}


def _approve(ws: Workspace, ask_id: str) -> None:
    with ws.http() as http:
        answer = http.post(
            f"/api/asks/{ask_id}/answer",
            json={"decision": "approve"},
            headers={"Authorization": f"Bearer {ws.admin}"},
        )
    assert answer.status_code == 200, answer.text


def _asked(ws: Workspace) -> list[str]:
    return [str(row["ask_id"]) for row in ws.records("check") if row.get("ask_id")]


@pytest.mark.anyio
async def test_approval_for_a_600_invoice_does_not_submit_it_at_600000(
    workspace: Workspace,
) -> None:
    ws = workspace
    params = ws.guard("accounting", EDITABLE, "--ask-wait", "0")
    async with Client(params) as agent:
        await wait_registered(ws, "accounting", "invoice_submit")
        ws.push(rules=[SUBMIT_OVER_500], mappings=[FETCH_INVOICE])
        first = await agent.call_tool("invoice_submit", {"name": "INV-1"})
        assert first.is_error and "Waiting for approval" in text(first), text(first)
        [ask_id] = _asked(ws)
        [asked] = [row for row in ws.records("check") if row.get("ask_id")]
        assert asked["fetched"]["fetch"]["grand_total"] == 600  # what the person was shown
        _approve(ws, ask_id)

        raised = await agent.call_tool("invoice_update", {"name": "INV-1", "grand_total": 600000})
        assert not raised.is_error, text(raised)

        again = await agent.call_tool("invoice_submit", {"name": "INV-1"})
        submitted = [c for c in ws.calls() if c["tool"] == "invoice_submit"]
        assert submitted == [], f"submitted under the approval for 600: {submitted}"
        assert again.is_error, text(again)
        assert "other facts" in text(again), text(again)

        # Asked again, the person sees the invoice as it is now; approved, it runs.
        third = await agent.call_tool("invoice_submit", {"name": "INV-1"})
        assert third.is_error and "Waiting for approval" in text(third), text(third)
        asks = _asked(ws)
        assert len(asks) == 2
        [reasked] = [r for r in ws.records("check") if r.get("ask_id") == asks[1]]
        assert reasked["fetched"]["fetch"]["grand_total"] == 600000
        _approve(ws, asks[1])
        with anyio.fail_after(20):
            done = await agent.call_tool("invoice_submit", {"name": "INV-1"})
    assert not done.is_error, text(done)
    assert tools_called(ws) == [
        "invoice_read",
        "invoice_update",
        "invoice_read",
        "invoice_read",
        "invoice_read",
        "invoice_submit",
    ]
    assert [c for c in ws.calls() if c["tool"] == "invoice_submit"][0]["arguments"] == {
        "name": "INV-1",
        "grand_total": 600000,
    }
