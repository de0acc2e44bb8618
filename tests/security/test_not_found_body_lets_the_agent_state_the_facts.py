"""Attack: the read answers "not found" in its body, and the agent states the facts.

tests/security/test_empty_record_lets_the_agent_state_the_facts.py closed a read that
answers ``{}`` for a record it does not find. Many read tools say so in words instead,
not as a tool error (``isError`` false): ``{"error": "no invoice inv-9"}`` from a
hand-written tool, ``{"detail": "Not found."}`` from a REST API wrapped as a tool,
``{"found": false}``. Merged at the top level (``into: ""``), such a body is not the
record, and every fact a rule needs was the agent's own: the agent submits ``inv-9``
(INV-9 is 90,000, found in any case by the write) with ``grand_total: 1``, the rule
"invoices over 500 are submitted by people" saw 1, and the invoice was submitted.

A fetched record that only reports an error (every field one an error report uses:
``error``, ``errors``, ``message``, ``detail``, ``code``, ``status``, ``found``, ``ok``...,
and one that says what went wrong) is a failed read: the write is blocked
(``--fail-open`` forwards it, reported as unchecked).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered

pytestmark = pytest.mark.anyio

INVOICES = [
    sys.executable,
    str(Path(__file__).resolve().parent / "servers" / "error_body_invoices.py"),
]
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


@pytest.mark.parametrize(
    "body",
    [
        {"error": "no invoice inv-9"},
        {"detail": "Not found."},
        {"found": False},
        {"ok": False, "message": "Invoice not found"},
        {"errors": [{"code": "not_found", "message": "no such invoice"}]},
        {"status": 404, "title": "Not Found", "type": "about:blank"},
    ],
)
async def test_a_not_found_body_is_a_failed_read(
    workspace: Workspace, body: dict[str, Any]
) -> None:
    ws = workspace
    guard = ws.guard("accounting", INVOICES, NOT_FOUND_BODY=json.dumps(body))
    async with Client(guard) as agent:
        await wait_registered(ws, "accounting", "invoice_submit")
        ws.push(rules=[STOP_OVER_500], mappings=[FETCH_INVOICE])
        sneaky = await agent.call_tool("invoice_submit", {"name": "inv-9", "grand_total": 1})
        submitted = [c for c in ws.calls() if c["tool"] == "invoice_submit"]
        assert submitted == [], f"submitted on the agent's own facts: {submitted}"
        assert sneaky.is_error, text(sneaky)
        assert "reports an error, not a record" in text(sneaky), text(sneaky)
        plain = await agent.call_tool("invoice_submit", {"name": "INV-9"})
    assert plain.is_error and "big-invoice" in text(plain), text(plain)
    assert tools_called(ws) == ["invoice_read", "invoice_read"]
    assert [r["result"] for r in ws.records("check")] == ["stop"]
