"""An accounting MCP server (the SDK's high-level ``MCPServer``) whose write finds an
invoice by ``name`` or by ``id``, and whose read, given no name, answers the newest draft,
as list-like read tools often do. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("two-keys-invoices")

INVOICES: dict[str, dict[str, Any]] = {
    "INV-9": {"name": "INV-9", "supplier": "Acme Paper", "grand_total": 90000},
    "INV-10": {"name": "INV-10", "supplier": "Acme Paper", "grand_total": 12, "draft": True},
}


_log = call_logger("accounting")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def invoice_read(name: str | None = None) -> dict[str, Any]:
    """Read an invoice by name; with no name, the newest draft."""
    _log("invoice_read", {"name": name})
    if name is None:
        return dict(next(v for v in reversed(INVOICES.values()) if v.get("draft")))
    return dict(INVOICES[name])


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def invoice_submit(name: str | None = None, id: str | None = None) -> dict[str, Any]:  # noqa: A002
    """Submit an invoice, named by its name or its id (the same thing here)."""
    found = INVOICES[name or id or ""]
    _log("invoice_submit", {"name": found["name"], "grand_total": found["grand_total"]})
    return {"name": found["name"], "status": "Submitted"}


if __name__ == "__main__":
    server.run()
