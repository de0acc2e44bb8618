"""Canonical JSON (claros.canonical) against the shared vectors, properties and node."""

from __future__ import annotations

import enum
import json
import math
import random
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from decimal import ROUND_FLOOR, Decimal, localcontext
from types import MappingProxyType
from typing import Any
from unittest.mock import patch

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from claros import canonical as canonical_module
from claros import jsonutil
from claros.canonical import (
    CanonicalError,
    canonical,
    canonical_bytes,
    format_number,
    is_empty,
    reference_canonical,
)
from tests.vectors import CanonicalVector, InvalidCanonicalVector, load_canonical_vectors

VECTORS = load_canonical_vectors()
PARSERS: dict[str, Callable[[str], Any]] = {"decimal": jsonutil.loads, "float": json.loads}
FAST = settings(max_examples=150, deadline=None, database=None)


# --- the shared vectors ------------------------------------------------------------------


def test_vector_file_is_well_formed() -> None:
    names = [v.name for v in VECTORS.valid] + [v.name for v in VECTORS.invalid]
    assert len(names) == len(set(names)), "vector names must be unique"
    assert len(VECTORS.valid) >= 90
    for v in VECTORS.valid:
        # The expected text is itself canonical: no whitespace between tokens, valid JSON.
        json.loads(v.canonical)


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("vector", VECTORS.valid, ids=lambda v: v.name)
def test_canonical_vector(vector: CanonicalVector, parser: str) -> None:
    value = PARSERS[parser](vector.input)
    assert canonical(value) == vector.canonical
    assert canonical_bytes(value) == vector.canonical.encode("utf-8")


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("vector", VECTORS.invalid, ids=lambda v: v.name)
def test_invalid_vector(vector: InvalidCanonicalVector, parser: str) -> None:
    value = PARSERS[parser](vector.input)
    with pytest.raises(CanonicalError):
        canonical_bytes(value)


def test_decimal_parser_really_gives_decimals() -> None:
    # Guards the "both parsers" vectors above: the decimal run must not be a float run.
    assert jsonutil.loads("[1200.50, 1e21, 7]") == [Decimal("1200.50"), Decimal("1e21"), 7]
    assert isinstance(jsonutil.loads("[1200.50]")[0], Decimal)


# --- values only Python can carry ---------------------------------------------------------


def _stable_id(value: Any) -> str:
    """repr without memory addresses: pytest-xdist's workers must collect the same ids."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        {"a": float("nan")},
        [1, float("inf")],
        Decimal("NaN"),
        Decimal("-Infinity"),
        Decimal("1e400"),
        10**400,
        {"a": {1, 2}},
        {"a": b"bytes"},
        {"a": object()},
        {"a": 1 + 2j},
        {1: "non-string key"},
        {"a": {1: "nested non-string key"}},
        {("t",): 1},
        [{"a": [{2: 1}]}],
    ],
    ids=_stable_id,
)
def test_non_json_values_are_refused(value: Any) -> None:
    with pytest.raises(CanonicalError):
        canonical_bytes(value)


def test_signaling_nan_decimal_is_a_canonical_error() -> None:
    with pytest.raises(CanonicalError):
        format_number(Decimal("sNaN"))


def test_nested_non_string_key_is_refused_even_when_its_value_is_empty() -> None:
    with pytest.raises(CanonicalError):
        canonical({1: None})  # refused
    with pytest.raises(CanonicalError):
        canonical({"a": {1: None}})  # gives '{}'


def test_lone_surrogate_is_refused_as_bytes() -> None:
    # canonical() gives text; the bytes that get hashed cannot hold a lone surrogate.
    with pytest.raises(CanonicalError, match="not valid Unicode"):
        canonical_bytes({"a": "\ud800"})
    with pytest.raises(CanonicalError):
        canonical_bytes({"\udfff": 1})


def test_boolean_is_not_a_number() -> None:
    with pytest.raises(CanonicalError, match="boolean"):
        format_number(True)
    assert canonical([True, False, 0, 1]) == "[true,false,0,1]"


def test_python_containers() -> None:
    assert canonical((1, (), "x")) == '[1,[],"x"]'
    assert canonical({"t": (), "u": (None,)}) == '{"u":[null]}'
    assert canonical(MappingProxyType({"b": 1, "a": None, "c": MappingProxyType({})})) == '{"b":1}'
    assert canonical({"a": MappingProxyType({"x": {"y": ""}})}) == "{}"
    assert canonical([{"a": {"b": []}}]) == "[{}]"
    assert canonical_bytes({"é": "€"}) == '{"é":"€"}'.encode()


@pytest.mark.parametrize(
    ("value", "empty"),
    [(None, True), ("", True), ([], True), ({}, True), ((), True)]
    + [(0, False), (False, False), (" ", False), ([None], False), ({"a": None}, False)],
)
def test_is_empty(value: Any, empty: bool) -> None:
    assert is_empty(value) is empty


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (-0.0, "0"),
        (Decimal("-0"), "0"),
        (Decimal("-0.000"), "0"),
        (Decimal("1200.50"), "1200.5"),
        (Decimal("1E+2"), "100"),
        (Decimal("1e21"), "1e+21"),
        (Decimal("1e-7"), "1e-7"),
        (Decimal("0.1"), "0.1"),
        (Decimal("1e-400"), "0"),  # underflows to the double 0
        (2**53, "9007199254740992"),
        (2**53 + 1, "9007199254740992"),
        (-(2**53) - 1, "-9007199254740992"),
        (2**53 - 1, "9007199254740991"),
        (10**21, "1e+21"),
        (10**21 - 1, "1e+21"),
        (10**20, "100000000000000000000"),
        (2**1023, "8.98846567431158e+307"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (123e-9, "1.23e-7"),
        (-1.5e-10, "-1.5e-10"),
        (5e-324, "5e-324"),
        (2.0**-1022, "2.2250738585072014e-308"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ],
    ids=repr,
)
def test_format_number(value: int | float | Decimal, text: str) -> None:
    assert format_number(value) == text


# --- an independent ECMAScript Number::toString (ECMA-262 6.1.6.1.20) ---------------------


def es_number_to_string(x: float) -> str:
    """Number::toString by the letter of the spec, searching digit strings with Decimal."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError(x)
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number_to_string(-x)
    exact = Decimal(x)
    with localcontext() as ctx:
        ctx.prec = 1200
        top = exact.adjusted()  # exact = d.ddd * 10**top
        for k in range(1, 18):
            unit = Decimal(1).scaleb(top + 1 - k)
            low = (exact / unit).to_integral_value(rounding=ROUND_FLOOR)
            hits = [s for s in (low, low + 1) if float(s * unit) == x]
            if hits:
                # closest to x; on a tie the even s
                best = min(hits, key=lambda s: (abs(s * unit - exact), s % 2))
                break
        else:  # pragma: no cover - 17 digits always suffice
            raise AssertionError(x)
        sign, digit_tuple, exp = (best * unit).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exp, int)
    k = len(digits)
    n = exp + k
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (5e-324, "5e-324"),
        (9.999999999999997e-7, "9.999999999999997e-7"),
        (333333333.33333325, "333333333.33333325"),
        (1e23, "1e+23"),
        (-0.0000033333333333333333, "-0.0000033333333333333333"),
    ],
)
def test_reference_algorithm_itself(x: float, text: str) -> None:
    # The reference must be right before format_number is judged against it.
    assert es_number_to_string(x) == text


finite_floats = st.floats(allow_nan=False, allow_infinity=False)
double_range_ints = st.integers(min_value=-(2**1023), max_value=2**1023) | st.integers(
    min_value=-(2**64), max_value=2**64
)


@FAST
@given(finite_floats)
def test_float_round_trips(x: float) -> None:
    assert float(format_number(x)) == x


@FAST
@given(finite_floats)
def test_float_matches_ecmascript(x: float) -> None:
    assert format_number(x) == es_number_to_string(x)


@FAST
@given(double_range_ints)
def test_int_matches_ecmascript(i: int) -> None:
    assert format_number(i) == es_number_to_string(float(i))


@FAST
@given(st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**300), max_value=10**300))
def test_decimal_is_written_through_its_double(d: Decimal) -> None:
    assert format_number(d) == es_number_to_string(float(d))


# --- properties of whole documents -------------------------------------------------------

keys = st.text(max_size=6) | st.sampled_from(["", "a", "A", "\ue000", "\U0001f600", "\ufb33", "é"])
scalars = (
    st.none()
    | st.booleans()
    | st.just("")
    | st.text(max_size=8)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | finite_floats
    | st.decimals(
        allow_nan=False, allow_infinity=False, places=2, min_value=-(10**9), max_value=10**9
    )
    | st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**300), max_value=10**300)
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=20,
)


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be")


def _model(value: Any) -> Any:
    """What canonical JSON keeps of ``value``, with scalars tagged so True != 1 != 1.0."""
    if isinstance(value, dict):
        kept = {k: _model(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, ("s", ""), [], {})}
    if isinstance(value, list | tuple):
        return [_model(v) for v in value]
    if value is None:
        return None
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, int | float | Decimal):
        return ("n", float(value))
    raise TypeError(type(value))


def _pairs_sorted(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [k for k, _ in pairs]
    assert names == sorted(names, key=_utf16), f"keys not in UTF-16 order: {names!r}"
    assert len(set(names)) == len(names)
    return dict(pairs)


@FAST
@given(documents)
def test_output_parses_back_to_the_pruned_value(doc: Any) -> None:
    text = canonical(doc)
    assert text == text.strip()
    parsed = json.loads(text, object_pairs_hook=_pairs_sorted)
    assert _model(parsed) == _model(doc)
    assert canonical_bytes(doc) == text.encode("utf-8")


@FAST
@given(documents)
def test_canonical_is_idempotent(doc: Any) -> None:
    text = canonical(doc)
    assert canonical(json.loads(text)) == text
    assert canonical(jsonutil.loads(text)) == text


@FAST
@given(documents)
def test_fast_writer_equals_the_reference_writer(doc: Any) -> None:
    try:
        expected = reference_canonical(doc)
    except CanonicalError:
        with pytest.raises(CanonicalError):
            canonical(doc)
        return
    assert canonical(doc) == expected


def _without_empty_fields(value: Any) -> Any:
    """The spec's pruning, written again here so rfc8785 checks everything else."""
    if isinstance(value, dict):
        kept = {k: _without_empty_fields(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v not in ("", [], {})}
    if isinstance(value, list):
        return [_without_empty_fields(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    return value


def _has_unsafe_int(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_unsafe_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unsafe_int(v) for v in value)
    return type(value) is int and abs(value) >= 2**53


@FAST
@given(documents)
def test_agrees_with_an_independent_rfc8785_implementation(doc: Any) -> None:
    """``rfc8785`` (an independent implementation) refuses integers of 2**53 and more, which
    Claros writes through their double; Decimals go to it as the double Claros writes."""
    pruned = _without_empty_fields(doc)
    if _has_unsafe_int(pruned):
        return
    try:
        expected = rfc8785.dumps(pruned)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):
        with pytest.raises(CanonicalError):
            canonical_bytes(doc)
        return
    assert canonical_bytes(doc) == expected


def _shuffled(value: Any, rnd: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    return value


@FAST
@given(documents, st.randoms(use_true_random=False))
def test_key_order_does_not_matter(doc: Any, rnd: random.Random) -> None:
    assert canonical_bytes(_shuffled(doc, rnd)) == canonical_bytes(doc)


# --- node as an outside reference ---------------------------------------------------------

_NODE_SCRIPT = r"""
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const isEmpty = (v) => v === null || v === "" || (Array.isArray(v) && v.length === 0) ||
  (typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0);
const prune = (v) => {
  if (Array.isArray(v)) return v.map(prune);
  if (v !== null && typeof v === "object") {
    const o = {};
    for (const k of Object.keys(v)) { const p = prune(v[k]); if (!isEmpty(p)) o[k] = p; }
    return o;
  }
  return v;
};
const ser = (v) => {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(ser).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + ser(v[k])).join(",")
    + "}";
};
process.stdout.write(JSON.stringify({
  numbers: input.numbers.map((h) => {
    const x = Buffer.from(h, "hex").readDoubleBE(0);
    return [String(x), JSON.stringify(x)];
  }),
  strings: input.strings.map((s) => JSON.stringify(s)),
  documents: input.documents.map((t) => ser(prune(JSON.parse(t)))),
}));
"""


def _doubles(rnd: random.Random) -> list[float]:
    def bits(b: int) -> float:
        return float(struct.unpack(">d", b.to_bytes(8, "big"))[0])

    out: list[float] = []
    while len(out) < 700:  # any finite bit pattern
        x = bits(rnd.getrandbits(64))
        if math.isfinite(x):
            out.append(x)
    out += [bits(rnd.getrandbits(52) | (rnd.getrandbits(1) << 63)) for _ in range(250)]  # subnormal
    out += [float(rnd.randrange(-(2**70), 2**70)) for _ in range(150)]
    out += [float(2**53 + rnd.randrange(-50, 50)) for _ in range(50)]
    out += [
        float(f"{rnd.randrange(1, 10 ** rnd.randint(1, 17))}e{rnd.randint(-30, 30)}")
        for _ in range(400)
    ]
    out += [round(rnd.uniform(-1e6, 1e6), rnd.randint(0, 4)) for _ in range(150)]
    for edge in (1e21, 1e-6, 1e-7, 1e16, 1e17, 2.0**53, 5e-324, 2.0**-1022, 1.7976931348623157e308):
        x = edge
        for _ in range(12):
            out += [x, -x]
            x = math.nextafter(x, math.inf)
        x = edge
        for _ in range(12):
            x = math.nextafter(x, 0.0)
            out += [x, -x]
    return [x for x in out if math.isfinite(x)]  # nextafter(max) is inf


def _strings(rnd: random.Random) -> list[str]:
    alphabet = (
        [chr(c) for c in range(0x20)]
        + list("\"\\/'aZ0 ~\x7f")
        + ["\u0080", "\u00e9", "\u2028", "\u2029", "\ue000", "\ufb33", "\ufeff", "\uffff"]
        + ["\U0001f600", "\U00010000", "\U0010ffff"]
    )
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12))) for _ in range(300)]


def _random_document(rnd: random.Random, strings: list[str], depth: int = 0) -> Any:
    roll = rnd.random()
    if depth < 3 and roll < 0.25:
        return {
            rnd.choice(strings): _random_document(rnd, strings, depth + 1)
            for _ in range(rnd.randint(0, 5))
        }
    if depth < 3 and roll < 0.4:
        return [_random_document(rnd, strings, depth + 1) for _ in range(rnd.randint(0, 4))]
    return rnd.choice(
        [None, "", [], {}, True, False, 0, rnd.choice(strings), rnd.randint(-(2**60), 2**60)]
        + [rnd.uniform(-1e9, 1e9), float(f"1e{rnd.randint(-30, 30)}")]
    )


def test_against_node() -> None:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed: no outside ECMAScript reference to compare with")
    rnd = random.Random(8785)
    numbers = _doubles(rnd)
    strings = _strings(rnd)
    documents = [
        {"d": _random_document(rnd, strings), rnd.choice(strings): rnd.choice(strings)}
        for _ in range(300)
    ]
    # Python floats print exactly (repr round-trips), so node parses the very same doubles.
    doc_texts = [json.dumps(d, ensure_ascii=True) for d in documents]
    payload = {
        "numbers": [struct.pack(">d", x).hex() for x in numbers],
        "strings": strings,
        "documents": doc_texts,
    }
    result = subprocess.run(
        [node, "-e", _NODE_SCRIPT],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    ref = json.loads(result.stdout)
    assert len(numbers) >= 2000

    wrong = [
        (x, js, format_number(x))
        for x, (js, js_json) in zip(numbers, ref["numbers"], strict=True)
        if format_number(x) != js or js != js_json
    ]
    assert not wrong, f"{len(wrong)} numbers differ from node, e.g. {wrong[:5]}"

    wrong_s = [(s, js) for s, js in zip(strings, ref["strings"], strict=True) if canonical(s) != js]
    assert not wrong_s, f"{len(wrong_s)} strings differ from node, e.g. {wrong_s[:5]}"

    wrong_d = [
        (t, js, canonical(json.loads(t)))
        for t, js in zip(doc_texts, ref["documents"], strict=True)
        if canonical(json.loads(t)) != js or canonical(jsonutil.loads(t)) != js
    ]
    assert not wrong_d, f"{len(wrong_d)} documents differ from node, e.g. {wrong_d[:3]}"


class _Tier(enum.IntEnum):
    GOLD = 3


class _Name(str, enum.Enum):  # noqa: UP042 - str() of this one is "_Name.DANA"
    DANA = "dana"


@pytest.mark.parametrize(
    "doc",
    [
        {"\U0001f600": 1, "\ue000": 2, "a": "\U0001f600"},  # UTF-16 order differs from code points
        {"a": "\U0001f600", "b": {"c": "\ue000"}},  # astral value, plain keys
        {"f": 1e-5, "g": 1e16, "h": 2.0, "i": -0.0, "j": 0.5},
        {"big": 2**60, "neg": -(2**53) - 1, "safe": 2**53},
        {"d": Decimal("1E-7"), "e": Decimal("1E+22"), "m": Decimal("12.50"), "z": Decimal("-0")},
        [None, "", [], {}, {"a": None}, [{"b": ""}], ("t", None)],
        MappingProxyType({"a": MappingProxyType({"b": None}), "c": (1, "", None)}),
        {_Name.DANA: _Name.DANA, "tier": _Tier.GOLD},
        {"a": {"b": {"c": {}}}, "d": [[], {"e": []}], "f": "x"},
        {"a": 1, "b": None, "c": {"d": 2}, "e": ""},  # a change after unchanged fields
    ],
)
def test_fast_path_cases_equal_the_reference(doc: Any) -> None:
    assert canonical(doc) == reference_canonical(doc)
    assert canonical_bytes(doc) == reference_canonical(doc).encode("utf-8")


# --- the bytes the ledger hashes: orjson's writer on the settled value ------------------


def test_bytes_escape_every_control_and_keep_other_characters() -> None:
    text = "".join(map(chr, range(0x80))) + "\x7f\u2028\u2029\u00e9\ud7ff\ue000\uffff\U0001f600"
    doc = {text: text, "k": [text, {"é": text}]}
    with patch.object(canonical_module, "_text_bytes", side_effect=AssertionError):
        got = canonical_bytes({"k": text, "l": [text]})  # orjson's, not the stdlib's way
    assert got == reference_canonical({"k": text, "l": [text]}).encode("utf-8")
    assert canonical_bytes(doc) == reference_canonical(doc).encode("utf-8")  # astral key
    assert b"\\u001f" in canonical_bytes(doc) and b"\\u001F" not in canonical_bytes(doc)


def test_bytes_write_floats_as_the_reference_does() -> None:
    """Floats the settled value keeps (a fraction, 1e-4 and up) across every exponent,
    and random doubles: orjson's form is the reference's (others are settled or slow)."""
    rnd = random.Random(8785)
    values: list[Any] = []
    for _ in range(4000):
        values.append(rnd.uniform(1, 10) * 10 ** rnd.uniform(-4, 16))
        values.append(struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0])
    values += [1e-4, -1e-4, 0.1, 0.3, 2**52 - 0.5, 999999999999999.9, 1e15 + 0.3]
    # What the settled value keeps as a float (whole ones become ints, tiny ones are slow).
    kept = [v for v in values if math.isfinite(v) and not v.is_integer() and abs(v) >= 1e-4]
    assert len(kept) > 3500
    for chunk in range(0, len(kept), 500):
        part = kept[chunk : chunk + 500]
        doc = {"n": part, "d": [Decimal(repr(v)) for v in part[:50]], "w": [2.0, -0.0]}
        with patch.object(canonical_module, "_text_bytes", side_effect=AssertionError):
            got = canonical_bytes(doc)  # orjson's, not the stdlib's way
        assert got == reference_canonical(doc).encode("utf-8")


@pytest.mark.parametrize("depth", [200, 300, 600])
def test_bytes_past_orjsons_nesting_limit_take_the_stdlib_way(depth: int) -> None:
    doc: Any = "x"
    for i in range(depth):
        doc = [doc] if i % 2 else {"a": doc, "b": None}
    assert canonical_bytes(doc) == canonical(doc).encode("utf-8")
    assert canonical_bytes(doc) == reference_canonical(doc).encode("utf-8")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"a": "\ud800"}, "not valid Unicode"),
        ({"a": [Decimal("sNaN")]}, "number out of range: sNaN"),
        ({"a": Decimal("NaN"), "b": Decimal("1.5")}, "number out of range: NaN"),
        ({"a": {1: None}}, "object key is not a string: 1"),
        ({"a": {1, 2}}, "not a JSON value: set"),
    ],
)
def test_bytes_refuse_what_the_text_refuses(doc: Any, message: str) -> None:
    with pytest.raises(CanonicalError, match=message):
        canonical_bytes(doc)


def test_bytes_of_a_check_row_with_twenty_rules() -> None:
    """A row as record_check writes it (bench/canonical.py's): the path every check takes."""
    from bench.canonical import check_row

    for i in range(5):
        row = check_row(i)
        assert canonical_bytes(row) == reference_canonical(row).encode("utf-8")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"a": Decimal("NaN")}, "number out of range: NaN"),
        ({"a": [Decimal("sNaN")]}, "number out of range: sNaN"),
        ({"a": Decimal("1E+400")}, "number out of range: 1E\\+400"),
        ({"a": float("inf")}, "number out of range: inf"),
        ({"a": {1: None}}, "object key is not a string: 1"),
        ({"a": {1, 2}}, "not a JSON value: set"),
    ],
)
def test_fast_path_refuses_what_the_reference_refuses(doc: Any, message: str) -> None:
    with pytest.raises(CanonicalError, match=message):
        reference_canonical(doc)
    with pytest.raises(CanonicalError, match=message):
        canonical(doc)
