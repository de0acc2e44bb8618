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
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value))
    if isinstance(value, str):
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            return None
    return None


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
    number = _number(value)
    return (0, number) if number is not None else (1, str(value))


def reduce_rows(rows: list[Any], op: str, field: str | None) -> Any:
    """count, or the first / last / min / max value of ``field`` (None when no row has it)."""
    if op == "count":
        return len(rows)
    if not field:
        raise ValueError(f"op {op} needs a field")
    values = [get_path(row, field) for row in rows]
    if op == "first":
        return values[0] if values else None
    if op == "last":
        return values[-1] if values else None
    present = [v for v in values if v is not None and not isinstance(v, dict | list)]
    if not present:
        return None
    if op == "min":
        return min(present, key=_key)
    if op == "max":
        return max(present, key=_key)
    raise ValueError(f"unknown op {op!r}")
