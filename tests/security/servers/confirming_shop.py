"""A shop MCP server (the SDK's high-level ``MCPServer``) whose refund asks its client to
confirm the amount, and lets it be corrected (``elicitation/create``), as tools that show
a person a form before they act do. ``order_read`` is a read, ``refund_create`` a write
that refunds the amount the answer gives; ``refund_paired`` does the same once a second
call of it has arrived; ``refund_corrected`` asks for the amount under a name of its own
(``refund_amount``, not an argument of the tool) and refunds that; ``refund_confirmed``
asks for a yes or no (``confirm``) and refunds the call's amount on a yes. Every tool call
is appended to
``$EXAMPLE_CALL_LOG`` (the write with the amount it refunded)."""

from __future__ import annotations

from typing import Any

import anyio
from call_log import call_logger
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("confirming-shop")

ORDERS: dict[str, dict[str, Any]] = {"1187": {"id": "1187", "customer": "C-7", "total": 20}}

_log = call_logger("shop")


class Confirm(BaseModel):
    amount: float


class Correction(BaseModel):
    refund_amount: float


class YesOrNo(BaseModel):
    confirm: bool


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def order_read(order: str) -> dict[str, Any]:
    """The order ``order``."""
    _log("order_read", {"order": order})
    if order not in ORDERS:
        raise ValueError(f"no order {order}")
    return dict(ORDERS[order])


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
async def refund_create(order: str, amount: float, ctx: Context) -> dict[str, Any]:
    """Refund ``amount`` of order ``order``, once the client confirms (or corrects) it."""
    answer = await ctx.elicit(f"Refund {amount} on order {order}? Confirm or correct it.", Confirm)
    if answer.action != "accept":
        raise ValueError("the refund was not confirmed")
    amount = answer.data.amount
    _log("refund_create", {"order": order, "amount": amount})
    return {"ok": True, "order": order, "amount": amount}


_arrived = 0


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
async def refund_paired(order: str, amount: float, ctx: Context) -> dict[str, Any]:
    """``refund_create``, once a second such refund has arrived too (two writes at once)."""
    global _arrived
    _arrived += 1
    with anyio.fail_after(10):
        while _arrived < 2:
            await anyio.sleep(0.01)
    return await refund_create(order, amount, ctx)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
async def refund_corrected(order: str, amount: float, ctx: Context) -> dict[str, Any]:
    """Refund order ``order``: the amount the client confirms as ``refund_amount``."""
    answer = await ctx.elicit(f"Refund {amount} on order {order}? Give the amount.", Correction)
    if answer.action != "accept":
        raise ValueError("the refund was not confirmed")
    _log("refund_corrected", {"order": order, "amount": answer.data.refund_amount})
    return {"ok": True, "order": order, "amount": answer.data.refund_amount}


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
async def refund_confirmed(order: str, amount: float, ctx: Context) -> dict[str, Any]:
    """Refund ``amount`` of order ``order`` once the client says yes."""
    answer = await ctx.elicit(f"Refund {amount} on order {order}?", YesOrNo)
    if answer.action != "accept" or not answer.data.confirm:
        raise ValueError("the refund was not confirmed")
    _log("refund_confirmed", {"order": order, "amount": amount})
    return {"ok": True, "order": order, "amount": amount}


if __name__ == "__main__":
    server.run()
