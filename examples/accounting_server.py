"""A small accounting app as an MCP server (MCP SDK 2.x ``MCPServer``): invoices,
suppliers, items and credit notes.

Read tools carry ``readOnlyHint: true``; writes (``invoice_submit``,
``supplier_bank_update``, ``credit_note_create``) are what Claros checks. Note that
``invoice_list`` ignores its ``supplier`` filter, as some real servers do: the guard
applies a query lookup's ``where`` itself.

    claros guard --app accounting -- python examples/accounting_server.py
    python examples/accounting_server.py --http 9000   # or over Streamable HTTP, then
    claros guard --app accounting --upstream-url http://127.0.0.1:9000/mcp

With ``EXAMPLE_CALL_LOG=FILE`` set, every tool call the server runs is appended to FILE
as a JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from typing_extensions import TypedDict

READ = ToolAnnotations(readOnlyHint=True)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False)

mcp = MCPServer(
    "accounting",
    version="1.0.0",
    instructions="Purchase invoices, suppliers and items; submit invoices, issue credit notes.",
)

Number = int | float


# The read tools' records, as types: the server declares them as output schemas, which the
# guard registers and Claros's mapper reads (docs/rules.md, "Proposed mappings").
class InvoiceItem(TypedDict):
    item_code: str
    qty: Number


class Invoice(TypedDict):
    name: str
    supplier: str
    grand_total: Number
    discount: Number
    currency: str
    status: str
    items: list[InvoiceItem]


class InvoiceSummary(TypedDict):
    name: str
    supplier: str
    status: str


class Item(TypedDict):
    item_code: str
    item_name: str
    item_group: str


class Supplier(TypedDict):
    name: str
    country: str
    iban: str | None


INVOICES: dict[str, Invoice] = {
    "ACC-PINV-0042": {
        "name": "ACC-PINV-0042",
        "supplier": "Acme Paper",
        "grand_total": 12500,
        "discount": 500,
        "currency": "EUR",
        "status": "Draft",
        "items": [{"item_code": "PAPER-A4", "qty": 10}, {"item_code": "CONSULT-H", "qty": 5}],
    },
    "ACC-PINV-0043": {
        "name": "ACC-PINV-0043",
        "supplier": "Old Friend Ltd",
        "grand_total": 90,
        "discount": 0,
        "currency": "EUR",
        "status": "Draft",
        "items": [{"item_code": "PAPER-A4", "qty": 1}],
    },
    "ACC-PINV-0044": {
        "name": "ACC-PINV-0044",
        "supplier": "Old Friend Ltd",
        "grand_total": 640,
        "discount": 40,
        "currency": "EUR",
        "status": "Draft",
        "items": [{"item_code": "CONSULT-H", "qty": 4}],
    },
    "ACC-PINV-0045": {
        "name": "ACC-PINV-0045",
        "supplier": "New Vendor GmbH",
        "grand_total": 300,
        "discount": 0,
        "currency": "EUR",
        "status": "Draft",
        "items": [{"item_code": "PAPER-A4", "qty": 30}],
    },
    "ACC-PINV-0001": {
        "name": "ACC-PINV-0001",
        "supplier": "Old Friend Ltd",
        "grand_total": 75,
        "discount": 0,
        "currency": "EUR",
        "status": "Paid",
        "items": [],
    },
}
ITEMS: dict[str, Item] = {
    "PAPER-A4": {"item_code": "PAPER-A4", "item_name": "Paper A4", "item_group": "Raw"},
    "CONSULT-H": {
        "item_code": "CONSULT-H",
        "item_name": "Consulting hour",
        "item_group": "Services",
    },
}
SUPPLIERS: dict[str, Supplier] = {
    "Acme Paper": {"name": "Acme Paper", "country": "DE", "iban": "DE02100100109307118603"},
    "Old Friend Ltd": {"name": "Old Friend Ltd", "country": "GB", "iban": "GB33BUKB20201555555555"},
    "New Vendor GmbH": {"name": "New Vendor GmbH", "country": "AT", "iban": None},
}
CREDIT_NOTES: list[dict[str, Any]] = []


def _log_call(tool: str, arguments: dict[str, Any]) -> None:
    path = os.environ.get("EXAMPLE_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123 - an example, kept plain
            fh.write(json.dumps({"app": "accounting", "tool": tool, "arguments": arguments}) + "\n")


def _invoice(name: str) -> Invoice:
    invoice = INVOICES.get(name)
    if invoice is None:
        raise ToolError(f"no invoice {name}")
    return invoice


@mcp.tool(annotations=READ)
def invoice_read(name: str) -> Invoice:
    """One purchase invoice: supplier, totals, status and items."""
    _log_call("invoice_read", {"name": name})
    return _invoice(name)


@mcp.tool(annotations=READ)
def invoice_list(supplier: str | None = None) -> list[InvoiceSummary]:
    """Every purchase invoice (name, supplier, status). The filter is not applied."""
    _log_call("invoice_list", {"supplier": supplier})
    return [
        {"name": inv["name"], "supplier": inv["supplier"], "status": inv["status"]}
        for inv in INVOICES.values()
    ]


@mcp.tool(annotations=READ)
def item_read(code: str) -> Item:
    """One item: its name and item group."""
    _log_call("item_read", {"code": code})
    item = ITEMS.get(code)
    if item is None:
        raise ToolError(f"no item {code}")
    return item


@mcp.tool(annotations=READ)
def supplier_read(name: str) -> Supplier:
    """One supplier: country and bank account."""
    _log_call("supplier_read", {"name": name})
    supplier = SUPPLIERS.get(name)
    if supplier is None:
        raise ToolError(f"no supplier {name}")
    return supplier


@mcp.tool(annotations=WRITE)
def invoice_submit(name: str) -> dict[str, Any]:
    """Submit a draft purchase invoice for payment."""
    _log_call("invoice_submit", {"name": name})
    invoice = _invoice(name)
    if invoice["status"] != "Draft":
        raise ToolError(f"{name} is {invoice['status']}, not a draft")
    invoice["status"] = "Submitted"
    return {"name": name, "status": "Submitted"}


@mcp.tool(annotations=WRITE)
def supplier_bank_update(name: str, iban: str) -> dict[str, Any]:
    """Change a supplier's bank account."""
    _log_call("supplier_bank_update", {"name": name, "iban": iban})
    supplier = SUPPLIERS.get(name)
    if supplier is None:
        raise ToolError(f"no supplier {name}")
    supplier["iban"] = iban
    return dict(supplier)


@mcp.tool(annotations=WRITE)
def credit_note_create(order: str, amount: float, currency: str = "EUR") -> dict[str, Any]:
    """Issue a credit note for a shop order (the order lives in the shop, not here)."""
    _log_call("credit_note_create", {"order": order, "amount": amount, "currency": currency})
    note = {
        "id": f"CN-{len(CREDIT_NOTES) + 1}",
        "order": order,
        "amount": amount,
        "currency": currency,
    }
    CREDIT_NOTES.append(note)
    return note


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # Streamable HTTP on 127.0.0.1:PORT/mcp
        mcp.run("streamable-http", port=int(sys.argv[2]))
    else:
        mcp.run("stdio")
