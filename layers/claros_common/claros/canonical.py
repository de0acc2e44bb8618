"""Canonical JSON, exactly as the evidence page defines it.

Sorted keys, no spaces, UTF-8, and every object field whose value is null, "", [] or {}
left out at every depth (a nested object that becomes empty once its own empty fields are
dropped is left out too). Numbers are written as RFC 8785 writes them: the ECMAScript
shortest round-trip form of the IEEE 754 double. Keys sort by their UTF-16 code units, as
RFC 8785 asks. List elements are kept in place, even empty ones: dropping them would move
their neighbours.

Money arrives as ``Decimal`` (request bodies are parsed with ``parse_float=Decimal``);
it is written like any other number, through its double value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = ["CanonicalError", "canonical", "canonical_bytes", "format_number", "is_empty"]

_MAX_SAFE_INT = 2**53
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


class CanonicalError(ValueError):
    """The value cannot be written as canonical JSON (NaN, infinity, a bad string, a set...)."""


def is_empty(value: Any) -> bool:
    """The values the spec leaves out: null, "", [] and {}."""
    return value is None or (isinstance(value, str | list | tuple | dict) and len(value) == 0)


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value``; a top-level empty value gives ``{}``/``""`` etc."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def canonical_bytes(value: Any) -> bytes:
    try:
        return canonical(value).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate cannot be UTF-8
        raise CanonicalError(f"string is not valid Unicode: {exc.reason}") from exc


def _prune(value: Any) -> Any:
    """Drop empty fields at every depth; returns the pruned value (may itself be empty)."""
    if isinstance(value, Mapping):
        kept = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(f"object key is not a string: {key!r}")
            item = _prune(item)
            if not is_empty(item):
                kept[key] = item
        return kept
    if isinstance(value, list | tuple):
        return [_prune(item) for item in value]
    return value


def _write(value: Any, out: list[str]) -> None:
    if isinstance(value, Mapping):
        _write_object(value, out)
    elif isinstance(value, str):
        _write_string(value, out)
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    elif isinstance(value, int | float | Decimal):
        out.append(format_number(value))
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(_prune(item), out)
        out.append("]")
    else:
        raise CanonicalError(f"not a JSON value: {type(value).__name__}")


def _write_object(value: Mapping[Any, Any], out: list[str]) -> None:
    items = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise CanonicalError(f"object key is not a string: {key!r}")
        item = _prune(item)
        if not is_empty(item):
            items.append((key.encode("utf-16-be", "surrogatepass"), key, item))
    items.sort(key=lambda t: t[0])
    out.append("{")
    for i, (_, key, item) in enumerate(items):
        if i:
            out.append(",")
        _write_string(key, out)
        out.append(":")
        _write(item, out)
    out.append("}")


def _write_string(value: str, out: list[str]) -> None:
    out.append('"')
    start = 0
    for i, ch in enumerate(value):
        if ch in _ESCAPES or ch < " ":
            out.append(value[start:i])
            out.append(_ESCAPES.get(ch) or f"\\u{ord(ch):04x}")
            start = i + 1
    out.append(value[start:])
    out.append('"')


def format_number(value: int | float | Decimal) -> str:
    """A number as RFC 8785 (ECMAScript Number.prototype.toString) writes it."""
    if isinstance(value, bool):
        raise CanonicalError("a boolean is not a number")
    if isinstance(value, int) and -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
        return str(value)
    try:
        number = float(value)
    except (OverflowError, ValueError) as exc:  # ValueError: Decimal("sNaN")
        raise CanonicalError(f"number out of range: {value}") from exc
    if math.isnan(number) or math.isinf(number):
        raise CanonicalError(f"number out of range: {value}")
    if number == 0:
        return "0"
    if number < 0:
        return "-" + _format_positive(-number)
    return _format_positive(number)


def _format_positive(number: float) -> str:
    mantissa, _, exp_text = repr(number).partition("e")
    int_part, _, frac = mantissa.partition(".")
    digits = int_part + frac
    n = len(int_part) + (int(exp_text) if exp_text else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + s
    e = n - 1
    sign = "+" if e >= 0 else "-"
    head = s if k == 1 else s[0] + "." + s[1:]
    return f"{head}e{sign}{abs(e)}"
