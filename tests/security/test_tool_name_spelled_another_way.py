"""The agent calls a write by another spelling of its name, one the wrapped server still
resolves to it (THREATS.md, 1: "odd casing ... is refused, never forwarded unchecked").

The guard classifies the name the agent sent: it looks up that exact name's annotations
and the operator's ``--read``/``--write``, and, finding neither, decides by the words of the
name. A write with a reader's name (``get_report``, ``readOnlyHint: false``; or
``fetch_statement``, written ``--write`` by the operator) called as ``GET_REPORT``,
``get-report``, ``get_report`` with a no-break space, or ``get_ｒｅｐｏｒｔ`` (fullwidth
letters, NFKC ``get_report``) is then a read by its name, and goes to the server
unchecked; a server that finds tools leniently (any case, ``-`` for ``_``, NFKC,
whitespace trimmed: ``servers/alias_shop.py``) runs the write. The safe behaviour: only a
tool the server listed, by exactly that name, can be a read; any other name is checked
as a write.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called

ALIAS_SHOP = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "alias_shop.py")]


def stop_all(*tools: str) -> dict[str, Any]:
    return {
        "id": "stop-all",
        "app": "shop",
        "tools": list(tools),
        "response": "stop",
        "when": "1 == 1",
        "message": "Nothing of this runs.",
    }


SPELLINGS = [
    "GET_REPORT",
    "Get_Report",
    "get-report",
    "get_report\u00a0",  # a no-break space: Python's strip() drops it
    " get_report",
    "get_\uff52\uff45\uff50\uff4f\uff52\uff54",  # fullwidth "report": NFKC makes it ASCII
    "FETCH_STATEMENT",
    "fetch-statement",
]


@pytest.mark.anyio
async def test_a_write_called_by_another_spelling_of_its_name_is_not_forwarded_unchecked(
    workspace: Workspace,
) -> None:
    ws = workspace
    ws.push(rules=[stop_all("get_report", "fetch_statement")])
    params = ws.guard("shop", ALIAS_SHOP, "--write", "fetch_statement")
    async with Client(params) as shop:
        # The exact names: writes, checked, stopped.
        for name in ("get_report", "fetch_statement"):
            exact = await shop.call_tool(name, {"to": "everyone"})
            assert exact.is_error, text(exact)
        assert tools_called(ws) == []
        # The read still passes.
        assert not (await shop.call_tool("order_read", {"id": "7"})).is_error
        ran: list[str] = []
        for name in SPELLINGS:
            before = len(ws.calls())
            with contextlib.suppress(MCPError):
                await shop.call_tool(name, {"to": "everyone"})
            if len(ws.calls()) > before:
                ran.append(name)
        assert ran == [], f"writes run unchecked by another spelling of their names: {ran}"
        # Each is refused by the guard, saying why.
        with pytest.raises(MCPError, match="listed no tool by exactly this name"):
            await shop.call_tool("GET_REPORT", {})
    assert tools_called(ws) == ["order_read"]
