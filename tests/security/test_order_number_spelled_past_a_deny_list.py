"""Attack: the agent writes an order number in a spelling Claros does not read, one the
app reads all the same, past a rule that stops refunds on listed orders and lets an
undecided order through.

A rule on numbers by equality (``order in [1187, 1188]``: orders under dispute are not
refunded, ``order == 1187``, ``order != 1187``) compares the call's value with each number.
``"1_187"`` is no number to Claros's one parser, so ``in`` and ``==`` were undecided and
the rule answered by its ``on_unknown``; with ``allow`` (a refund without an order is the
shop's own default), the refund went on. An app that takes ``order: int`` (pydantic, as
the MCP SDK's servers validate their arguments) reads ``"1_187"`` as 1187.

Comparing by order (``<``, ``>``) already holds the rule for such a spelling
(test_amount_written_as_no_number_claros_reads.py); now equality and membership do too.
"""

from __future__ import annotations

import httpx
import pytest
from pydantic import TypeAdapter

from tests.api.conftest import Keys, put_rule
from tests.security.test_supplier_spelled_past_a_deny_list import _check


@pytest.mark.parametrize(
    "when", ["order in [1187, 1188]", "order == 1187", "not (order != 1187)", "order in disputed"]
)
def test_a_listed_order_spelled_another_way_holds_the_rule(
    http: httpx.Client, keys: Keys, when: str
) -> None:
    put_rule(http, keys.admin, id="disputed", response="stop", when=when, on_unknown="allow",
             message="Orders under dispute are not refunded")  # fmt: skip
    disputed = [1187, 1188]
    assert _check(http, keys, order=1187, disputed=disputed)["result"] == "stop"
    assert _check(http, keys, order="1187", disputed=disputed)["result"] == "stop"
    assert _check(http, keys, order=2001, disputed=disputed)["result"] == "allow"
    passed = []
    for spelling in ("1_187", "0_1187", "1_1_8_7"):
        assert TypeAdapter(int).validate_python(spelling) == 1187  # the app's reading
        answer = _check(http, keys, order=spelling, disputed=disputed)
        if answer["result"] != "stop":
            passed.append((spelling, answer["result"]))
    assert passed == [], f"refunded a disputed order written as {passed!r}"


def test_an_order_spelled_another_way_says_why_and_no_number_still_goes_by_on_unknown(
    http: httpx.Client, keys: Keys
) -> None:
    put_rule(http, keys.admin, id="disputed", response="stop", when="order in [1187]",
             on_unknown="allow", message="Orders under dispute are not refunded")  # fmt: skip
    entry = _check(http, keys, order="1_187")["rules"][0]
    assert entry["matched"] is True and entry["on_unknown"] == "fire", entry
    assert "written as a number Claros does not read" in entry["note"], entry
    for value in ("n/a", "", None):  # no number at all: as the rule says
        assert _check(http, keys, order=value)["result"] == "allow", value
