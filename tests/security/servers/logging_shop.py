"""A shop MCP server (the SDK's high-level ``MCPServer``) whose order read logs what it
read (``notifications/message``), as servers that log each query do. ``order_read`` is a
read, ``refund_create`` a write. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

import warnings
from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations

warnings.simplefilter("ignore")  # ctx.info is deprecated in the 2026-07-28 protocol

server = MCPServer("logging-shop")

ORDERS: dict[str, dict[str, Any]] = {
    "1187": {"id": "1187", "customer": "C-7", "total": 500, "note": "flagged by fraud review"},
}

_log = call_logger("shop")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def order_read(order: str, ctx: Context) -> dict[str, Any]:
    """The order ``order``."""
    _log("order_read", {"order": order})
    await ctx.info(f"order_read {order}: {ORDERS[order]}")
    return dict(ORDERS[order])


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
async def refund_create(order: str, amount: float, ctx: Context) -> dict[str, Any]:
    """Refund ``amount`` of order ``order``."""
    await ctx.info(f"refund_create {order}: {amount}")
    _log("refund_create", {"order": order, "amount": amount})
    return {"ok": True}


if __name__ == "__main__":
    server.run()
