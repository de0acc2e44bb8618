"""tests/conftest.py's ``_long_tests_first``: the tests spread one by one start with the long
ones (marked ``slow``, then property tests), each kind in file order; tests grouped on one
worker keep their order after them; no test is dropped or added."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.conftest import _long_tests_first


def _property_test() -> None: ...


_property_test.is_hypothesis_test = True  # type: ignore[attr-defined]  # as hypothesis marks one


@dataclass
class Item:
    """What the ordering reads of a pytest item: its markers and its function."""

    name: str
    marks: set[str] = field(default_factory=set)
    obj: Any = None

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_slow_then_property_tests_then_the_rest_and_groups_keep_their_place() -> None:
    items = [
        Item("a"),
        Item("g1", {"xdist_group"}),
        Item("prop1", obj=_property_test),
        Item("slow1", {"slow"}),
        Item("g2", {"xdist_group", "slow"}),
        Item("b", obj=lambda: None),
        Item("slow2", {"slow"}, obj=_property_test),
        Item("prop2", obj=_property_test),
    ]
    ordered = _long_tests_first(items)  # type: ignore[arg-type]
    assert [i.name for i in ordered] == [
        "slow1", "slow2", "prop1", "prop2", "a", "b", "g1", "g2",
    ]  # fmt: skip
    assert _long_tests_first([]) == []
