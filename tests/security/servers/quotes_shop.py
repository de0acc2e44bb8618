"""A sales MCP server (the SDK's high-level ``MCPServer``) whose ``order_create`` (a write)
takes the items of its quote when the call gives none, as order-from-quote APIs do, and
finds a SKU in any case; ``sku_read`` (a read) gives an item's master data, matching the
SKU exactly, and ``{}`` for one it does not know. Every tool call is appended to
``$EXAMPLE_CALL_LOG`` (the write with the items it ordered)."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("quotes-shop")

SKUS: dict[str, dict[str, Any]] = {
    "W-1": {"sku": "W-1", "name": "Hunting rifle", "group": "Weapons"},
    "P-1": {"sku": "P-1", "name": "Paper, A4", "group": "Office"},
}
QUOTES: dict[str, list[dict[str, Any]]] = {"Q-1": [{"sku": "W-1", "qty": 1}]}

_log = call_logger("sales")


class Item(BaseModel):
    sku: str
    qty: int = 1


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def sku_read(sku: str) -> dict[str, Any]:
    """An item's master data ({} when there is none by that exact SKU)."""
    _log("sku_read", {"sku": sku})
    return dict(SKUS.get(sku, {}))


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def order_create(quote: str, items: list[Item] | None = None) -> dict[str, Any]:
    """Order from a quote: its items, unless the call names others."""
    known = {k.casefold(): k for k in SKUS}
    named = [{"sku": known[i.sku.casefold()], "qty": i.qty} for i in items or []]
    ordered = named if items is not None else QUOTES[quote]
    _log("order_create", {"quote": quote, "items": ordered})
    return {"ok": True, "items": ordered}


if __name__ == "__main__":
    server.run()
