"""JSON in and out: numbers with a fraction parse as Decimal (money is never float)."""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from types import ModuleType
from typing import Any

__all__ = ["dumpb", "dumps", "load_writer", "loads"]

# orjson, the writer, imported by the first write (``_writer``): importing it imports
# dataclasses, inspect, uuid and platform, ~12 ms of CPU, which a process that only reads
# JSON (the Lambda authorizer) never needs. The HTTP functions write an answer at every
# request: their edge (claros.api.http) calls ``load_writer`` at import, so their init,
# not their first request, pays for it, as before.
_orjson: ModuleType | None = None
# Set with it: datetime and dataclass instances go to _default (a TypeError), as the
# stdlib sends them.
_OPTIONS = 0


def _writer() -> ModuleType:
    global _orjson, _OPTIONS
    if _orjson is None:
        import orjson

        _OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
        _orjson = orjson  # last: a thread that sees it sees _OPTIONS set
    return _orjson


def load_writer() -> ModuleType:
    """orjson, imported now if it was not: for a process that writes JSON at every
    request, and for the other writers of Claros (claros.canonical), which share its
    lazy import."""
    return _writer()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# Made once: json.loads with any keyword builds a new decoder (and its scanner) per call,
# which every stored doc and record read paid for.
_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_no_constant)


def loads(text: str | bytes) -> Any:
    """Parse JSON; NaN and Infinity (which Python would accept) are refused."""
    if isinstance(text, bytes | bytearray):
        # What json.loads does with bytes: find the UTF encoding, then decode.
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    elif not isinstance(text, str):
        raise TypeError(f"the JSON object must be str or bytes, not {type(text).__name__}")
    elif text.startswith("\ufeff"):  # as json.loads refuses it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        return _DECODER.decode(text)
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        # Python's own words name sys.set_int_max_str_digits(), which a client cannot use.
        limit = sys.get_int_max_str_digits()
        raise ValueError(f"a whole number of more than {limit:,} digits") from None


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        # Integral decimals stay exact as ints; others go out as the double they denote,
        # which is also what canonical JSON writes.
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


# Made once, as _DECODER: json.dumps with any keyword builds a new encoder per call, which
# costs more than writing a small value (the ledger writes several per check).
_ENCODER = json.JSONEncoder(default=_default, ensure_ascii=False, separators=(",", ":"))


def _fast_default(value: Any) -> Any:
    """_default for orjson: a non-finite Decimal goes out as the stdlib writes it (orjson
    would write a NaN float as null)."""
    out = _default(value)
    if isinstance(out, float) and not math.isfinite(out):
        return _writer().Fragment(_ENCODER.encode(out))
    return out


# orjson writes what _ENCODER writes (UTF-8 unescaped, the same escapes, insertion order,
# the shortest round-trip float) except a float's form between 1e-9 and 1e-4: "1e-05" is
# orjson's "0.00001", "1e-07" its "1e-7". Such a float, or anything that could look like
# one inside a string, sends the value to the stdlib writer instead: rare, and exact.
_DIGITS = frozenset(b"0123456789")


def _orjson_form_differs(out: bytes) -> bool:
    """Whether ``out`` may hold a float orjson writes unlike the stdlib. Plain substring
    searches, not a regular expression: this runs on every text (a regex scan of a 14 KB
    bucket costs more than writing it)."""
    if b"0.0000" in out:
        return True
    at = out.find(b"e-")
    while at != -1:
        # "1.5e-7": a digit before, one digit after (e-10 and beyond are alike in both).
        end = at + 3
        if (
            at
            and out[at - 1] in _DIGITS
            and end <= len(out)
            and out[at + 2] in _DIGITS
            and (end == len(out) or out[end] not in _DIGITS)
        ):
            return True
        at = out.find(b"e-", at + 2)
    return False


def dumpb(value: Any) -> bytes:
    """``dumps(value).encode()``, without the text in between: orjson writes UTF-8."""
    orjson = _writer()
    try:
        out: bytes = orjson.dumps(value, default=_fast_default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        # What orjson refuses and the stdlib writes or refuses in its own words: integers
        # beyond 64 bits, non-str keys, lone surrogates, deeper than 254 levels, cycles.
        return _ENCODER.encode(value).encode()  # a lone surrogate fails here, as it did
    if _orjson_form_differs(out):
        return _ENCODER.encode(value).encode()
    return out


def dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON text, compact (``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``
    with Decimal, set and tuple written), or indented for people to read."""
    if indent is None:
        orjson = _writer()
        try:
            out: bytes = orjson.dumps(value, default=_fast_default, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return _ENCODER.encode(value)  # see dumpb
        if _orjson_form_differs(out):
            return _ENCODER.encode(value)
        return out.decode()
    return json.dumps(value, default=_default, ensure_ascii=False, indent=indent)
