"""find_amount's walk against the plain walk it replaced (kept here as the reference).

The walk skips the leaves that can be neither money nor a container without a call each,
caches key words per key and makes one Money at the end; the answer, the path and the
100,000-value budget must stay exactly those of the plain walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from claros.rules import amounts
from claros.rules.amounts import Money, find_amount, parse_money

FUZZ = settings(max_examples=1000, deadline=None, database=None)


class _PlainWalk:
    """The walk as it was first written: every value through ``value()``."""

    def __init__(self) -> None:
        self.best: Money | None = None
        self.seen = 0

    def offer(self, amount: Decimal, currency: str | None, path: str) -> None:
        if self.best is None or amount > self.best.amount:
            self.best = Money(amount, currency, path)

    def mapping(self, obj: Mapping[Any, Any], path: str, depth: int, outer: str | None) -> None:
        currency = self.own_currency(obj) or outer
        for key, value in obj.items():
            name = str(key)
            self.value(value, f"{path}.{name}" if path else name, depth + 1, currency, name)

    def own_currency(self, obj: Mapping[Any, Any]) -> str | None:
        for key, value in obj.items():
            if amounts._is_currency_key(str(key)):
                code = amounts._field_currency(value)
                if code is not None:
                    return code
        return None

    def value(self, value: Any, path: str, depth: int, currency: str | None, key: str) -> None:
        self.seen += 1
        if self.seen > amounts._MAX_VALUES:
            return
        matched = amounts._matches(key)
        if matched:
            self.candidate(value, path, currency)
        if depth >= amounts._MAX_DEPTH:
            return
        if isinstance(value, Mapping):
            self.mapping(value, path, depth, currency)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                self.value(item, f"{path}[{i}]", depth + 1, currency, key if matched else "")

    def candidate(self, value: Any, path: str, currency: str | None) -> None:
        if isinstance(value, str):
            parsed = parse_money(value)
            if parsed is not None:
                self.offer(parsed[0], parsed[1] or currency, path)
        elif isinstance(value, Mapping):
            self.wrapped(value, path, currency)
        else:
            number = amounts._decimal(value)
            if number is not None:
                self.offer(number, currency, path)

    def wrapped(self, obj: Mapping[Any, Any], path: str, outer: str | None) -> None:
        currency = self.own_currency(obj) or outer
        for key, value in obj.items():
            name = str(key)
            if name.lower() == "value" and not isinstance(value, Mapping | list | tuple):
                self.candidate(value, f"{path}.{name}", currency)
                return


def _plain(arguments: Any) -> Money | None:
    walk = _PlainWalk()
    if isinstance(arguments, Mapping):
        walk.mapping(arguments, "", 0, None)
    return walk.best


def _agree(arguments: Any) -> None:
    want, got = _plain(arguments), find_amount(arguments)
    assert got == want
    if got is not None and want is not None:
        assert str(got.amount) == str(want.amount)  # the same digits, not only the same value


keys = st.sampled_from(
    ["amount", "total", "unitPrice", "fee_eur", "summary", "qty", "id", "currency", "items"]
    + ["value", "Value", "priceCurrency", "x" * 201, "x" * 195 + "price", "", "prices"]
) | st.integers(0, 3)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.decimals(allow_nan=True, places=2)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["$1,200.50", "900 EUR", "EUR", "usd", "1.200,50 €", "12/05/2026", "€"])
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(keys, children, max_size=4)
        | st.dictionaries(keys, children, max_size=3).map(MappingProxyType)
    ),
    max_leaves=25,
)


@FUZZ
@given(st.dictionaries(keys, values, max_size=6))
def test_walk_agrees_with_the_plain_walk(arguments: dict[Any, Any]) -> None:
    _agree(arguments)


def test_value_budget_counts_skipped_leaves() -> None:
    for fill in (99_996, 99_997, 99_998):
        for tail in ([{"amount": 7}], ["7 EUR"]):
            _agree({"x": [0] * fill + tail, "fee": 1})
            _agree({"fees": [1] * fill + tail})
            _agree({"a": {str(i): "y" for i in range(fill)}, "b": {"total": 9, "c": tail}})


def test_depth_limit_with_skipped_leaves() -> None:
    for depth in (30, 31, 32, 33):
        nested: Any = {"amount": 5, "note": "x"}
        for _ in range(depth):
            nested = {"x": nested, "y": 1}
        _agree(nested)
        listed: Any = [5, "x"]
        for _ in range(depth):
            listed = [listed, 1]
        _agree({"prices": listed})
        _agree({"ids": listed})
