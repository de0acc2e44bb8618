"""Attack: write a number JSON has no spelling for into a record, then write against it.

The app keeps an order's total as a float taken with ``float()`` from what the caller
wrote, so the agent can set it to ``"nan"`` or ``"1e999"`` (infinity); its read tool
answers with Python's ``json.dumps``, which writes ``NaN`` and ``Infinity``. The guard read
that record for the next write's check and could not send it: the JSON encoder refused
the NaN, the exception went up through the check unhandled (a traceback in the guard's
log) and the agent got a JSON-RPC internal error saying only "Out of range float values
are not JSON compliant", not that the write was blocked, nor why (THREATS.md, 5: bad
input of any shape gets a reason, never a traceback).

A read whose answer holds a NaN or an infinity is a failed read, said as one, naming
where: the write is blocked (or forwarded and reported with ``--fail-open``, as for any
failed read).
"""

from __future__ import annotations

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.security.shop_rules import AT_MOST_THE_TOTAL, REFUND_READS_THE_ORDER, server_command

pytestmark = pytest.mark.anyio

FLOAT_SHOP = server_command("float_shop")


@pytest.mark.parametrize(("written", "read"), [("nan", "nan"), ("1e999", "inf")])
async def test_a_record_json_cannot_carry_is_a_failed_read(
    workspace: Workspace, written: str, read: str
) -> None:
    ws = workspace
    async with Client(ws.guard("shop", FLOAT_SHOP)) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        small = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
        assert not small.is_error, text(small)
        poisoned = await shop.call_tool("order_update", {"order": "1187", "total": written})
        assert not poisoned.is_error, text(poisoned)
        refund = await shop.call_tool("refund_create", {"order": "1187", "amount": 400})
    assert refund.is_error, text(refund)
    said = text(refund)
    assert said.startswith("Blocked: Claros needs facts the guard could not read"), said
    assert f"fetch.total is {read}, which is no number JSON can carry" in said, said
    assert tools_called(ws, "shop").count("refund_create") == 1
    # The small refund and the update were checked; the last refund decided nothing.
    checks = ws.records("check")
    assert [(c["tool"], c["result"]) for c in checks] == [
        ("refund_create", "allow"),
        ("order_update", "allow"),
    ]
