"""A shop MCP server (the SDK's high-level ``MCPServer``) whose refund asks its client to
confirm the amount, in either era of MCP: an answer that came with the call
(``inputResponses``, the 2026-07-28 multi-round-trip flow, which the SDK's server hands the
tool as ``ctx.input_responses`` whatever was negotiated, and the SDK's client lets a
caller send with its first call) is taken; else the question is asked over
``elicitation/create``, as a 2025-11-25 server does. ``order_read`` is a read;
``refund_create`` refunds the amount the answer gives, and is appended to
``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("retrying-shop")

ORDERS: dict[str, dict[str, Any]] = {"1187": {"id": "1187", "customer": "C-7", "total": 20}}

_log = call_logger("shop")


class Confirm(BaseModel):
    amount: float


async def _answer(ctx: Context, message: str, schema: type[BaseModel]) -> dict[str, Any]:
    """The accepted content of the client's answer: the one that came with the call, else
    the one ``elicitation/create`` gets."""
    answer: Any = (ctx.input_responses or {}).get("confirm")
    if answer is None:
        answer = await ctx.elicit(message, schema)
        content = answer.data.model_dump() if answer.action == "accept" else None
    else:
        content = answer.content if getattr(answer, "action", None) == "accept" else None
    if not isinstance(content, dict):
        raise ValueError("the refund was not confirmed")
    return content


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def order_read(order: str) -> dict[str, Any]:
    """The order ``order``."""
    if order not in ORDERS:
        raise ValueError(f"no order {order}")
    return dict(ORDERS[order])


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
async def refund_create(order: str, amount: float, ctx: Context) -> dict[str, Any]:
    """Refund ``amount`` of order ``order``, once the client confirms (or corrects) it."""
    message = f"Refund {amount} on order {order}? Confirm or correct it."
    refunded = float((await _answer(ctx, message, Confirm))["amount"])
    _log("refund_create", {"order": order, "amount": refunded})
    return {"ok": True, "order": order, "amount": refunded}


if __name__ == "__main__":
    server.run()
