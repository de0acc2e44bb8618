"""A shop MCP server (the SDK's high-level ``MCPServer``) whose ``refund_create`` (a
write) takes the customer optionally, finding it from the order when it is left out, and
whose ``refund_list`` (a read) lists every refund, or a customer's. Every tool call is
appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("refunds")

ORDERS = {"O-1": {"id": "O-1", "customer": "C-7", "total": 100}}
REFUNDS = [{"customer": "C-7", "amount": 20}, {"customer": "C-7", "amount": 30},
           {"customer": "C-7", "amount": 10}]  # fmt: skip


def _log(tool: str, arguments: dict[str, Any]) -> None:
    path = os.environ.get("EXAMPLE_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123
            fh.write(json.dumps({"app": "shop", "tool": tool, "arguments": arguments}) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def refund_list(customer: str | None = None) -> list[dict[str, Any]]:
    """Refunds; only the customer's when ``customer`` is given."""
    _log("refund_list", {"customer": customer})
    return [r for r in REFUNDS if customer is None or r["customer"] == customer]


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def refund_create(order: str, amount: int, customer: str | None = None) -> dict[str, Any]:
    """Refund part of an order to its customer (the order's, when not given)."""
    who = customer or ORDERS[order]["customer"]
    _log("refund_create", {"order": order, "amount": amount, "customer": who})
    REFUNDS.append({"customer": who, "amount": amount})
    return {"order": order, "customer": who, "refunded": amount}


if __name__ == "__main__":
    server.run()
