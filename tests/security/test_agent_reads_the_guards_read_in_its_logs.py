"""Attack: read the guard's own reads in the server's log messages.

fetching-facts.txt: "The guard calls those read tools on the wrapped server itself. The
agent never sees these calls." A server may log what a tool does
(``notifications/message``); the guard relayed every log message to the agent, those of
its own reads too. So the agent saw each read the guard ran for a check, with its
arguments and the record (here an order's fraud-review note the agent's own reads are
never shown, as its client never calls ``order_read``): what the guard reads and when,
to time a change of the record between the read and the write.

Log messages the server sends while a read of the guard's own runs are not relayed (over
stdio a notification does not say which call it belongs to): they go to the guard's own
log at debug level. The agent's own calls log as before.
"""

from __future__ import annotations

import warnings

import anyio
import pytest
from mcp import Client
from mcp_types import LoggingMessageNotificationParams

from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered
from tests.security.shop_rules import AT_MOST_THE_TOTAL, REFUND_READS_THE_ORDER, server_command

pytestmark = pytest.mark.anyio

LOGGING_SHOP = server_command("logging_shop")


async def test_the_guards_reads_are_not_in_the_agents_logs(workspace: Workspace) -> None:
    ws = workspace
    logs: list[str] = []
    written = anyio.Event()

    async def logged(params: LoggingMessageNotificationParams) -> None:
        logs.append(str(params.data))
        if "refund_create" in str(params.data):
            written.set()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the logging capability is deprecated (2026-07-28)
        async with Client(ws.guard("shop", LOGGING_SHOP), logging_callback=logged) as shop:
            await wait_registered(ws, "shop", "refund_create")
            ws.push(rules=[AT_MOST_THE_TOTAL], mappings=[REFUND_READS_THE_ORDER])
            refund = await shop.call_tool("refund_create", {"order": "1187", "amount": 5})
            assert not refund.is_error, text(refund)
            with anyio.fail_after(10):  # the write's own log comes: the agent's is relayed
                await written.wait()
    assert [c["tool"] for c in ws.calls()] == ["order_read", "refund_create"]
    seen = [line for line in logs if "order_read" in line]
    assert seen == [], f"the agent read the guard's read in the logs: {seen}"
    assert logs == ["refund_create 1187: 5.0"], logs
