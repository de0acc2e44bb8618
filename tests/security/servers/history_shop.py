"""A shop MCP server whose write takes the customer as an optional argument (the shop
finds it from the order when it is left out) and whose refund history ignores a filter
that is not given. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer

server = MCPServer("history-shop")

ORDERS = {"1187": {"id": "1187", "customer": "C-7", "total": 200}}
REFUNDS = [
    {"id": "R-1", "customer": "C-7", "amount": 10},
    {"id": "R-2", "customer": "C-7", "amount": 20},
    {"id": "R-3", "customer": "C-9", "amount": 30},
]


_log = call_logger("shop")


@server.tool()
def refund_list(customer: str | None = None) -> list[dict[str, Any]]:
    """Refunds; only the customer's when ``customer`` is given."""
    _log("refund_list", {"customer": customer})
    return [r for r in REFUNDS if customer is None or r["customer"] == customer]


@server.tool()
def refund_create(order: str, amount: float, customer: str | None = None) -> dict[str, Any]:
    """Refund part of an order to its customer (the order's, when none is given)."""
    _log("refund_create", {"order": order, "amount": amount, "customer": customer})
    return {"ok": True, "customer": customer or ORDERS[order]["customer"]}


if __name__ == "__main__":
    server.run()
