"""Attack: make the record the guard reads for a check huge, and the guard stalls.

A record can be large: a field holding a pasted attachment, or text the agent itself
wrote through a write the rules allow. The guard read a wrapped server's stdout by
adding each 64 KiB chunk to what it held and splitting it all again: quadratic in the
length of a line. A 48 MB answer (a 24 MB note, as text and as structured content) held
the guard's event loop for most of a minute (every other call of the session waited with
it); a longer one ran into the read's timeout, a failure ``--fail-open`` forwards
unchecked. Past that, the record went whole to Claros, which takes at most 512 KiB of
records for one check.

The reader now keeps a line's chunks and joins them once the line ends (linear). And
answers read for a check that are larger than Claros takes fail the read at once, saying
so; the write is blocked with the reason, with ``--fail-open`` too (as Claros's 400 did).
"""

from __future__ import annotations

import resource

import pytest
from mcp import Client

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered
from tests.security.shop_rules import AT_MOST_THE_TOTAL, REFUND_READS_THE_ORDER, server_command

pytestmark = pytest.mark.anyio

BULKY_SHOP = server_command("bulky_shop")


def _children_cpu() -> float:
    """User and system CPU seconds of this process's children that have ended."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


async def test_a_huge_record_fails_the_read_with_the_reason(workspace: Workspace) -> None:
    ws = workspace
    params = ws.guard("shop", BULKY_SHOP, "--read-timeout", "60", BULKY_NOTE_MB="24")
    cpu_before = _children_cpu()
    async with Client(params, read_timeout_seconds=120) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        refund = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
    # Linear: reading 48 MB costs the guard and its server 3.4 s of CPU here, the quadratic
    # reader 23 s. CPU time, not wall time, so the machine's other work does not move it:
    # both are this test's children, waited for when the client closed.
    cpu = _children_cpu() - cpu_before
    assert 0.1 < cpu < 10, f"the guard and its server used {cpu:.1f} s of CPU over 48 MB"
    assert [c["tool"] for c in ws.calls()] == ["order_read"]
    assert refund.is_error, text(refund)
    assert "fetch read" in text(refund) and "524,288 bytes" in text(refund), text(refund)


async def test_an_answer_past_the_line_limit_fails_the_read_saying_so(workspace: Workspace) -> None:
    """An answer longer than the guard reads at all (64 MiB) is dropped; the read ends at
    its timeout, which now says why, and blocks with ``--fail-open`` too: the record is
    too large, not Claros or the app away."""
    ws = workspace
    params = ws.guard("shop", BULKY_SHOP, "--read-timeout", "5", "--fail-open", BULKY_NOTE_MB="40")
    async with Client(params, read_timeout_seconds=120) as shop:
        await wait_registered(ws, "shop", "refund_create")
        ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
        refund = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
    assert [c["tool"] for c in ws.calls()] == ["order_read"], "forwarded unchecked"
    assert refund.is_error, text(refund)
    assert "longer than 67,108,864 bytes" in text(refund), text(refund)
