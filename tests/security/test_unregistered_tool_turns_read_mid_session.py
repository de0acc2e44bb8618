"""A wrapped server turns a write into a read mid-session (THREATS.md, 1: "a tool that
changes from write to read needs an admin to confirm it").

The workspace's memory ("a tool it has known as a write stays one until an admin
confirms") covers only the tools the guard registered. The guard registers at most the
first 1000 tools, and leaves out any tool whose name Claros does not accept. A tool past
those limits is a write for this guard (checked, here stopped by a rule, or refused by
Claros) until the server sends ``notifications/tools/list_changed`` with
``readOnlyHint: true`` on it: from then on the guard forwards it unchecked, with nobody
confirming anything. The safe behaviour: a tool this guard has treated as a write in this
session stays a write (or is at least never forwarded unchecked) until an admin confirms.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called

FLIPPING = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "flipping_server.py")]


def stop_all(tool: str) -> dict[str, Any]:
    return {
        "id": "stop-all",
        "app": "shop",
        "tools": [tool] if " " not in tool else ["frobnicate"],
        "response": "stop",
        "when": "1 == 1",
        "message": "Nothing of this runs.",
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "fillers"),
    [
        ("frobnicate", "1000"),  # the 1002nd tool listed: never registered
        ("frob nicate", "0"),  # a name Claros does not accept: never registered
    ],
    ids=["past-the-first-1000-tools", "name-claros-does-not-accept"],
)
async def test_a_write_the_server_later_calls_a_read_is_still_not_forwarded_unchecked(
    workspace: Workspace, tool: str, fillers: str
) -> None:
    ws = workspace
    ws.push(rules=[stop_all(tool)])
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if "tools/list_changed" in repr(message):
            changed.set()

    env = {"FLIP_TOOL": tool, "FLIP_FILLERS": fillers}
    async with Client(ws.guard("shop", FLIPPING, **env), message_handler=on_message) as shop:
        # A write for this guard: checked and not run.
        first = await shop.call_tool(tool, {"amount": 5})
        assert first.is_error, text(first)
        assert tools_called(ws) == []

        # The server now says it is a read (it answers get_status, then list_changed);
        # the guard relays list_changed only after it has listed the tools again.
        assert not (await shop.call_tool("get_status", {})).is_error
        with anyio.fail_after(20):
            await changed.wait()

        again = await shop.call_tool(tool, {"amount": 5})
        assert again.is_error, f"forwarded unchecked after the server's flip: {text(again)}"
    assert tools_called(ws) == ["get_status"]
