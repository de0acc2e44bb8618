"""An accounting MCP server (the SDK's high-level ``MCPServer``) whose invoices the agent
can edit before it submits them: ``invoice_read`` (a read), ``invoice_update`` and
``invoice_submit`` (writes). Invoices live in memory for the life of the process. Every
tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("editable-invoices")

INVOICES: dict[str, dict[str, Any]] = {
    "INV-1": {"name": "INV-1", "supplier": "Acme Paper", "grand_total": 600, "status": "Draft"},
}


_log = call_logger("accounting")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def invoice_read(name: str) -> dict[str, Any]:
    """Read an invoice."""
    _log("invoice_read", {"name": name})
    return dict(INVOICES[name])


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def invoice_update(name: str, grand_total: int) -> dict[str, Any]:
    """Change a draft invoice's total."""
    _log("invoice_update", {"name": name, "grand_total": grand_total})
    INVOICES[name]["grand_total"] = grand_total
    return dict(INVOICES[name])


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def invoice_submit(name: str) -> dict[str, Any]:
    """Submit an invoice for payment, at the total it has now."""
    _log("invoice_submit", {"name": name, "grand_total": INVOICES[name]["grand_total"]})
    INVOICES[name]["status"] = "Submitted"
    return dict(INVOICES[name])


if __name__ == "__main__":
    server.run()
