"""The agent writes a name a rule lists in another spelling, one the app still finds as
that name (THREATS.md, 1: "it cannot get a write past a rule by spelling").

A deny list (``supplier in ["ACME", "Initech"]``, ``supplier == "ACME"``: stop) compares
words by code point, so ``acme``, ``ACME `` (a trailing space), ``ÀCME``, ``ＡＣＭＥ``
(fullwidth letters, NFKC ``ACME``) or ``AC\u200bME`` (a zero-width space inside) is another
word: the rule does not match and the write is allowed. An app whose database collates
case- and accent-insensitively (MariaDB's ``utf8mb4_unicode_ci``, ERPNext's default;
``servers/collating_payables.py``) pays ACME. The same goes for ``"chargeback" in reason``
(``CHARGEBACK``, ``charge\u00adback``) and ``supplier != "ACME"``.

Nor may Claros guess the other way (``acme`` equal to ``ACME``): an allow list
(``supplier not in ["Globex"]``: stop) against an app that tells cases apart would then
let ``globex``, another supplier, through. Two words that differ only by case, spacing,
accents, compatibility forms or invisible characters are neither equal nor unequal: the
rule holds (it fires with its own response, whatever its ``on_unknown``, as a call the
judge cannot be asked about does), and its entry says why.
"""

# ruff: noqa: F811

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.api.conftest import Keys, bearer, check_body, put_rule
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, tools_called

PAYABLES = [
    sys.executable,
    str(Path(__file__).resolve().parent / "servers" / "collating_payables.py"),
]

# Each is ACME to a case- and accent-insensitive collation.
SPELLINGS = [
    "acme",
    "Acme",
    "ACME ",
    " ACME",
    "ACME\u00a0",  # a no-break space
    "\u00c0CME",  # À
    "A\u0301CME",  # A and a combining acute accent
    "\uff21\uff23\uff2d\uff25",  # fullwidth ＡＣＭＥ
    "AC\u200bME",  # a zero-width space inside
    "\ufeffACME",  # a byte order mark in front
    "ACM\u00adE",  # a soft hyphen
]


# The deny list the attacks spell their way past (here and in
# test_supplier_spelled_with_control_characters.py).
BLOCKED_SUPPLIERS = {
    "id": "blocked-suppliers",
    "app": "payables",
    "tools": ["supplier_pay"],
    "response": "stop",
    "when": 'supplier in ["ACME", "Initech"]',
    "message": "Payments to suppliers under investigation are stopped",
}


@pytest.mark.anyio
async def test_a_supplier_on_the_deny_list_is_not_paid_under_another_spelling(
    workspace: Workspace,
) -> None:
    ws = workspace
    ws.push(rules=[BLOCKED_SUPPLIERS])
    async with Client(ws.guard("payables", PAYABLES)) as payables:
        exact = await payables.call_tool("supplier_pay", {"supplier": "ACME", "amount": 900})
        assert exact.is_error, text(exact)
        fine = await payables.call_tool("supplier_pay", {"supplier": "Globex", "amount": 900})
        assert not fine.is_error, text(fine)
        assert tools_called(ws) == ["supplier_pay"]
        paid = []
        for spelling in SPELLINGS:
            result = await payables.call_tool("supplier_pay", {"supplier": spelling, "amount": 900})
            if not result.is_error:
                paid.append(spelling)
        assert paid == [], f"ACME paid past the deny list as {paid!r}"
        assert [c["arguments"]["supplier"] for c in ws.calls()] == ["Globex"]


def _check(http: httpx.Client, keys: Keys, **arguments: Any) -> dict[str, Any]:
    answer = http.post(
        "/v1/check", json=check_body(arguments=arguments), headers=bearer(keys.agent)
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.parametrize("when", ['supplier == "ACME"', 'supplier in ["ACME", "Initech"]',
                                  'not (supplier != "ACME")', 'supplier in blocked'])  # fmt: skip
@pytest.mark.parametrize("on_unknown", ["fire", "allow", "ask"])
def test_every_spelling_of_a_listed_word_holds_the_rule(
    http: httpx.Client, keys: Keys, when: str, on_unknown: str
) -> None:
    put_rule(http, keys.admin, id="acme", response="stop", when=when, on_unknown=on_unknown,
             message="ACME is not paid")  # fmt: skip
    blocked = ["Initech", "ACME"]
    assert _check(http, keys, supplier="ACME", blocked=blocked)["result"] == "stop"
    assert _check(http, keys, supplier="Globex", blocked=blocked)["result"] == "allow"
    for spelling in SPELLINGS:
        answer = _check(http, keys, supplier=spelling, blocked=blocked)
        assert answer["result"] == "stop", (spelling, answer)
        entry = answer["rules"][0]
        assert entry["matched"] is True, entry
        assert entry["unknown"] == ["supplier"] or "supplier" in entry["unknown"], entry
        assert entry["on_unknown"] == "fire", entry
        assert "spelled" in entry["note"], entry


def test_an_allow_list_is_not_loosened_by_the_same_spellings(
    http: httpx.Client, keys: Keys
) -> None:
    """``globex`` is not taken for Globex: a rule stopping every supplier but Globex still
    stops it, with ``on_unknown: allow`` too."""
    put_rule(http, keys.admin, id="only-globex", response="stop",
             when='supplier not in ["Globex"]', on_unknown="allow",
             message="Only Globex is paid from here")  # fmt: skip
    assert _check(http, keys, supplier="Globex")["result"] == "allow"
    for spelling in ("globex", "GLOBEX", "Globex ", "Glo\u200bbex", "\uff27lobex"):
        assert _check(http, keys, supplier=spelling)["result"] == "stop", spelling
    assert _check(http, keys, supplier=None)["result"] == "allow"  # on_unknown, as before


def test_a_phrase_in_another_case_or_with_invisible_characters_holds_the_rule(
    http: httpx.Client, keys: Keys
) -> None:
    put_rule(http, keys.admin, id="chargebacks", response="stop",
             when='"chargeback" in reason',
             message="Chargebacks go to the payments team")  # fmt: skip
    assert _check(http, keys, reason="customer opened a chargeback")["result"] == "stop"
    assert _check(http, keys, reason="damaged in transit")["result"] == "allow"
    for reason in ("customer opened a CHARGEBACK", "a Charge\u00adback is open",
                   "charge\u200bback filed", "\uff43hargeback",
                   "long story: " + "the parcel came late. " * 40 + "CHARGEBACK"):  # fmt: skip
        assert _check(http, keys, reason=reason)["result"] == "stop", reason


def test_dates_written_with_a_space_in_front_hold_the_rule(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="recent", response="stop",
             when='created_at >= "2026-10-01"', message="Recent orders wait")  # fmt: skip
    assert _check(http, keys, created_at="2026-11-02")["result"] == "stop"
    assert _check(http, keys, created_at="2026-09-02")["result"] == "allow"
    # " 2026-11-02" sorts before "2026-10-01" by code point; the app trims it.
    assert _check(http, keys, created_at=" 2026-11-02")["result"] == "stop"


def test_a_long_text_is_folded_once_per_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folding costs up to ~0.5 us a character beyond ASCII: a reason near the 1 MB body
    limit, read by many rules, is folded once per check, not once per rule (else forty
    rules over it would keep a check past the guard's 10 s, and ``--fail-open`` forwards
    the write unchecked)."""
    from claros.rules import expr
    from claros.rules.decide import decide

    folds: list[int] = []
    real = expr._fold_word

    def counted(text: str) -> str:
        folds.append(len(text))
        return real(text)

    monkeypatch.setattr(expr, "_fold_word", counted)
    rules = [
        {"id": f"r{i}", "version": 1, "hash": "h", "confirm": {},
         "rule": {"app": "shop", "tools": ["refund_create"], "response": "stop",
                  "when": f'"word{i}" in reason'}}
        for i in range(40)
    ]  # fmt: skip
    reason = "\u00e9t\u00e9 " * 20_000 + "WORD7"
    decision = decide(rules, "shop", "refund_create", {"reason": reason})
    assert decision.result == "stop"
    assert [r["id"] for r in decision.deciding] == ["r7"]
    assert folds == [len(reason)]
