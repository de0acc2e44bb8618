"""Which fields of an answer to a write's question no rule reads by name, and which rules
read by name (claros_guard.answers, claros_guard.policy)."""

from __future__ import annotations

from claros_guard.answers import unread_fields
from claros_guard.policy import _by_name

SCHEMA = {"type": "object", "properties": {"order": {}, "amount": {}, "note": {}}}


def test_arguments_schema_arguments_and_yes_or_no_are_read() -> None:
    content = {"amount": 400, "note": "late", "confirm": True, "also": False}
    assert unread_fields(content, {"order": "1", "amount": 5}, SCHEMA) == []


def test_other_names_with_a_value_are_unread() -> None:
    content = {"refund_amount": 400, "reason": "x", "method": None, "confirm": True}
    assert unread_fields(content, {"order": "1"}, SCHEMA) == ["refund_amount", "reason", "method"]


def test_a_schema_without_properties_names_no_argument() -> None:
    assert unread_fields({"amount": 1}, {}, {"type": "object"}) == ["amount"]
    assert unread_fields({"amount": 1}, {}, None) == ["amount"]
    assert unread_fields({"amount": 1}, {"amount": 2}, "not a schema") == []


def test_rules_that_read_by_name_are_the_enforced_ones_with_a_when() -> None:
    answer = {
        "rules": [
            {"id": "cap", "mode": "enforce", "matched": False},
            {"id": "legacy", "matched": True},  # an entry without a mode: enforced
            {"id": "trial", "mode": "shadow", "matched": True},
            {"id": "judged", "mode": "enforce", "judged": True},
            "not an entry",
        ]
    }
    assert _by_name(answer) == ("cap", "legacy")
    assert _by_name({}) == ()
