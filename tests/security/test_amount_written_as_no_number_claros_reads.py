"""Attack: the agent writes the amount as a number in a spelling Claros does not read, one
the app reads all the same, past a rule that lets an undecided amount through.

A rule on an amount (``amount > 100``: stop) compares numbers, and money-like strings
are read with one parser (``$1,200.50``, ``900 EUR``). A string it cannot read is not a
number, so the comparison is undecided, and the rule answers by its ``on_unknown``. An
admin who wrote ``on_unknown: allow`` (a refund without an amount is the shop's own
default) let through every amount the agent wrote so: ``"400."``, ``".4e3"``, ``"4_00"``,
``"inf"``, ``"1e400"``. The shop's ``amount: float`` (the MCP SDK validates it with
pydantic, which reads all of these) refunded 400, or infinity, on an order of 20.

Words spelled another way already hold the rule whatever its ``on_unknown``
(test_supplier_spelled_past_a_deny_list.py): the agent wrote the spelling. A string
compared with a number that Claros cannot read but that holds a digit, or spells infinity
or NaN, now holds the rule too, and its entry says why.
"""

# ruff: noqa: F811

from __future__ import annotations

import httpx
import pytest
from mcp import Client

from tests.api.conftest import Keys, put_rule
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text
from tests.security.shop_rules import server_command
from tests.security.test_supplier_spelled_past_a_deny_list import _check

FLOAT_SHOP = server_command("float_shop")
UP_TO_100 = {
    "id": "refunds-up-to-100",
    "app": "shop",
    "tools": ["refund_create"],
    "when": "amount > 100",
    "on_unknown": "allow",  # no amount: the shop refunds its own default
    "response": "stop",
    "message": "Refunds over 100 are made by a person.",
}
# Each is a number over 100 to pydantic's float (the shop's amount), none to Claros.
# Padded or long, too: a reader that strips spaces or takes 70 digits reads them still.
SPELLINGS = ["400.", ".4e3", "4_00", "inf", "Infinity", "1e400", "+inf", "400." + " " * 70,
             " " * 70 + "inf", "4" * 70]  # fmt: skip


@pytest.mark.anyio
async def test_an_amount_claros_cannot_read_is_not_refunded(workspace: Workspace) -> None:
    ws = workspace
    ws.push(rules=[UP_TO_100])
    async with Client(ws.guard("shop", FLOAT_SHOP)) as shop:
        refunded = []
        for spelling in SPELLINGS:
            result = await shop.call_tool("refund_create", {"order": "1187", "amount": spelling})
            if not result.is_error:
                refunded.append((spelling, text(result)))
        small = await shop.call_tool("refund_create", {"order": "1187", "amount": "5"})
    assert refunded == [], f"refunded past 'over 100 is stopped' as {refunded!r}"
    assert not small.is_error, text(small)


def test_a_number_claros_cannot_read_holds_the_rule(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="big", response="stop", when="amount > 100",
             on_unknown="allow", message="big")  # fmt: skip
    for spelling in [*SPELLINGS, "1,000", "\u0664\u0660\u0660", "(400)", "0x190", "nan"]:
        answer = _check(http, keys, amount=spelling)
        assert answer["result"] == "stop", (spelling, answer)
        entry = answer["rules"][0]
        assert entry["matched"] is True and entry["on_unknown"] == "fire", entry
        assert "written as a number Claros does not read" in entry["note"], entry
    # What is no number at all, or missing, answers by on_unknown as before.
    for value in ("n/a", "", None):
        assert _check(http, keys, amount=value)["result"] == "allow", value
    assert _check(http, keys, amount="400")["result"] == "stop"
    assert _check(http, keys, amount="5")["result"] == "allow"
