"""A shop MCP server whose ``refund_list`` (a read) returns its rows unstructured
(``structured_output=False``): the SDK sends one text block per row, and for a single row
one block holding that row's object. ``refund_create`` is a write. Every tool call is
appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("row-blocks-shop")

REFUNDS = [
    {"id": "R-1", "customer": "C-7", "amount": 10, "lines": [{"sku": "P-1", "qty": 1}]},
    {"id": "R-2", "customer": "C-9", "amount": 5, "lines": [{"sku": "P-1", "qty": 2}]},
]

_log = call_logger("shop")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True), structured_output=False)
def refund_list(customer: str) -> list[dict[str, Any]]:
    """The customer's refunds, one content block each."""
    _log("refund_list", {"customer": customer})
    return [r for r in REFUNDS if r["customer"] == customer]


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def refund_create(order: str, amount: float, customer: str) -> dict[str, Any]:
    """Refund part of an order to its customer."""
    _log("refund_create", {"order": order, "amount": amount, "customer": customer})
    return {"ok": True}


if __name__ == "__main__":
    server.run()
