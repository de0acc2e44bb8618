"""An accounting MCP server (the SDK's high-level ``MCPServer``) whose two tools find an
invoice differently, as happens when a database compares names case-insensitively and a
cache does not: ``invoice_read`` (a read) matches the name exactly and answers ``{}`` when
it finds nothing; ``invoice_submit`` (a write) matches it in any case, and ignores
arguments it does not know. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("lenient-invoices")

INVOICES: dict[str, dict[str, Any]] = {
    "INV-9": {"name": "INV-9", "supplier": "Acme Paper", "grand_total": 90000},
}


_log = call_logger("accounting")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def invoice_read(name: str) -> dict[str, Any]:
    """Read an invoice ({} when there is none by that exact name)."""
    _log("invoice_read", {"name": name})
    return dict(INVOICES.get(name, {}))


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def invoice_submit(name: str) -> dict[str, Any]:
    """Submit an invoice (its name in any case)."""
    found = next(v for k, v in INVOICES.items() if k.casefold() == name.casefold())
    _log("invoice_submit", {"name": found["name"], "grand_total": found["grand_total"]})
    return {"name": found["name"], "status": "Submitted"}


if __name__ == "__main__":
    server.run()
