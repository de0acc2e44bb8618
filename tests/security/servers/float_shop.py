"""A shop MCP server that keeps an order's total as a Python float, taken with
``float()`` from what the caller writes (so ``"nan"``, ``"inf"`` and ``"1e999"`` are
totals too), and whose ``order_read`` answers the order as JSON text written by Python's
``json.dumps`` (which writes ``NaN`` and ``Infinity``). ``order_update`` and
``refund_create`` are writes. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

import json
from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("float-shop")

ORDERS: dict[str, dict[str, Any]] = {"1187": {"id": "1187", "total": 20.0}}

_log = call_logger("shop")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True), structured_output=False)
def order_read(order: str) -> str:
    """The order, as JSON."""
    _log("order_read", {"order": order})
    return json.dumps(ORDERS[order])


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def order_update(order: str, total: str) -> dict[str, Any]:
    """Set an order's total."""
    _log("order_update", {"order": order, "total": total})
    ORDERS[order]["total"] = float(total)
    return {"ok": True}


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def refund_create(order: str, amount: float) -> dict[str, Any]:
    """Refund part of an order."""
    _log("refund_create", {"order": order, "amount": amount})
    return {"ok": True}


if __name__ == "__main__":
    server.run()
