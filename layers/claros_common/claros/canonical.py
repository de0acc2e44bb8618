"""Canonical JSON, exactly as the evidence page defines it.

Sorted keys, no spaces, UTF-8, and every object field whose value is null, "", [] or {}
left out at every depth (a nested object that becomes empty once its own empty fields are
dropped is left out too). Numbers are written as RFC 8785 writes them: the ECMAScript
shortest round-trip form of the IEEE 754 double. Keys sort by their UTF-16 code units, as
RFC 8785 asks. List elements are kept in place, even empty ones: dropping them would move
their neighbours.

Money arrives as ``Decimal`` (request bodies are parsed with ``parse_float=Decimal``);
it is written like any other number, through its double value.

Speed: the ledger canonicalizes every row it writes, so the common case is one pass in
Python that prunes, checks keys and settles numbers (``_settle``), then a C writer writes the
text: orjson for the bytes the ledger hashes (``canonical_bytes``), the stdlib's C encoder
for the text (``canonical``). On a settled value both write what RFC 8785 writes: keys
sorted by code point, the same escapes (``"``, ``\\`` and the controls, ``\\b \\t \\n \\f
\\r`` short, the others as lowercase ``\\u00XX``), other characters as UTF-8, integers within
2**53 in full, and a float only where its shortest round-trip form has no exponent, which
both write alike. Where neither would write RFC 8785's form (a number Python writes in
exponent form, an integer past 2**53, a key outside the Basic Multilingual Plane, whose
UTF-16 order differs from code-point order), the value is written by the reference writer
(``_write``) instead; whatever orjson refuses (a lone surrogate, nesting past its limit, a
number ``_default`` refuses) goes the stdlib's way, so the answer, text or error, is the
one that path gives. Tests cross-check the writers, and all against the ``rfc8785``
package.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from claros.jsonutil import load_writer

__all__ = [
    "CanonicalError",
    "canonical",
    "canonical_bytes",
    "format_number",
    "is_empty",
    "out_of_range",
    "reference_canonical",
]

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


def out_of_range(value: object) -> CanonicalError:
    """The error for a number canonical JSON cannot write, showing at most its first 40
    characters (a 4,000-digit number sent back whole in a 400 is no help to read)."""
    text = str(value)
    shown = text if len(text) <= 40 else f"{text[:40]}... ({len(text):,} characters)"
    return CanonicalError(f"number out of range: {shown}")


def is_empty(value: Any) -> bool:
    """The values the spec leaves out: null, "", [] and {}."""
    return value is None or (isinstance(value, str | list | tuple | dict) and len(value) == 0)


def canonical(value: Any) -> str:
    """The canonical JSON text of ``value``; a top-level empty value gives ``{}``/``""`` etc."""
    try:
        text: str = _ENCODER.encode(_settle(value))
    except ValueError as exc:  # _default's CanonicalError comes back wrapped by the encoder
        if isinstance(exc, CanonicalError):
            raise
        raise CanonicalError(str(exc)) from exc
    except _Slow:
        return reference_canonical(value)
    # isascii() is O(1) (CPython keeps the flag); only text with a character past the BMP
    # needs its keys looked at.
    if not text.isascii() and max(text) > _MAX_BMP and _astral_key(value):
        return reference_canonical(value)
    return text


def reference_canonical(value: Any) -> str:
    """The same text as :func:`canonical`, written one token at a time: the reference the
    fast path is tested against, and what writes the values the fast path cannot."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


class _Slow(Exception):
    """The C encoder would not write this value as RFC 8785 does."""


def _default(value: Any) -> int | float:
    """What the C encoder writes for a value it does not know: Decimals, as their double."""
    if type(value) is Decimal:
        try:
            return _settle_float(float(value))
        except ValueError:  # CanonicalError for NaN and infinity, ValueError for sNaN
            raise out_of_range(value) from None
    if isinstance(value, Decimal):
        return _settle_number(value)
    raise CanonicalError(f"not a JSON value: {type(value).__name__}")  # pragma: no cover


# sort_keys orders by code point, which is UTF-16 order for keys inside the BMP (checked in
# _settle); ensure_ascii=False escapes exactly what RFC 8785 escapes (", \\, controls).
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, check_circular=False, sort_keys=True,
    separators=(",", ":"), default=_default,
)  # fmt: skip
_MAX_BMP = "\uffff"
_CONTAINERS = (dict, list)
_DROP = object()  # what _settle_item answers for an empty value


def _settle(value: Any) -> Any:
    """``value`` pruned, with every number in a form the C encoder writes as RFC 8785 does.

    It runs on every ledger append, so it copies only what changes: a dict or list with
    nothing to prune or rewrite is returned as it is (Decimals stay, for ``_default``)."""
    found = _settle_item(value)
    if found is _DROP:  # a top-level empty value is written as itself
        return (
            [] if isinstance(value, list | tuple) else {} if isinstance(value, Mapping) else value
        )
    return found


def _settle_item(
    item: Any,
    _str: type = str,
    _int: type = int,
    _bool: type = bool,
    _float: type = float,
    _dict: type = dict,
    _list: type = list,
    _low: int = -_MAX_SAFE_INT,
    _high: int = _MAX_SAFE_INT,
) -> Any:
    """``item`` settled, or _DROP when it is empty (null, "", [] or {} once pruned).

    The builtins and bounds are default arguments: locals are read faster than globals,
    and this runs once per value of every row the ledger writes."""
    kind = type(item)
    if kind is _str:
        return item if item else _DROP
    if kind is _int:
        if _low <= item <= _high:
            return item
        raise _Slow
    if kind is _dict:
        return _settle_dict(item)
    if kind is _list:
        return _settle_list(item)
    if kind is _bool:
        return item
    if item is None:
        return _DROP
    if kind is _float:
        return _settle_float(item)
    if kind is Decimal:
        return item  # _default settles it while the encoder writes it (NaN is refused there)
    return _settle_other(item)


def _settle_other(item: Any) -> Any:
    """Subclasses and other containers (str enums, MappingProxyType, tuples, IntEnum ...),
    as their plain values."""
    if isinstance(item, Mapping):
        return _copy_from({}, "", _DROP, iter(item.items()))
    if isinstance(item, list | tuple):
        return _settle_list(item, copy=True)
    if isinstance(item, str):
        return str.__str__(item) if item else _DROP  # the text itself, not an enum name
    if isinstance(item, bool):
        return bool(item)
    if isinstance(item, int | float | Decimal):
        return _settle_number(item)
    raise CanonicalError(f"not a JSON value: {type(item).__name__}")


def _settle_dict(  # noqa: C901 - one loop, unrolled by type for speed
    value: Mapping[Any, Any],
    _str: type = str,
    _int: type = int,
    _bool: type = bool,
    _dict: type = dict,
    _list: type = list,
    _low: int = -_MAX_SAFE_INT,
    _high: int = _MAX_SAFE_INT,
) -> Any:
    """``value`` itself when nothing in it changes, else a pruned copy.

    The first loop only looks (most fields of most rows need nothing), with scalars checked
    inline: a call per field would double the cost. At the first field that changes, the copy
    starts from the fields before it, and the second loop goes on from there."""
    items = iter(value.items())
    for key, item in items:
        if type(key) is not _str:
            break
        kind = type(item)
        if kind is _str:
            if item:
                continue
            break
        if kind is _int:
            if _low <= item <= _high:
                continue
            raise _Slow
        if kind is _bool or kind is Decimal:
            continue
        if kind is _dict:
            new = _settle_dict(item)
            if new is item:
                continue
        elif kind is _list:
            new = _settle_list(item)
            if new is item:
                continue
        else:
            new = _settle_item(item)
            if new is item:
                continue
        return _copy_from(value, key, new, items)
    else:
        return value if value else _DROP
    # A key that is not a plain str.
    return _copy_from(value, key, _settle_item(item), items)


def _copy_from(
    value: Mapping[Any, Any], key: Any, new: Any, rest: Iterator[tuple[Any, Any]]
) -> Any:
    kept = _before(value, key)
    plain = _key(key)  # refused even when its value is empty
    if new is not _DROP:
        kept[plain] = new
    for key, item in rest:
        plain = _key(key)
        new = _settle_item(item)
        if new is not _DROP:
            kept[plain] = new
    return kept if kept else _DROP


def _before(value: Mapping[Any, Any], stop: Any) -> dict[str, Any]:
    """The items of ``value`` before key ``stop``: all kept unchanged so far."""
    out = {}
    for key, item in value.items():
        if key is stop:
            break
        out[key] = item
    return out


def _settle_list(value: Sequence[Any], copy: bool = False, _dict: Any = dict) -> Any:
    """List elements are kept in place, even empty ones (pruned inside)."""
    kept: list[Any] | None = [] if copy else None
    for i, item in enumerate(value):
        if type(item) is _dict:
            new = _settle_dict(item)
            if new is item and kept is None:
                continue
        else:
            new = _settle_item(item)
        if new is _DROP:
            new = _empty_of(item)
        if kept is None:
            if new is item:
                continue
            kept = list(value[:i])
        kept.append(new)
    if kept is None:
        return value if value else _DROP
    return kept if kept else _DROP


def _empty_of(item: Any) -> Any:
    """An empty list element as the reference writes it: null, "", [] or {}."""
    if item is None:
        return None
    if isinstance(item, str):
        return ""
    if isinstance(item, list | tuple):
        return []
    return {}


def _key(key: Any) -> str:
    if type(key) is str:
        return key
    if not isinstance(key, str):
        raise CanonicalError(f"object key is not a string: {key!r}")
    return str.__str__(key)  # the text itself, not an enum name


def _astral_key(value: Any) -> bool:
    """Whether a key holds a character outside the BMP, where UTF-16 order (RFC 8785's)
    differs from the code-point order sort_keys uses."""
    if isinstance(value, Mapping):
        return any(
            (not k.isascii() and max(k) > _MAX_BMP) or _astral_key(v) for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return any(_astral_key(v) for v in value)
    return False


def _settle_float(value: float) -> int | float:
    """The fast form of :func:`_settle_number` for a float. Python's repr uses exponent form
    below 1e-4 and from 1e16 on; every float from 2**52 on is whole, so a fraction needs the
    exponent only below 1e-4."""
    if value - value != 0.0:  # NaN or infinity
        raise out_of_range(value)
    if value.is_integer():
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return int(value)
        raise _Slow
    if -1e-4 < value < 1e-4:
        raise _Slow
    return value


def _settle_number(value: int | float | Decimal) -> int | float:
    """An int where the double is a whole number within 2**53 (written in full by both), the
    float itself where Python's repr is already the ECMAScript form; anything else is slow."""
    if isinstance(value, int) and -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
        return int(value)
    try:
        number = float(value)
    except (OverflowError, ValueError) as exc:  # ValueError: Decimal("sNaN")
        raise out_of_range(value) from exc
    if math.isnan(number) or math.isinf(number):
        raise out_of_range(value)
    if number.is_integer():
        if -_MAX_SAFE_INT <= number <= _MAX_SAFE_INT:
            return int(number)
        raise _Slow
    if "e" in repr(number):
        raise _Slow
    return number


# A character outside the Basic Multilingual Plane, in UTF-8: a lead byte of four.
_ASTRAL_UTF8 = re.compile(rb"[\xf0-\xf4]")


def canonical_bytes(value: Any) -> bytes:
    """:func:`canonical`'s text as UTF-8: the bytes the ledger hashes. Written by orjson
    from the settled value (~5x the stdlib encoder's speed on a check row with 20 rule
    references); anything orjson refuses takes :func:`canonical`'s way."""
    # orjson imported by the first call (claros.jsonutil says why): the authorizer, which
    # imports the ledger's module but never hashes, does not load it.
    orjson = load_writer()
    try:
        out: bytes = orjson.dumps(_settle(value), default=_default, option=orjson.OPT_SORT_KEYS)
    except (_Slow, orjson.JSONEncodeError):
        return _text_bytes(value)
    # isascii() on bytes is one C pass; only text with a character past the BMP needs its
    # keys looked at (orjson sorts keys by code point, as sort_keys does).
    if not out.isascii() and _ASTRAL_UTF8.search(out) and _astral_key(value):
        return _text_bytes(value)
    return out


def _text_bytes(value: Any) -> bytes:
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
        raise out_of_range(value) from exc
    if math.isnan(number) or math.isinf(number):
        raise out_of_range(value)
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
