"""Attack: the agent writes a name a deny list holds with a control character in it, one
a collating database still finds as that name (THREATS.md, 1: "it cannot get a write past
a rule by spelling").

A rule compares words as a lenient reader may take them (case, accents, compatibility
forms and invisible characters do not count: test_supplier_spelled_past_a_deny_list.py),
and holds when two words differ but read alike. Control characters counted: ``AC\\x01ME``,
``\\x00ACME``, ``ACME\\x7f`` or ``AC\\x90ME`` (a C1 control) was another word, and
``AC\\x1fME`` (a unit separator, which Python's ``str.split`` takes for a space) two
words, so ``supplier == "ACME"`` or ``supplier in [...]`` did not match and the write was
allowed. Unicode's collation algorithm weighs control characters nothing (DUCET:
``0001 ; [.0000.0000.0000]``), so a database collating case- and accent-insensitively
(MariaDB's ``utf8mb4_unicode_ci``) finds ACME for each: the payables app paid ACME.

Control characters other than the spaces (tab, line feed, vertical tab, form feed,
carriage return, next line) now do not count either: such a spelling holds the rule.
"""

# ruff: noqa: F811

from __future__ import annotations

import httpx
import pytest
from mcp import Client

from tests.api.conftest import Keys, put_rule
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text
from tests.security.test_supplier_spelled_past_a_deny_list import (
    BLOCKED_SUPPLIERS,
    PAYABLES,
    _check,
)

# Each is ACME to a collation that weighs control characters nothing.
SPELLINGS = [
    "AC\x01ME",
    "\x00ACME",
    "ACME\x00",
    "ACME\x7f",  # delete
    "AC\x1fME",  # a unit separator: a space to Python, nothing to a collation
    "A\x1cCME",  # a file separator
    "AC\x90ME",  # a C1 control
    "\x08ACME",  # a backspace
]


@pytest.mark.anyio
async def test_a_supplier_on_the_deny_list_is_not_paid_with_a_control_character(
    workspace: Workspace,
) -> None:
    ws = workspace
    ws.push(rules=[BLOCKED_SUPPLIERS])
    async with Client(ws.guard("payables", PAYABLES)) as payables:
        paid = []
        for spelling in SPELLINGS:
            result = await payables.call_tool("supplier_pay", {"supplier": spelling, "amount": 900})
            if not result.is_error:
                paid.append((spelling, text(result)))
        fine = await payables.call_tool("supplier_pay", {"supplier": "Globex", "amount": 900})
    assert paid == [], f"ACME paid past the deny list as {paid!r}"
    assert not fine.is_error, text(fine)
    assert [c["arguments"]["supplier"] for c in ws.calls()] == ["Globex"]


def test_every_such_spelling_holds_the_rule(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="acme", response="stop", when='supplier == "ACME"',
             on_unknown="allow", message="ACME is not paid")  # fmt: skip
    for spelling in SPELLINGS:
        answer = _check(http, keys, supplier=spelling)
        assert answer["result"] == "stop", (spelling, answer)
        assert "spelled" in answer["rules"][0]["note"], answer
    # The spaces among the control characters are spaces, as before: around a word they
    # do not count, inside one they part two words.
    assert _check(http, keys, supplier="\tACME\r\n")["result"] == "stop"
    assert _check(http, keys, supplier="Globex")["result"] == "allow"
    assert _check(http, keys, supplier="AC\tME")["result"] == "allow"
