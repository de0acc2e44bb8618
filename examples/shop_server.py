"""A small shop as an MCP server (MCP SDK 2.x ``MCPServer``): orders, refunds, customers.

Read tools carry ``readOnlyHint: true``; the guard passes them straight through and runs
them itself when a check needs facts. Writes (``refund_create``, ``order_cancel``) are
what Claros checks. The data lives in memory and starts the same every time; refunds are
dated relative to today so "refunds this quarter" always means something.

Run it alone with ``python examples/shop_server.py`` (stdio), or behind the guard::

    claros guard --app shop -- python examples/shop_server.py
    python examples/shop_server.py --http 9000   # or over Streamable HTTP, then
    claros guard --app shop --upstream-url http://127.0.0.1:9000/mcp

With ``EXAMPLE_CALL_LOG=FILE`` set, every tool call the server runs is appended to FILE
as a JSON line (tests use it to see what reached the server).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import Any, NotRequired

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from typing_extensions import TypedDict

READ = ToolAnnotations(readOnlyHint=True)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False)

mcp = MCPServer(
    "shop",
    version="1.0.0",
    instructions="A small shop: read orders and customers, create refunds, cancel orders.",
)

Number = int | float


# The read tools' records, as types: the server declares them as output schemas, which the
# guard registers and Claros's mapper reads (docs/rules.md, "Proposed mappings").
class OrderLine(TypedDict):
    sku: str
    qty: Number
    price: Number


class Order(TypedDict):
    id: str
    customer: str
    total: Number
    currency: str
    status: str
    lines: list[OrderLine]


class Customer(TypedDict):
    id: str
    name: str
    tier: str
    since: str


class Refund(TypedDict):
    id: str
    order: str
    customer: str
    amount: Number
    created_at: str
    reason: NotRequired[str]


_TODAY = dt.date.today()
_QUARTER_START = _TODAY.replace(month=3 * ((_TODAY.month - 1) // 3) + 1, day=1)

ORDERS: dict[str, Order] = {
    "1187": {
        "id": "1187",
        "customer": "C-7",
        "total": 200,
        "currency": "EUR",
        "status": "delivered",
        "lines": [{"sku": "LAMP-1", "qty": 2, "price": 100}],
    },
    "1188": {
        "id": "1188",
        "customer": "C-9",
        "total": 90,
        "currency": "EUR",
        "status": "delivered",
        "lines": [{"sku": "MUG-3", "qty": 3, "price": 30}],
    },
    "1190": {
        "id": "1190",
        "customer": "C-4",
        "total": 1200,
        "currency": "EUR",
        "status": "shipped",
        "lines": [{"sku": "DESK-9", "qty": 1, "price": 1200}],
    },
    "1191": {
        "id": "1191",
        "customer": "C-8",
        "total": 80,
        "currency": "EUR",
        "status": "open",
        "lines": [{"sku": "MUG-3", "qty": 2, "price": 40}],
    },
}
CUSTOMERS: dict[str, Customer] = {
    "C-4": {"id": "C-4", "name": "Grace Hopper", "tier": "standard", "since": "2024-11-02"},
    "C-7": {"id": "C-7", "name": "Ada Lovelace", "tier": "gold", "since": "2021-03-02"},
    "C-8": {"id": "C-8", "name": "Katherine Johnson", "tier": "gold", "since": "2022-08-26"},
    "C-9": {"id": "C-9", "name": "Alan Turing", "tier": "standard", "since": "2025-06-30"},
}
REFUNDS: list[Refund] = [
    {
        "id": "R-1",
        "order": "1187",
        "customer": "C-7",
        "amount": 15,
        "created_at": (_QUARTER_START - dt.timedelta(days=20)).isoformat(),
    },
    {
        "id": "R-2",
        "order": "1187",
        "customer": "C-7",
        "amount": 10,
        "created_at": _QUARTER_START.isoformat(),
    },
    {
        "id": "R-3",
        "order": "1187",
        "customer": "C-7",
        "amount": 12,
        "created_at": _QUARTER_START.isoformat(),
    },
    {
        "id": "R-4",
        "order": "1188",
        "customer": "C-9",
        "amount": 5,
        "created_at": _QUARTER_START.isoformat(),
    },
]


def _log_call(tool: str, arguments: dict[str, Any]) -> None:
    path = os.environ.get("EXAMPLE_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123 - an example, kept plain
            fh.write(json.dumps({"app": "shop", "tool": tool, "arguments": arguments}) + "\n")


def _order(order_id: str) -> Order:
    order = ORDERS.get(order_id)
    if order is None:
        raise ToolError(f"no order {order_id}")
    return order


@mcp.tool(annotations=READ)
def order_read(id: str) -> Order:
    """One order: customer, total, currency, status and lines."""
    _log_call("order_read", {"id": id})
    return _order(id)


@mcp.tool(annotations=READ)
def customer_read(id: str) -> Customer:
    """One customer: name, tier and customer since."""
    _log_call("customer_read", {"id": id})
    customer = CUSTOMERS.get(id)
    if customer is None:
        raise ToolError(f"no customer {id}")
    return customer


@mcp.tool(annotations=READ)
def refund_list(customer: str | None = None) -> list[Refund]:
    """Refunds, newest last; only the customer's when ``customer`` is given."""
    _log_call("refund_list", {"customer": customer})
    return [r for r in REFUNDS if customer is None or r["customer"] == customer]


@mcp.tool(annotations=WRITE)
def refund_create(order: str, amount: float, reason: str = "") -> dict[str, Any]:
    """Refund part of an order to its customer."""
    _log_call("refund_create", {"order": order, "amount": amount, "reason": reason})
    found = _order(order)
    if amount <= 0:
        raise ToolError("a refund is a positive amount")
    refund: Refund = {
        "id": f"R-{len(REFUNDS) + 1}",
        "order": order,
        "customer": found["customer"],
        "amount": amount,
        "created_at": dt.date.today().isoformat(),
        "reason": reason,
    }
    REFUNDS.append(refund)
    return dict(refund)


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def order_cancel(id: str) -> dict[str, Any]:
    """Cancel an order that has not shipped yet."""
    _log_call("order_cancel", {"id": id})
    order = _order(id)
    if order["status"] != "open":
        raise ToolError(f"order {id} is {order['status']}; only open orders can be cancelled")
    order["status"] = "cancelled"
    return dict(order)


@mcp.resource("shop://policies/refunds", mime_type="text/markdown")
def refund_policy() -> str:
    """How the shop refunds."""
    return "# Refunds\n\nRefunds go back to the original payment within 5 days.\n"


@mcp.prompt()
def refund_reply(customer: str) -> str:
    """A reply to a customer who asked for a refund."""
    return f"Write a short, kind reply to customer {customer} about their refund request."


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # Streamable HTTP on 127.0.0.1:PORT/mcp
        mcp.run("streamable-http", port=int(sys.argv[2]))
    else:
        mcp.run("stdio")
