"""THREATS.md §1 and fetching-facts.txt: facts a mapping reads from the app come from the
app, not from the agent.

The attack: a mapping fetches the ticket a ``ticket_close`` names into ``ticket``, and a
rule stops closing a ticket nobody approved (``ticket.approved_by == null``). The read
tool leaves out fields that have no value, as many APIs do. The agent adds an argument
``ticket: {"approved_by": "dana@example.com"}`` that ``ticket_close`` ignores (the SDK's
servers ignore arguments they do not know). The record was merged over the agent's
``ticket`` object, so where the record said nothing the agent's word stood: the rule saw
an approval that does not exist, and the unapproved ticket was closed.

With ``into`` naming a field, that field is now the record, whatever the agent sent
there. (With ``into: ""`` the record shares the top level with the call's arguments, and a
field the record leaves out is the call's: docs/rules.md says so.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered

TICKETS = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "tickets_server.py")]

FETCH_TICKET = {
    "app": "helpdesk",
    "tool": "ticket_close",
    "fetch": {"tool": "ticket_read", "arguments": {"ticket_id": "$ticket_id"}, "into": "ticket"},
}
APPROVED_FIRST = {
    "id": "approved-first",
    "app": "helpdesk",
    "tools": ["ticket_close"],
    "response": "stop",
    "when": "ticket.approved_by == null",
    "message": "A ticket is closed once someone approved it",
}


@pytest.mark.anyio
async def test_an_approval_the_agent_writes_into_the_record_is_not_believed(
    workspace: Workspace,
) -> None:
    ws = workspace
    async with Client(ws.guard("helpdesk", TICKETS)) as agent:
        await wait_registered(ws, "helpdesk", "ticket_close")
        ws.push(rules=[APPROVED_FIRST], mappings=[FETCH_TICKET])
        forged = await agent.call_tool(
            "ticket_close",
            {"ticket_id": "T-1", "ticket": {"approved_by": "dana@example.com"}},
        )
        closed = [c for c in ws.calls() if c["tool"] == "ticket_close"]
        assert closed == [], f"an unapproved ticket was closed: {closed}"
        assert forged.is_error and "approved-first" in text(forged), text(forged)
        # A ticket someone did approve closes.
        fine = await agent.call_tool("ticket_close", {"ticket_id": "T-2"})
    assert not fine.is_error, text(fine)
    assert tools_called(ws) == ["ticket_read", "ticket_read", "ticket_close"]
    [stopped, allowed] = ws.records("check")
    assert stopped["result"] == "stop" and allowed["result"] == "allow"
