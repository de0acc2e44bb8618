"""JSON in and out: numbers with a fraction parse as Decimal (money is never float)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

__all__ = ["dumps", "loads"]


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
    return _DECODER.decode(text)


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


def dumps(value: Any, *, indent: int | None = None) -> str:
    if indent is None:
        return _ENCODER.encode(value)  # what json.dumps does with these arguments
    return json.dumps(value, default=_default, ensure_ascii=False, indent=indent)
