"""decide() keeps, with a RuleSet (the rules active_rules shares between checks), what it
works out once per call shape: the rules that apply, in order, their parsed ``when`` and
the fixed part of their entries. A decision from a RuleSet, first and again, is the one a
plain list gives."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from claros.rules.decide import RuleSet, decide
from claros.rules.expr import ExprError


def _rule(i: int, *, app: str = "shop", when: str | None = "amount > 100", **more: Any) -> Any:
    written = {
        "id": f"r{i}",
        "app": app,
        "tools": ["refund_create", "order_cancel"],
        "title": f"rule {i}",
        "response": ("stop", "ask", "nudge")[i % 3],
        **more,
    }
    if when is not None:
        written["when"] = when
    return {"id": f"r{i}", "version": i + 1, "hash": f"{i:064x}", "rule": written,
            "confirm": {"made_by": "manual", "confirmed_by": "dana@example.com"}}  # fmt: skip


RULES = [
    _rule(3),
    _rule(1, when="amount > 500 and reason == 'x'"),
    _rule(2, when="missing.field > 1", on_unknown="ask"),
    _rule(4, when=None),  # to the judge (none: not judged)
    _rule(5, mode="shadow"),
    _rule(0, app="bank", when="amount > 0"),
    _rule(6, when="amount < 0", on_unknown="allow"),
]


def _same(a: Any, b: Any) -> None:
    assert (a.result, a.rules, a.deciding, a.shadow_result, a.not_judged) == (
        b.result, b.rules, b.deciding, b.shadow_result, b.not_judged
    )  # fmt: skip


@pytest.mark.parametrize(
    ("app", "tool", "facts"),
    [
        ("shop", "refund_create", {"amount": Decimal("150"), "reason": "x"}),
        ("shop", "refund_create", {"amount": Decimal("900"), "reason": "x"}),
        ("shop", "order_cancel", {"amount": Decimal("5")}),
        ("bank", "refund_create", {"amount": Decimal("1")}),
        ("shop", "other_tool", {"amount": Decimal("1000")}),
    ],
)
def test_a_rule_set_decides_as_a_plain_list(app: str, tool: str, facts: dict[str, Any]) -> None:
    shared = RuleSet(copy.deepcopy(RULES))
    for _ in range(3):  # first (the plan made) and again (the plan kept)
        _same(decide(shared, app, tool, facts), decide(list(RULES), app, tool, facts))
    assert (app, tool) in shared.plans


def test_entries_are_each_checks_own() -> None:
    """An entry of one decision is changed by the check (matched, unknown...); the next
    decision's entries start from the rule again."""
    shared = RuleSet(copy.deepcopy(RULES))
    first = decide(shared, "shop", "refund_create", {"amount": Decimal("150")})
    first.rules[0]["matched"] = "changed"
    first.rules[0]["extra"] = 1
    again = decide(shared, "shop", "refund_create", {"amount": Decimal("150")})
    _same(again, decide(list(RULES), "shop", "refund_create", {"amount": Decimal("150")}))
    assert "extra" not in again.rules[0]


def test_a_when_that_does_not_parse_is_refused_every_time() -> None:
    shared = RuleSet([*copy.deepcopy(RULES), _rule(7, when="amount >")])
    for _ in range(2):
        with pytest.raises(ExprError):
            decide(shared, "shop", "refund_create", {"amount": Decimal("1")})
    assert not shared.plans
