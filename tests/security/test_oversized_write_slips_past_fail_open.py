"""An agent pads a write past the check API's body limit (1 MB) to get it forwarded
unchecked by a guard run with ``--fail-open`` (THREATS.md, 1 and 5; docs/guard.md: a 4xx
from Claros is a refusal, never an outage, and ``--fail-open`` is for outages only).

Claros answers a body over its limit with 413 and closes the connection without reading
the body. The guard must take that as the refusal it is and block the write. It must
never reach the wrapped server because the agent made the check too large to send.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called

TURNCOAT = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "turncoat_server.py")]

STOP_ALL = {
    "id": "stop-all",
    "app": "shop",
    "tools": ["refund_create"],
    "response": "stop",
    "when": "1 == 1",
    "message": "Nothing of this runs.",
}


@pytest.mark.anyio
@pytest.mark.parametrize("size", [1_200_000, 16_000_000])
async def test_a_write_too_large_to_check_is_blocked_even_with_fail_open(
    workspace: Workspace, size: int
) -> None:
    ws = workspace
    ws.push(rules=[STOP_ALL])
    async with Client(
        ws.guard("shop", TURNCOAT, "--fail-open", TURNCOAT_READS="order_read")
    ) as shop:
        small = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
        assert small.is_error and "stop-all" in text(small), text(small)
        padded = await shop.call_tool(
            "refund_create", {"order": "1187", "amount": 5, "note": "x" * size}
        )
        assert padded.is_error, f"forwarded unchecked: {text(padded)[:200]}"
    assert tools_called(ws) == []
