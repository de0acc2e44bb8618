"""Query lookups on the guard's side: filter rows by ``where`` and reduce them to one value.

The guard applies ``where`` itself too, for servers that ignore their own filters, and only
the reduced value goes back to Claros, never the rows.

``where`` maps a field path to a value (equality) or to operators ``eq ne gt gte lt lte in``.
Numbers compare as numbers (``"120.50"`` counts as a number against a number), other
values as they are; ISO dates compare correctly as text. A row missing the field does not
match, except for ``ne``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from claros.paths import get_path

__all__ = ["filter_rows", "get_path", "reduce_rows", "row_matches"]


def _number(value: Any) -> Decimal | None:
    """The value as a finite number, or None. NaN and infinities ("NaN" in a row, or the
    NaN JSON parsers accept) are not numbers here: comparing a Decimal NaN raises."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        number = Decimal(str(value))
    elif isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            return None
    else:
        return None
    return number if number.is_finite() else None


def _pair(a: Any, b: Any) -> tuple[Any, Any] | None:
    x, y = _number(a), _number(b)
    if x is not None and y is not None and not (isinstance(a, str) and isinstance(b, str)):
        return x, y
    if type(a) is type(b) and isinstance(a, str | int | float | Decimal):
        return a, b
    return None


def _equal(a: Any, b: Any) -> bool:
    pair = _pair(a, b)
    return pair[0] == pair[1] if pair else bool(a == b)


_ORDERED: dict[str, Callable[[Any, Any], bool]] = {
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
}


def _holds(op: str, value: Any, expected: Any) -> bool:
    if op == "ne":
        return value is None or not _equal(value, expected)
    if value is None:
        return False
    if op == "eq":
        return _equal(value, expected)
    if op == "in":
        return isinstance(expected, list) and any(_equal(value, e) for e in expected)
    pair = _pair(value, expected)
    return pair is not None and _ORDERED[op](*pair)


def row_matches(row: Any, where: Mapping[str, Any]) -> bool:
    for path, condition in where.items():
        value = get_path(row, path)
        if isinstance(condition, Mapping):
            if not all(_holds(op, value, expected) for op, expected in condition.items()):
                return False
        elif not _holds("eq", value, condition):
            return False
    return True


def filter_rows(rows: Iterable[Any], where: Mapping[str, Any]) -> list[Any]:
    return [row for row in rows if row_matches(row, where)]


def _key(value: Any) -> tuple[int, Any]:
    # Numbers (and numeric text) before any other value, which compares as text: min and
    # max over mixed types give an answer, never a TypeError.
    number = _number(value)
    return (0, number) if number is not None else (1, str(value))


_OPS = frozenset({"count", "first", "last", "min", "max"})


def reduce_rows(rows: list[Any], op: str, field: str | None) -> Any:
    """``count`` of the rows, or of ``field`` the ``first`` / ``last`` value some row has,
    or the ``min`` / ``max`` of the values that are not objects or lists (numbers compare
    as numbers, numbers come before text). None when no row has a value to give."""
    if op not in _OPS:
        raise ValueError(f"unknown op {op!r}")
    if op == "count":
        return len(rows)
    if not field:
        raise ValueError(f"op {op} needs a field")
    # A row missing the field has nothing to say about it: the first value is the first
    # row's that has one, as min and max skip those rows too.
    values = [v for v in (get_path(row, field) for row in rows) if v is not None]
    if op == "first":
        return values[0] if values else None
    if op == "last":
        return values[-1] if values else None
    present = [v for v in values if not isinstance(v, dict | list)]
    if not present:
        return None
    return min(present, key=_key) if op == "min" else max(present, key=_key)
