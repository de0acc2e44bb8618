"""A rule whose ``when`` can never be true is saved without a word (docs/rules.md,
"Warnings"; this round's brief: "a rule that can never fire (accepted silently?)").

``when: 'false'`` (left from a test), ``when: '0 > 1'``, or a ``when`` that is a value and
not a condition (``amount + 1``, ``'refund'``: never true or false, so always unknown) with
``on_unknown: allow``: the rule never applies, on any call, and saving it said nothing. The
admin believes refunds are guarded. Closed: saving warns of a ``when`` that holds on no
call (it reads no field and is false) and of one that is not a condition (its value is
never true or false, so the rule always answers by its ``on_unknown``).
"""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import Keys, put_rule


@pytest.mark.parametrize("when", ["false", "0 > 1", "not true", "1 == 2 and 2 == 2"])
def test_a_when_false_on_every_call_is_warned(http: httpx.Client, keys: Keys, when: str) -> None:
    state = put_rule(http, keys.admin, when=when, response="stop")
    assert state["version"] == 1
    warnings = state.get("warnings") or []
    assert any("false on every call" in w for w in warnings), warnings


@pytest.mark.parametrize("when", ["amount + 1", "'refund'", "-amount", "[amount]", "12"])
def test_a_when_that_is_not_a_condition_is_warned(
    http: httpx.Client, keys: Keys, when: str
) -> None:
    state = put_rule(http, keys.admin, when=when, response="stop", on_unknown="allow")
    warnings = state.get("warnings") or []
    assert any("not a condition" in w for w in warnings), warnings


@pytest.mark.parametrize("when", ["true", "1 == 1", "refund_flagged", "amount > 5"])
def test_conditions_are_not_warned_for_it(http: httpx.Client, keys: Keys, when: str) -> None:
    state = put_rule(http, keys.admin, when=when, response="stop")
    warnings = state.get("warnings") or []
    assert not any("not a condition" in w or "every call" in w for w in warnings), warnings
