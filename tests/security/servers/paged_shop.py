"""A shop MCP server whose refund history comes a page at a time, newest first, and
ignores the customer filter (the guard applies ``where`` itself): ``refund_list`` answers
``{"refunds": [...two rows...], <how it says more follow>}``; how is ``$PAGED_SHOP_MORE``:
``next_cursor`` (the cursor of the next page, the default), ``has_more`` (``true``) or
``total_count`` (how many rows there are in all), or ``errors`` (no rows at all, but a
GraphQL-style ``{"data": null, "errors": [...]}``); ``$PAGED_SHOP_PAGE`` rows a page (2).
``refund_create`` (a write) adds a refund.
Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

import os
from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("paged-shop")

# Newest first: the customer's own two refunds are on the second page, behind two small
# refunds to another customer.
REFUNDS = [
    {"id": "R-4", "customer": "C-9", "amount": 1},
    {"id": "R-3", "customer": "C-9", "amount": 1},
    {"id": "R-2", "customer": "C-7", "amount": 20},
    {"id": "R-1", "customer": "C-7", "amount": 10},
]

_log = call_logger("shop")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def refund_list(customer: str | None = None, cursor: str | None = None) -> dict[str, Any]:
    """Refunds, newest first, a page at a time (the customer filter is not applied)."""
    _log("refund_list", {"customer": customer, "cursor": cursor})
    size = int(os.environ.get("PAGED_SHOP_PAGE", "2"))
    start = int(cursor or 0)
    page: dict[str, Any] = {"refunds": REFUNDS[start : start + size]}
    more = start + size < len(REFUNDS)
    style = os.environ.get("PAGED_SHOP_MORE", "next_cursor")
    if style == "next_cursor":
        page["next_cursor"] = str(start + size) if more else None
    elif style == "has_more":
        page["has_more"] = more
    elif style == "total_count":
        page["total_count"] = len(REFUNDS)
    elif style == "errors":  # a GraphQL-style answer: no data, what went wrong
        return {"data": None, "errors": [{"message": f"no customer {customer}"}]}
    return page


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def refund_create(order: str, amount: float, customer: str) -> dict[str, Any]:
    """Refund part of an order to its customer."""
    _log("refund_create", {"order": order, "amount": amount, "customer": customer})
    return {"ok": True}


if __name__ == "__main__":
    server.run()
