"""The compiled evaluation of claros.rules.expr, over any valid expression and any facts.

Every parsed expression is compiled into closures once. There is one evaluation path, so
these tests check what must hold of it whatever the expression: a ``when`` is true, false
or unknown (None); a decided value names no unknown field; unknown fields are fields of the
text, each once; one Scope over many expressions agrees with each alone; and the three
values hang together: ``not (E)`` is the negation of ``E`` with the same unknown fields,
``false and E`` is false, ``true or E`` is true, ``E and true`` and ``E or false`` are ``E``.
"""

from __future__ import annotations

import pickle
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claros.rules.expr import Expr, ExprError, Outcome, Scope, evaluate, parse_derived, parse_when
from tests.rules.test_expr import PARSERS, TOKENS, VALID, ValueVector

FUZZ = settings(max_examples=1500, deadline=None, database=None)


def _same(got: Any, want: Any) -> bool:
    """Identical values: same type, and for decimals the same digits and exponent."""
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    return type(got) is type(want) and repr(got) == repr(want)


def _reparse(text: str) -> Expr | None:
    try:
        return parse_when(text)
    except ExprError:  # one more level of nesting or a few more tokens than allowed
        return None


def _agree(expr: Expr, facts: Any) -> Outcome:
    got = evaluate(expr, facts)
    again = Scope(facts).evaluate(expr)
    assert _same(got.value, again.value) and got.unknown == again.unknown, (expr.text, got)
    assert set(got.unknown) <= expr.fields() and len(set(got.unknown)) == len(got.unknown)
    if got.value is not None:
        assert got.unknown == (), (expr.text, got)
    if expr.kind != "when":
        return got
    assert got.value in (True, False, None), (expr.text, got)
    negated = _reparse(f"not ({expr.text})")
    if negated is not None:
        want = None if got.value is None else not got.value
        assert evaluate(negated, facts) == Outcome(want, got.unknown), (expr.text, got)
    for text, want_value in ((f"false and ({expr.text})", False),
                             (f"true or ({expr.text})", True)):  # fmt: skip
        decided = _reparse(text)
        if decided is not None:
            assert evaluate(decided, facts) == Outcome(want_value, ()), text
    for text in (f"({expr.text}) and true", f"({expr.text}) or false"):
        same = _reparse(text)
        if same is not None:
            assert evaluate(same, facts) == got, text
    return got


# --- expressions that reach every short path and its way out --------------------------------

FIELDS = ["a", "b", "s", "c.d", "c.x", "items[0]", "items[1].qty", "items[0].d"]
NUMBERS = ["1", "0", "2.50", "-3", "1000", "0.0", "-0", "120.5", "1" * 40]
STRINGS = ["'x'", '"120.50"', "'120.5'", "''", "'abc'", "'-3'", "'1,200'", "'a\\'b'"]
LITERALS = [*NUMBERS, *STRINGS, "true", "false", "null"]


def _values() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(FIELDS) | st.sampled_from(LITERALS)
    return st.recursive(
        leaf,
        lambda inner: (
            st.lists(
                st.tuples(st.sampled_from(["+", "-", "*", "/"]), inner), min_size=1, max_size=3
            ).flatmap(
                lambda rest: inner.map(lambda first: first + "".join(f" {o} {x}" for o, x in rest))
            )
            | inner.map(lambda x: f"({x})")
            | inner.map(lambda x: f"-{x}")
            | st.lists(inner, max_size=3).map(lambda xs: f"[{', '.join(xs)}]")
        ),
        max_leaves=6,
    )


def _conditions() -> st.SearchStrategy[str]:
    value = _values()
    side = st.sampled_from(FIELDS) | st.sampled_from(LITERALS) | value
    comparison = st.tuples(side, st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), side).map(
        " ".join
    )
    container = (
        st.sampled_from(FIELDS)
        | st.lists(st.sampled_from(STRINGS), max_size=4).map(lambda xs: f"[{', '.join(xs)}]")
        | st.lists(st.sampled_from(LITERALS), max_size=4).map(lambda xs: f"[{', '.join(xs)}]")
        | st.lists(value, max_size=3).map(lambda xs: f"[{', '.join(xs)}]")
    )
    member = st.tuples(side, st.sampled_from(["in", "not in"]), container).map(" ".join)
    atom = comparison | member | value
    return st.recursive(
        atom,
        lambda inner: (
            st.lists(inner, min_size=2, max_size=4).map(" and ".join)
            | st.lists(inner, min_size=2, max_size=4).map(" or ".join)
            | inner.map(lambda x: f"not {x}")
            | inner.map(lambda x: f"({x})")
        ),
        max_leaves=6,
    )


# --- facts with every kind of value a field can hold -----------------------------------------

leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.integers()
    | st.decimals()
    | st.decimals(places=3, min_value=-(10**4), max_value=10**4)
    | st.floats()
    | st.text(max_size=4)
    | st.sampled_from(
        ["x", "120.50", "120.5", "-3", "1,200", "abc", "", "0", "1e5", " 1", "1000", "a'b"]
        + [Decimal("1" * 120), Decimal("-0"), Decimal("1E+3"), Decimal("1000.000")]
    )
)
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.dictionaries(st.sampled_from(["d", "qty", "x"]), children, max_size=3)
    ),
    max_leaves=10,
)
facts = st.fixed_dictionaries(
    {},
    optional={"a": values, "b": values, "s": values, "c": values}
    | {"items": st.lists(values, max_size=3)},
)


def _parse(parse: Any, text: str) -> Expr | None:
    try:
        expr: Expr = parse(text)
    except ExprError as err:
        assert "tokens" in err.message or "nesting" in err.message or "longer" in err.message
        return None
    return expr


@FUZZ
@given(_conditions(), facts)
def test_when_hangs_together(text: str, facts: dict[str, Any]) -> None:
    expr = _parse(parse_when, text)
    if expr is not None:
        outcome = _agree(expr, facts)
        assert Scope(facts).matches(expr) == (outcome.value, outcome.unknown)


@FUZZ
@given(_values(), facts)
def test_values_hang_together(text: str, facts: dict[str, Any]) -> None:
    for parse in PARSERS.values():
        expr = _parse_any(parse, text)
        if expr is not None:
            _agree(expr, facts)


def _parse_any(parse: Any, text: str) -> Expr | None:
    try:
        expr: Expr = parse(text)
    except ExprError:
        return None
    return expr


@settings(max_examples=500, deadline=None, database=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=30), st.sampled_from(["", " "]), facts)
def test_token_soup_hangs_together(tokens: list[str], sep: str, facts: dict[str, Any]) -> None:
    for parse in PARSERS.values():
        expr = _parse_any(parse, sep.join(tokens))
        if expr is not None:
            _agree(expr, facts)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(_conditions(), min_size=1, max_size=8), facts)
def test_one_scope_over_many_expressions(texts: list[str], facts: dict[str, Any]) -> None:
    """A Scope shares its field caches between expressions; each still agrees alone."""
    scope = Scope(facts)
    for text in texts:
        expr = _parse(parse_when, text)
        if expr is None:
            continue
        want = evaluate(expr, facts)
        got = scope.evaluate(expr)
        assert _same(got.value, want.value) and got.unknown == want.unknown, (text, got, want)
        assert scope.matches(expr) == (want.value, want.unknown)


@pytest.mark.parametrize("vector", VALID, ids=lambda v: v.name)
def test_vectors_hang_together(vector: ValueVector) -> None:
    _agree(PARSERS[vector.kind](vector.expr), vector.facts)


# --- every shape against every kind of field value ----------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "amount > 1000",
        "1000 < amount",
        "amount == 1500",
        "1500 != amount",
        "amount >= order.total / 2",
        "order.total / 2 <= amount",
        "amount == -order.total",
        "tier == 'gold'",
        "'gold' != tier",
        "tier < 'h'",
        "'h' >= tier",
        "amount == '1500.00'",
        "tier in ['gold', 'silver']",
        "tier not in ['gold', 'silver']",
        "amount in ['1500.00', 1500]",
        "amount not in [1500, null, 'x']",
        "tier in tiers",
        "amount - discount > 1000",
        "amount * 2 + discount - 1 / 0 > 1",
        "not tier and amount or flag",
        "amount == null or null != tier",
        "amount > null",
    ],
)
@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        1500,
        1500.0,
        float("nan"),
        Decimal("1500.00"),
        Decimal("1" * 120),
        "1500.00",
        "1500",
        "1,500",
        "gold",
        "",
        [1500],
        ["gold"],
        {"gold": 1},
    ],
    ids=repr,
)
def test_each_field_type_against_each_shape(text: str, value: Any) -> None:
    for name in ("amount", "tier", "discount", "flag", "tiers"):
        facts = {name: value, "order": {"total": value}}
        _agree(parse_when(text), facts)
        _agree(parse_when(text), {})


def test_step_budget_is_shared_within_one_expression() -> None:
    node: Any = 1
    for _ in range(17):
        node = [node, node]
    facts = {"x": node, "y": node, "z": [node]}
    for text in ["x == y and x == y", "x == y or z == [x]", "x in z and y == x", "x != y"]:
        _agree(parse_when(text), facts)


def test_an_expr_still_pickles() -> None:
    expr = parse_when("amount > order.total / 2 and tier in ['gold']")
    again = pickle.loads(pickle.dumps(expr))
    assert again == expr and again.fields() == expr.fields()
    facts = {"amount": 600, "order": {"total": 1000}, "tier": "gold"}
    assert evaluate(again, facts) == evaluate(expr, facts) == Outcome(True, ())
    derived = parse_derived("a * 2")
    assert evaluate(pickle.loads(pickle.dumps(derived)), {"a": 2}).value == 4
