"""claros.jsonutil's writer: orjson writes it, and its text is byte for byte what the
stdlib writer it replaced gives (stored texts, answers and bucket splices compare and hash
these bytes), including where orjson's own form differs and the stdlib writes instead."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claros import jsonutil


def _stdlib(value: Any) -> str:
    """What jsonutil.dumps wrote before orjson (its encoder, verbatim)."""
    return json.JSONEncoder(
        default=jsonutil._default, ensure_ascii=False, separators=(",", ":")
    ).encode(value)


def _same(value: Any) -> None:
    expected = _stdlib(value)
    assert jsonutil.dumps(value) == expected
    try:
        encoded = expected.encode()
    except UnicodeEncodeError:  # a lone surrogate: dumpb fails as dumps(value).encode() did
        with pytest.raises(UnicodeEncodeError):
            jsonutil.dumpb(value)
    else:
        assert jsonutil.dumpb(value) == encoded


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: the stdlib writes those
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # lone surrogates, control characters, U+2028, all of it
    | st.decimals(allow_nan=False, allow_infinity=False)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=1500)
@given(_values)
def test_the_text_is_the_stdlib_writers_byte_for_byte(value: Any) -> None:
    _same(value)


@pytest.mark.parametrize(
    "value",
    [
        # Floats where orjson's form differs ("0.00001", "1e-7"): the stdlib writes them.
        1e-05, 1.2345e-07, -3.7e-09, 9.99e-05, 1e-4, 1e-10, 1e16, 5e-324, -0.0, 100.0,
        {"rate": 3.6958401919459195e-05, "n": 1}, [Decimal("0.00001234")],
        # Strings that only look like such floats: still the same text.
        "0.00001", "v3e-5", {"k": "a,0.0000"},
        # orjson refuses these; the stdlib writes them.
        2**64, -(2**63) - 1, {1: "int key", None: "none key", 2.5: "float key", False: "b"},
        "\ud800 lone surrogate", {"\udfff": 1}, [[[[]]]] * 3,
        # Control characters, DEL, the line separators, non-ASCII: written unescaped alike.
        "\x00\x1f\x7f\u2028\u2029 \"\\ é 日本 \x08\x0c\n\r\t/",
        Decimal("12.50"), Decimal("1E+3"), Decimal("-0"), {1, 2}, frozenset({"a"}), (1, "x"),
    ],
)  # fmt: skip
def test_the_edges_are_the_stdlib_writers(value: Any) -> None:
    _same(value)


def test_deeper_than_orjson_goes_is_still_written() -> None:
    deep: Any = 0
    for _ in range(400):  # orjson stops at 254 levels
        deep = [deep]
    _same(deep)


def test_a_nan_decimal_goes_out_as_the_stdlib_writes_it() -> None:
    # orjson would write a NaN float as null.
    _same({"x": Decimal("NaN")})
    assert jsonutil.dumps([Decimal("NaN")]) == "[NaN]"


@pytest.mark.parametrize("value", [Decimal("Infinity"), Decimal("-Infinity"), Decimal("sNaN")])
def test_an_infinite_or_signalling_decimal_fails_as_it_did(value: Decimal) -> None:
    with pytest.raises(ArithmeticError) as stdlib:
        _stdlib([value])
    with pytest.raises(type(stdlib.value)):
        jsonutil.dumps([value])
    with pytest.raises(type(stdlib.value)):
        jsonutil.dumpb([value])


@dataclasses.dataclass
class _Row:
    n: int


@pytest.mark.parametrize(
    "value",
    [
        object(),
        _Row(1),  # orjson would write a dataclass; the stdlib refuses it
        datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
        datetime.date(2026, 1, 2),
        {"nested": [object()]},
    ],
)
def test_what_the_stdlib_refuses_is_refused_in_its_words(value: Any) -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        json.JSONEncoder(default=jsonutil._default).encode(value)
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonutil.dumps(value)
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonutil.dumpb(value)


def test_a_cycle_is_refused() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        jsonutil.dumps(cycle)


def test_indented_text_is_the_stdlibs() -> None:
    value = {"b": [1, Decimal("2.5")], "a": "é"}
    assert jsonutil.dumps(value, indent=2) == json.dumps(
        value, default=jsonutil._default, ensure_ascii=False, indent=2
    )


def test_what_it_writes_reads_back() -> None:
    value = {"amount": Decimal("12.5"), "tiny": Decimal("0.000001"), "big": 2**70, "s": "é"}
    back = jsonutil.loads(jsonutil.dumpb(value))
    assert back == {"amount": Decimal("12.5"), "tiny": Decimal("0.000001"), "big": 2**70, "s": "é"}
    assert math.isfinite(float(back["tiny"]))
