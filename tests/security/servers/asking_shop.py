"""A shop MCP server (the SDK's high-level ``MCPServer``) whose tools find an order by a
prefix of its id and, when several orders match, ask the client which one was meant
(``elicitation/create``), as tools that help a person pick do. ``order_read`` is a read,
``refund_create`` a write; both find the order that way. Every tool call is appended to
``$EXAMPLE_CALL_LOG`` (the write with the order it found)."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("asking-shop")

ORDERS: dict[str, dict[str, Any]] = {
    "1187-A": {"id": "1187-A", "customer": "C-7", "total": 500},
    "1187-B": {"id": "1187-B", "customer": "C-7", "total": 20},
}

_log = call_logger("shop")


class Choice(BaseModel):
    order: str


async def _find(ref: str, ctx: Context) -> dict[str, Any]:
    matches = sorted(k for k in ORDERS if k.startswith(ref))
    if len(matches) == 1:
        return ORDERS[matches[0]]
    if not matches:
        raise ValueError(f"no order {ref}")
    answer = await ctx.elicit(f"Several orders match {ref}: {', '.join(matches)}. Which?", Choice)
    if answer.action != "accept" or answer.data.order not in matches:
        raise ValueError(f"no order of {', '.join(matches)} was chosen")
    return ORDERS[answer.data.order]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def order_read(order: str, ctx: Context) -> dict[str, Any]:
    """The order whose id is or starts with ``order`` (asks which, if several)."""
    _log("order_read", {"order": order})
    return dict(await _find(order, ctx))


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
async def refund_create(order: str, amount: float, ctx: Context) -> dict[str, Any]:
    """Refund part of the order whose id is or starts with ``order`` (asks which)."""
    found = await _find(order, ctx)
    _log("refund_create", {"order": found["id"], "amount": amount})
    return {"ok": True, "order": found["id"]}


if __name__ == "__main__":
    server.run()
