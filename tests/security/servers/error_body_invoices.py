"""An accounting MCP server (the SDK's high-level ``MCPServer``) whose read tool reports a
name it does not know in its answer's body, as hand-written tools and REST APIs wrapped
as tools do, not as a tool error: ``invoice_read`` (a read) matches the name exactly and
answers ``$NOT_FOUND_BODY`` (JSON; ``{"error": "..."}`` by default) when it finds nothing;
``invoice_submit`` (a write) finds the invoice in any case and ignores arguments it does
not know. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

import json
import os
from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("error-body-invoices")

INVOICES: dict[str, dict[str, Any]] = {
    "INV-9": {"name": "INV-9", "supplier": "Acme Paper", "grand_total": 90000},
}

_log = call_logger("accounting")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def invoice_read(name: str) -> dict[str, Any]:
    """Read an invoice (a body saying it was not found when there is none by that name)."""
    _log("invoice_read", {"name": name})
    if name in INVOICES:
        return dict(INVOICES[name])
    body = os.environ.get("NOT_FOUND_BODY") or json.dumps({"error": f"no invoice {name}"})
    found: dict[str, Any] = json.loads(body)
    return found


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def invoice_submit(name: str) -> dict[str, Any]:
    """Submit an invoice (its name in any case)."""
    found = next(v for k, v in INVOICES.items() if k.casefold() == name.casefold())
    _log("invoice_submit", {"name": found["name"], "grand_total": found["grand_total"]})
    return {"name": found["name"], "status": "Submitted"}


if __name__ == "__main__":
    server.run()
