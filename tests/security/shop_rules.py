"""What the attacks on fetching facts share (not a test module): a refund checked against
the total of the order it names, which the guard reads from the shop first; a customer's
refunds counted from the shop's history; and the shop servers of tests/security/servers
each attack runs behind the guard."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = [
    "AT_MOST_THE_TOTAL",
    "REFUNDS_COUNTED",
    "REFUND_READS_THE_ORDER",
    "THIRD_REFUND",
    "server_command",
]

SERVERS = Path(__file__).resolve().parent / "servers"

# The guard reads the order the refund names (order_read) before the check.
REFUND_READS_THE_ORDER: dict[str, Any] = {
    "app": "shop",
    "tool": "refund_create",
    "fetch": {"tool": "order_read", "arguments": {"order": "$order"}, "into": "order"},
}
# ... and the rule stops a refund over that order's total.
AT_MOST_THE_TOTAL: dict[str, Any] = {
    "id": "at-most-the-total",
    "app": "shop",
    "tools": ["refund_create"],
    "when": "amount > order.total",
    "response": "stop",
    "message": "A refund is at most the order's total.",
}

# The guard counts the customer's refunds so far (refund_list, filtered by customer) ...
REFUNDS_COUNTED: dict[str, Any] = {
    "app": "shop",
    "tool": "refund_create",
    "queries": [
        {
            "tool": "refund_list",
            "arguments": {"customer": "$customer"},
            "where": {"customer": "$customer"},
            "op": "count",
            "var": "refunds_before",
        }
    ],
}
# ... and a customer's third refund is stopped.
THIRD_REFUND: dict[str, Any] = {
    "id": "third-refund",
    "app": "shop",
    "tools": ["refund_create"],
    "when": "refunds_before >= 2",
    "response": "stop",
    "message": "A customer's third refund is made by a person.",
}


def server_command(name: str) -> list[str]:
    """The command that runs tests/security/servers/<name>.py."""
    return [sys.executable, str(SERVERS / f"{name}.py")]
