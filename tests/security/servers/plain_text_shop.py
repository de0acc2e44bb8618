"""A shop MCP server (the SDK's high-level ``MCPServer``) whose read tool answers plain
text: the SDK wraps a ``str`` return as ``structuredContent: {"result": "..."}``. Every
tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer

server = MCPServer("plain-text-shop")


_log = call_logger("shop")


@server.tool()
def order_read(id: str) -> str:  # noqa: A002 - the app's own argument name
    """Read an order (as a sentence, not a record)."""
    _log("order_read", {"id": id})
    return f"Order {id}: total 200.00 EUR, customer C-7"


@server.tool()
def order_count(customer: str) -> int:
    """How many orders a customer has (a number, not a record)."""
    _log("order_count", {"customer": customer})
    return 3


@server.tool()
def refund_create(order: str, amount: float) -> dict[str, Any]:
    """Refund part of an order."""
    _log("refund_create", {"order": order, "amount": amount})
    return {"ok": True}


if __name__ == "__main__":
    server.run()
