"""Near-miss money (claros.rules.amounts): vectors for every clause of evidence.txt's
paragraph, the parts one by one, bounds, and properties.

tests/data/amount_vectors.json was written from the spec paragraph and the module's
documented choices, not by running Claros.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claros import jsonutil
from claros.rules import amounts
from claros.rules.amounts import (
    AMBIGUOUS,
    ISO_4217,
    KEY_WORDS,
    SYMBOLS,
    Money,
    find_amount,
    key_words,
    parse_money,
    read_number,
)

DATA = Path(__file__).parent.parent / "data"
FUZZ = settings(max_examples=300, deadline=None, database=None)


@dataclass(frozen=True, slots=True)
class AmountVector:
    name: str
    arguments: dict[str, Any]
    amount: Decimal | None
    currency: str | None
    path: str | None


def _load() -> tuple[AmountVector, ...]:
    data = jsonutil.loads((DATA / "amount_vectors.json").read_text(encoding="utf-8"))
    return tuple(
        AmountVector(
            v["name"],
            v["arguments"],
            None if v["amount"] is None else Decimal(v["amount"]),
            v["currency"],
            v["path"],
        )
        for v in data["vectors"]
    )


VECTORS = _load()
SPEC_WORDS = ["amount", "total", "subtotal", "price", "cost", "fee"]
SPEC_WORDS += ["payment", "refund", "charge", "sum"]


def test_vector_file_is_well_formed() -> None:
    names = [v.name for v in VECTORS]
    assert len(names) == len(set(names))
    for v in VECTORS:
        assert (v.amount is None) == (v.path is None), v.name
        assert v.amount is not None or v.currency is None, v.name
        assert v.currency is None or v.currency in ISO_4217, v.name


def test_vectors_cover_every_clause() -> None:
    names = {v.name for v in VECTORS}
    clauses = [
        *(f"key-word-{w}" for w in SPEC_WORDS),
        "snake-case",
        "kebab-case",
        "camel-case",
        "pascal-case",
        "summary-is-not-sum",
        "integer",
        "plain-string",
        "dollar-grouped",
        "code-after",
        "euro-symbol",
        "code-before",
        "currency-field-same-object",
        "currency-field-enclosing",
        "largest-wins",
        "nested-list",
        "not-money-words",
        "booleans-ignored",
        "european-form",
        "wrapped-value",
    ]
    assert not [c for c in clauses if c not in names]
    assert len(VECTORS) >= 100


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v.name)
def test_amount_vector(vector: AmountVector) -> None:
    money = find_amount(vector.arguments)
    if vector.amount is None:
        assert money is None
        return
    assert money is not None
    assert money.amount == vector.amount and isinstance(money.amount, Decimal)
    assert (money.currency, money.path) == (vector.currency, vector.path)


# --- the parts -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("grand_total", ("grand", "total")),
        ("refundAmount", ("refund", "amount")),
        ("unitPrice", ("unit", "price")),
        ("UnitPrice", ("unit", "price")),
        ("subtotal", ("subtotal",)),
        ("summary", ("summary",)),
        ("amount_cents", ("amount", "cents")),
        ("shipping-fee", ("shipping", "fee")),
        ("order.total", ("order", "total")),
        ("Total due", ("total", "due")),
        ("line2total", ("line", "total")),
        ("HTTPRequestFee", ("http", "request", "fee")),
        ("USDAmount", ("usd", "amount")),
        ("totalUSD", ("total", "usd")),
        ("AMOUNT", ("amount",)),
        ("__fee__", ("fee",)),
        ("montantTotal", ("montant", "total")),
        ("prixÉtéTotal", ("prix", "été", "total")),
        ("", ()),
        ("123", ()),
    ],
)
def test_key_words(key: str, words: tuple[str, ...]) -> None:
    assert key_words(key) == words


def test_key_word_list_is_the_spec_plus_plurals() -> None:
    assert set(SPEC_WORDS) <= KEY_WORDS
    assert KEY_WORDS - set(SPEC_WORDS) == {f"{w}s" for w in SPEC_WORDS}


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [
        ("$1,200.50", "1200.50", "USD"),
        ("1200.50", "1200.50", None),
        ("900 EUR", "900", "EUR"),
        ("EUR 900", "900", "EUR"),
        ("€900", "900", "EUR"),
        ("€ 900", "900", "EUR"),
        ("-12.5", "-12.5", None),
        ("+12.5", "12.5", None),
        ("\u221212.5", "-12.5", None),
        ("USD 1,000", "1000", "USD"),
        ("USD1,000", "1000", "USD"),
        ("usd 12", "12", "USD"),
        ("  42  ", "42", None),
        ("-$5", "-5", "USD"),
        ("$-5", "-5", "USD"),
        ("$5 CAD", "5", "CAD"),
        ("¥1500 CNY", "1500", "CNY"),
        ("$5 USD", "5", "USD"),
        ("1.200,50 €", "1200.50", "EUR"),
        ("1.200.000", "1200000", None),
        ("1 200,50", "1200.50", None),
        ("1\u00a0200,50\u00a0€", "1200.50", "EUR"),
        ("1\u202f200.50", "1200.50", None),
        ("CHF 1'200.50", "1200.50", "CHF"),
        ("1’200", "1200", None),
        ("12,50", "12.50", None),
        ("1,5", "1.5", None),
        ("1234,567", "1234.567", None),
        ("0,500", "0.500", None),
        ("1,200", "1200", None),
        ("1.200", "1.200", None),
        ("1,234,567.89", "1234567.89", None),
        ("007", "7", None),
    ],
)
def test_parse_money(text: str, amount: str, currency: str | None) -> None:
    parsed = parse_money(text)
    assert parsed is not None
    assert parsed[0] == Decimal(amount) and parsed[1] == currency


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "$",
        "EUR",
        "about 900 apples",
        "900 apples",
        "12/05/2026",
        "2026-05-12",
        "12:30",
        "12.5%",
        "#42",
        "900 PCS",
        "900 pcs",
        "€900 USD",
        "€900 £",
        "USD 900 EUR",
        "--5",
        "-$-5",
        "1e999999",  # an exponent is money only up to e300: 5e2 is 500
        "1,20,000",
        "1.200,000.5",
        "1,200,50",
        "1 200 300,4 5",
        "12 34",
        ".5",
        "5.",
        "1,",
        "NaN",
        "Infinity",
        "١٢٣",
        "ACC-PINV-0042",
        "1" * 65,
        "$ 1,200.50 and more",
    ],
)
def test_not_money(text: str) -> None:
    assert parse_money(text) is None


def test_symbols_and_codes() -> None:
    assert SYMBOLS["$"] == "USD" and SYMBOLS["¥"] == "JPY"
    assert set(SYMBOLS.values()) <= ISO_4217
    assert {"USD", "EUR", "GBP", "JPY", "CHF", "INR"} <= ISO_4217
    assert not {"PCS", "XXX", "XTS", "ABC", "usd"} & ISO_4217
    assert all(re.fullmatch("[A-Z]{3}", code) for code in ISO_4217)


def test_money_is_frozen() -> None:
    money = find_amount({"amount": 5})
    assert money == Money(Decimal(5), None, "amount")
    # A NamedTuple (cheaper to define at cold start than a frozen dataclass): its fields
    # cannot be set either (AttributeError, which FrozenInstanceError also is).
    with pytest.raises(AttributeError):
        money.amount = Decimal(6)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("value", "amount"),
    [
        (12.5, "12.5"),
        (0.1, "0.1"),
        (1e16, "1E+16"),
        (10**30, "1" + "0" * 30),
        (Decimal("1200.50"), "1200.50"),
    ],
)
def test_number_kinds(value: Any, amount: str) -> None:
    money = find_amount({"amount": value})
    assert money is not None and money.amount == Decimal(amount)


@pytest.mark.parametrize(
    "value",
    [True, False, None, float("nan"), float("inf"), Decimal("NaN"), Decimal("-Infinity"), b"5"],
    ids=repr,
)
def test_not_numbers(value: Any) -> None:
    assert find_amount({"amount": value}) is None


def test_depth_limit() -> None:
    def nest(levels: int) -> dict[str, Any]:
        obj: dict[str, Any] = {"price": 5}
        for _ in range(levels - 1):
            obj = {"a": obj}
        return obj

    found = find_amount(nest(32))
    assert found is not None and found.path == "a." * 31 + "price"
    assert find_amount(nest(33)) is None
    assert find_amount(nest(5000)) is None  # returns: no recursion past the limit


def test_cycles_do_not_hang() -> None:
    obj: dict[str, Any] = {"fee": 1}
    obj["a"] = obj
    obj["b"] = obj  # 2**32 paths without the bound on values visited
    assert find_amount(obj) == Money(Decimal(1), None, "fee")


def test_values_visited_are_bounded() -> None:
    # Only the first 100,000 values are looked at.
    assert find_amount({"prices": [1] * 99_998 + [7]}) == Money(Decimal(7), None, "prices[99998]")
    assert find_amount({"prices": [1] * 100_000 + [7]}) == Money(Decimal(1), None, "prices[0]")


def test_arguments_that_are_not_an_object() -> None:
    assert find_amount([{"amount": 5}]) is None  # type: ignore[arg-type]


def test_non_string_keys() -> None:
    arguments: dict[Any, Any] = {1: 5, "x": {2: {"total": 3}}}
    assert find_amount(arguments) == Money(Decimal(3), None, "x.2.total")


# --- properties ----------------------------------------------------------------------------


def _at(arguments: Any, path: str) -> Any:
    """Follow a path written by find_amount (keys here have no '.' or '[')."""
    value = arguments
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        value = value[int(index)] if index else value[name]
    return value


keys = st.sampled_from(
    ["amount", "total", "unitPrice", "fee_eur", "summary", "qty", "id", "currency", "items"]
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.decimals(allow_nan=True, places=2)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["$1,200.50", "900 EUR", "EUR", "usd", "1.200,50 €", "12/05/2026"])
)
json_values = st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(st.dictionaries(keys, json_values, max_size=5))
def test_find_amount_never_raises_and_points_at_its_value(arguments: dict[str, Any]) -> None:
    money = find_amount(arguments)
    if money is None:
        return
    assert money.currency is None or money.currency in ISO_4217
    found = _at(arguments, money.path)
    if isinstance(found, dict):
        pytest.fail(f"path {money.path} ends at an object")
    if isinstance(found, str):
        parsed = parse_money(found)
        assert parsed is not None and parsed[0] == money.amount
    else:
        assert Decimal(str(found)) == money.amount
    last_key = re.sub(r"\[\d+\]", "", money.path).split(".")[-1]
    assert KEY_WORDS & set(key_words(last_key)) or last_key == "value"


@FUZZ
@given(st.lists(st.decimals(allow_nan=False, allow_infinity=False, places=2), min_size=1))
def test_largest_of_a_list(numbers: list[Decimal]) -> None:
    money = find_amount({"prices": numbers})
    assert money is not None and money.amount == max(numbers)
    assert money.path == f"prices[{numbers.index(max(numbers))}]"


@FUZZ
@given(st.text(max_size=80))
def test_parse_money_never_raises(text: str) -> None:
    parsed = parse_money(text)
    if parsed is not None:
        assert parsed[0].is_finite()
        assert parsed[1] is None or parsed[1] in ISO_4217


@FUZZ
@given(
    st.decimals(min_value=0, max_value=10**12, places=2),
    st.sampled_from(sorted(SYMBOLS)),
    st.booleans(),
)
def test_formatted_amounts_round_trip(amount: Decimal, symbol: str, negative: bool) -> None:
    sign = "-" if negative else ""
    english = f"{sign}{symbol}{amount:,.2f}"
    european = f"{sign}{amount:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
    expected = -amount if negative else amount
    for text, currency in [
        (english, SYMBOLS[symbol]),
        (f"{european} {symbol}", SYMBOLS[symbol]),
        (f"{sign}{amount:.2f} CHF", "CHF"),
    ]:
        assert parse_money(text) == (expected, currency), text


# --- read_number: the same parser, as the expression language reads strings --------------


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("$500.00", "500.00"),
        ("500 EUR", "500"),
        ("EUR 500", "500"),
        (" 500", "500"),
        ("1.200,50 EUR", "1200.50"),
        ("5e2", "500"),
        ("-500 EUR", "-500"),
        ("500EUR", "500"),
        ("1,000.00", "1000.00"),
        ("0.500", "0.500"),  # a group never starts with 0: a decimal point
        ("1,5", "1.5"),
    ],
)
def test_read_number(text: str, number: str) -> None:
    got = read_number(text)
    assert isinstance(got, Decimal) and got == Decimal(number)
    parsed = parse_money(text)
    assert parsed is not None and parsed[0] == got  # one parser


@pytest.mark.parametrize("text", ["1,000", "1.000", "1.000 EUR", "-1,500", "$1,000", "999.999"])
def test_read_number_leaves_locale_dependent_numbers_unread(text: str) -> None:
    assert read_number(text) is AMBIGUOUS
    assert parse_money(text) is not None  # the near-miss finder still takes its reading


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "1e999999", "9" * 10_000, "abc", "2026-01-05", "12/05", ""]
)
def test_read_number_of_what_is_not_a_number(text: str) -> None:
    assert read_number(text) is None


def test_read_number_does_not_cache_huge_strings() -> None:
    amounts._read_number.cache_clear()
    assert read_number("1" * 1_000_000) is None
    assert amounts._read_number.cache_info().currsize == 0


# --- what importing costs ------------------------------------------------------------------

_SEPARATORS = ".,'\u2019 \u00a0\u2009\u202f"


@FUZZ
@given(
    st.lists(st.text("0123456789", min_size=1, max_size=4), min_size=1, max_size=6),
    st.lists(st.sampled_from(_SEPARATORS), max_size=5),
)
def test_a_number_splits_on_its_separators_as_the_listed_class_would(
    runs: list[str], seps: list[str]
) -> None:
    """The number group holds digits and single separators only, so the split on any
    non-digit is the split on the separators the money pattern lists."""
    core = runs[0] + "".join(s + r for s, r in zip(seps, runs[1:], strict=False))
    assert amounts._money().fullmatch(core) is not None
    listed = re.compile(f"([{re.escape(_SEPARATORS)}])")
    assert amounts._SEPARATOR.split(core) == listed.split(core)


def test_the_money_pattern_is_compiled_at_the_first_money_string_not_at_import() -> None:
    """Its classes beyond Latin-1 cost ~2 ms to compile: a function whose amounts are all
    numbers never pays it."""
    probe = (
        "import claros.rules.expr\n"
        "from claros.rules import amounts\n"
        "assert amounts._money.cache_info().currsize == 0\n"
        "assert amounts.find_amount({'amount': 1200}).amount == 1200\n"
        "assert amounts._money.cache_info().currsize == 0\n"
        "assert amounts.parse_money('$1,200.50') is not None\n"
        "assert amounts._money.cache_info().currsize == 1\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
