"""An accounts-payable MCP server (the SDK's high-level ``MCPServer``) that finds a supplier
the way a database with a case- and accent-insensitive collation does (MariaDB's
``utf8mb4_unicode_ci``, ERPNext's default): ``ACME``, ``acme``, `` Acme ``, ``ÀCME``,
``ＡＣＭＥ`` (fullwidth), ``AC\u200bME`` (a zero-width space inside) and ``AC\x01ME`` (a
control character inside) are one supplier.

``supplier_pay`` (a write) pays the supplier it finds and logs the call under the
supplier's own name. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

import unicodedata
from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("collating-payables")

SUPPLIERS = ["ACME", "Globex", "Initech"]

_log = call_logger("payables")


_SPACES = "\t\n\x0b\x0c\r\x85"  # the control characters that are spaces


def _collate(text: str) -> str:
    """A key as a ``_ci``/``_ai`` collation compares it: compatibility forms, accents,
    invisible characters, control characters (Unicode's collation weighs them nothing:
    ``AC\x01ME`` is ``ACME``), case and surrounding spaces do not count."""
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(
        c
        for c in decomposed
        if unicodedata.category(c) not in ("Mn", "Cf")
        and (unicodedata.category(c) != "Cc" or c in _SPACES)
    )
    return " ".join(kept.casefold().split())


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def supplier_pay(supplier: str, amount: float) -> dict[str, Any]:
    """Pay a supplier."""
    found = next((s for s in SUPPLIERS if _collate(s) == _collate(supplier)), None)
    if found is None:
        raise ValueError(f"no supplier {supplier!r}")
    _log("supplier_pay", {"supplier": found, "asked": supplier, "amount": amount})
    return {"supplier": found, "paid": amount}


if __name__ == "__main__":
    server.run()
