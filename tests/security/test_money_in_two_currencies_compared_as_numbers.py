"""THREATS.md §1 ("it cannot get a write past a rule by spelling"): two amounts written in
different currencies are not comparable as plain numbers.

The attack: a rule stops a refund larger than the order (``amount > order_total``); the
order's total is ``"10 EUR"``. The agent asks for ``"5 KWD"`` (about 15 EUR). The
expression language reads each money-like string as its number and drops the currency,
so it compares 5 with 10 and the refund passes. A comparison (or arithmetic) of two
amounts whose currencies are both written and differ should be undecidable, answering by
the rule's ``on_unknown`` (by default the rule fires).

Left open: the fix threads currencies through the evaluator's cached numbers, arithmetic
and derived values (claros/rules/expr.py), more than this round's budget. ``"$5" == 5``
(a currency against a bare number) stays by design (docs/rules.md).
"""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import Keys, bearer, check_body, put_rule


@pytest.mark.xfail(
    strict=True,
    reason="money strings in two different currencies are compared by their numbers alone",
)
def test_a_refund_in_another_currency_is_not_compared_by_its_number(
    http: httpx.Client, keys: Keys
) -> None:
    put_rule(http, keys.admin, id="over-total", response="stop", when="amount > order_total",
             message="A refund is never larger than its order")  # fmt: skip
    body = check_body(arguments={"order": "1187", "amount": "5 KWD", "order_total": "10 EUR"})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == "stop", answer.json()
