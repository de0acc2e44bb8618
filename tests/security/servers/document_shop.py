"""A shop MCP server over a document store, as apps on MongoDB are written: a customer is
given as its id (``"C-7"``), as the object that holds it (``{"id": "C-7"}``, the form the
shop's own answers use), or as a filter (``{"$ne": null}``), and both tools hand it to the
store as they got it: the refund list filters on it, the refund goes to the first customer
it matches. Every tool call is appended to ``$EXAMPLE_CALL_LOG`` (the refund with the
customer it went to)."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("document-shop")

CUSTOMERS = ["C-7", "C-9"]
REFUNDS = [
    {"id": "R-1", "customer": "C-7", "amount": 10},
    {"id": "R-2", "customer": "C-7", "amount": 20},
    {"id": "R-3", "customer": "C-9", "amount": 30},
]

_log = call_logger("shop")


def _matches(customer: str, wanted: Any) -> bool:
    """The store's matching of one customer id: a value, ``{"id": ...}``, or operators."""
    if not isinstance(wanted, dict):
        return customer == wanted
    if "id" in wanted:
        return customer == wanted["id"]
    if "$ne" in wanted:
        return customer != wanted["$ne"]
    if "$in" in wanted:
        return customer in wanted["$in"]
    return False


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def refund_list(customer: Any) -> list[dict[str, Any]]:
    """The refunds of the customers ``customer`` matches."""
    _log("refund_list", {"customer": customer})
    return [r for r in REFUNDS if _matches(r["customer"], customer)]


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def refund_create(order: str, amount: float, customer: Any) -> dict[str, Any]:
    """Refund ``amount`` to the (first) customer ``customer`` matches."""
    found = next(c for c in CUSTOMERS if _matches(c, customer))
    _log("refund_create", {"order": order, "amount": amount, "customer": found})
    return {"ok": True, "customer": found}


if __name__ == "__main__":
    server.run()
