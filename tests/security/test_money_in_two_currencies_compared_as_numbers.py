"""THREATS.md §1 ("it cannot get a write past a rule by spelling"): two amounts written in
different currencies are not comparable as plain numbers.

The attack: a rule stops a refund larger than the order (``amount > order_total``); the
order's total is ``"10 EUR"``. The agent asks for ``"5 KWD"`` (about 15 EUR). The
expression language reads each money-like string as its number and drops the currency,
so it compares 5 with 10 and the refund passes. A comparison (or arithmetic) of two
amounts whose currencies are both written and differ should be undecidable, answering by
the rule's ``on_unknown`` (by default the rule fires).

Closed: each field's currency is read beside its number and checked wherever two amounts
meet, in a comparison or in arithmetic (claros/rules/expr.py); a derived value keeps its
one currency. ``"$5" == 5`` (a currency against a bare number) stays by design
(docs/rules.md).
"""

from __future__ import annotations

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from claros.rules.expr import evaluate, parse_when
from tests.api.conftest import Keys, bearer, check_body, put_rule


def test_a_refund_in_another_currency_is_not_compared_by_its_number(
    http: httpx.Client, keys: Keys
) -> None:
    put_rule(http, keys.admin, id="over-total", response="stop", when="amount > order_total",
             message="A refund is never larger than its order")  # fmt: skip
    body = check_body(arguments={"order": "1187", "amount": "5 KWD", "order_total": "10 EUR"})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == "stop", answer.json()


_CODES = st.sampled_from(["EUR", "USD", "KWD", "JPY", "GBP"])
_AMOUNTS = st.integers(min_value=0, max_value=10**9)
_COMPARISONS = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
# The left side as written in a rule: the field alone, or arithmetic over it.
_LEFT = st.sampled_from(["amount", "amount * 2", "-amount", "(amount + 1) * 3", "amount - 0"])


@given(_AMOUNTS, _CODES, _AMOUNTS, _CODES, _COMPARISONS, _LEFT)
@settings(max_examples=400, deadline=None, database=None)
def test_two_currencies_never_decide_a_rule(
    a: int, a_code: str, b: int, b_code: str, op: str, left: str
) -> None:
    """Whatever the numbers, a rule over amounts in two currencies is unknown, and over one
    currency it is the numbers' comparison."""
    facts = {"amount": f"{a} {a_code}", "order_total": f"{b} {b_code}"}
    outcome = evaluate(parse_when(f"{left} {op} order_total"), facts)
    if a_code != b_code:
        assert outcome == (None, ("amount", "order_total")), (facts, outcome)
    else:
        number = evaluate(parse_when(f"{left} {op} {b}"), {"amount": a})
        assert outcome == number, (facts, outcome, number)
