"""The rule expression language (claros.rules.expr): vectors, limits, no code, fuzzing.

tests/data/expr_vectors.json pins values, unknown fields and error columns; its expected
values were worked out from the semantics in the module docstring (decimal results with
Python's decimal module at 34 digits), not by running Claros.
"""

from __future__ import annotations

import ast
import builtins
import pickle
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DecimalException,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    localcontext,
)
from pathlib import Path
from types import FrameType, MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claros import jsonutil
from claros.rules import expr as expr_module
from claros.rules.expr import (
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_LIST_ITEMS,
    MAX_NUMBER_DIGITS,
    MAX_TOKENS,
    Expr,
    ExprError,
    Outcome,
    evaluate,
    matches,
    parse_derived,
    parse_when,
)

DATA = Path(__file__).parent.parent / "data"
FUZZ = settings(max_examples=300, deadline=None, database=None)
PARSERS: dict[str, Callable[[str], Expr]] = {"when": parse_when, "derived": parse_derived}


# --- the vector file -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValueVector:
    name: str
    kind: str
    expr: str
    facts: dict[str, Any]
    value: Any  # Decimal when the file says "decimal": true
    unknown: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ErrorVector:
    name: str
    kind: str
    expr: str
    error_column: int
    error_match: str


def _load() -> tuple[tuple[ValueVector, ...], tuple[ErrorVector, ...]]:
    data = jsonutil.loads((DATA / "expr_vectors.json").read_text(encoding="utf-8"))
    valid = tuple(
        ValueVector(
            v["name"],
            v["kind"],
            v["expr"],
            v["facts"],
            Decimal(v["value"]) if v.get("decimal") else v["value"],
            tuple(v["unknown"]),
        )
        for v in data["valid"]
    )
    invalid = tuple(
        ErrorVector(v["name"], v["kind"], v["expr"], v["error_column"], v["error_match"])
        for v in data["invalid"]
    )
    return valid, invalid


VALID, INVALID = _load()


def test_vector_file_is_well_formed() -> None:
    names = [v.name for v in VALID] + [v.name for v in INVALID]
    assert len(names) == len(set(names)), "vector names must be unique"
    assert len(VALID) >= 120 and len(INVALID) >= 60
    assert {v.kind for v in VALID} == {v.kind for v in INVALID} == {"when", "derived"}
    for v in INVALID:
        assert 1 <= v.error_column <= len(v.expr) + 1, v.name
        re.compile(v.error_match)


def _same_value(got: Any, expected: Any) -> bool:
    if isinstance(expected, Decimal):
        return isinstance(got, Decimal) and got == expected
    return type(got) is type(expected) and got == expected


@pytest.mark.parametrize("vector", VALID, ids=lambda v: v.name)
def test_value_vector(vector: ValueVector) -> None:
    expr = PARSERS[vector.kind](vector.expr)
    assert expr.kind == vector.kind and expr.text == vector.expr
    outcome = evaluate(expr, vector.facts)
    assert _same_value(outcome.value, vector.value), f"{outcome.value!r} != {vector.value!r}"
    assert outcome.unknown == vector.unknown
    assert set(outcome.unknown) <= expr.fields()
    if vector.kind == "when":
        assert vector.value in (True, False, None)  # a when is decided, or unknown (None)
        assert matches(expr, vector.facts) == (vector.value, vector.unknown)
    if outcome.value is not None:
        assert outcome.unknown == ()  # a decided value depends on nothing unknown


@pytest.mark.parametrize("vector", INVALID, ids=lambda v: v.name)
def test_error_vector(vector: ErrorVector) -> None:
    with pytest.raises(ExprError) as info:
        PARSERS[vector.kind](vector.expr)
    err = info.value
    assert (err.column, err.text) == (vector.error_column, vector.expr), err.message
    assert re.search(vector.error_match, err.message), err.message
    assert str(err).startswith(f"column {vector.error_column}: {err.message} in '")


def test_when_vectors_in_derived() -> None:
    # A `when` vector is either plain arithmetic, and then means the same in derived, or is
    # refused by derived for using something only `when` has.
    refused = 0
    for v in VALID:
        if v.kind != "when":
            continue
        try:
            derived = parse_derived(v.expr)
        except ExprError as err:
            assert "not allowed in derived" in err.message, (v.name, err)
            refused += 1
            continue
        as_when = evaluate(parse_when(v.expr), v.facts).value
        # A when that is not a boolean is undecided (None); the derived value is the value.
        assert as_when is None or evaluate(derived, v.facts).value == as_when, v.name
    assert refused >= 80


# --- the API -------------------------------------------------------------------------------


def test_error_message_format() -> None:
    with pytest.raises(ExprError) as info:
        parse_when("amount > )")
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.message, err.column, err.text) == (
        "unexpected ')', expected a value",
        10,
        "amount > )",
    )
    assert str(err) == "column 10: unexpected ')', expected a value in 'amount > )'"


def test_error_excerpt_of_long_text() -> None:
    text = "a + " * 100 + "@" + " + b" * 100
    with pytest.raises(ExprError) as info:
        parse_when(text)
    assert info.value.column == 401 and info.value.text == text
    shown = str(info.value)
    assert len(shown) < 140 and "@" in shown and "…" in shown


def test_error_newlines_shown_as_spaces() -> None:
    with pytest.raises(ExprError) as info:
        parse_when("a >\n)")
    assert info.value.column == 5
    assert str(info.value).endswith("in 'a > )'")


def test_error_pickles() -> None:
    with pytest.raises(ExprError) as info:
        parse_when("a >")
    again = pickle.loads(pickle.dumps(info.value))
    assert (again.message, again.column, again.text, str(again)) == (
        info.value.message,
        info.value.column,
        info.value.text,
        str(info.value),
    )


def test_non_string_is_an_expr_error() -> None:
    with pytest.raises(ExprError, match="must be a string"):
        parse_when(5)  # type: ignore[arg-type]


def test_fields_as_written() -> None:
    expr = parse_when(
        "amount > order.total / 2 and items[0].qty in [1, x] and x == x or items[12].a.b"
    )
    assert expr.fields() == frozenset(
        {"amount", "order.total", "items[0].qty", "x", "items[12].a.b"}
    )
    assert isinstance(expr.fields(), frozenset)
    assert parse_derived("grand_total - discount").fields() == {"grand_total", "discount"}
    assert parse_when("1 == 1").fields() == frozenset()


def test_expr_equality_hash_and_repr() -> None:
    a, b = parse_when("a > 1"), parse_when("a > 1")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != parse_derived("a") and parse_when("a") != parse_derived("a")
    assert repr(a) == "Expr(text='a > 1', kind='when')"
    with pytest.raises(AttributeError, match="immutable"):
        a.text = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del a.kind  # type: ignore[misc]
    assert a.text == "a > 1" and a.kind == "when"


def test_matches() -> None:
    expr = parse_when("amount > limit")
    assert matches(expr, {"amount": 5, "limit": 1}) == (True, ())
    assert matches(expr, {"amount": 1, "limit": 5}) == (False, ())
    assert matches(expr, {"amount": 1}) == (None, ("limit",))
    assert matches(parse_when("amount"), {"amount": 1}) == (None, ("amount",))
    assert matches(parse_when("amount"), {"amount": True}) == (True, ())


def test_matches_refuses_derived() -> None:
    with pytest.raises(ValueError, match="'when'"):
        matches(parse_derived("a"), {"a": 1})


def test_outcome_is_frozen() -> None:
    outcome = evaluate(parse_derived("1"), {})
    assert outcome == Outcome(Decimal(1), ())
    with pytest.raises(AttributeError):
        outcome.value = 2  # type: ignore[misc]


def test_keywords_are_lowercase_only() -> None:
    # Capitalised keywords are plain fields.
    assert parse_when("True").fields() == {"True"}
    assert evaluate(parse_when("Null == null"), {}).value is True
    with pytest.raises(ExprError, match="unexpected 'AND'"):
        parse_when("a AND b")


# --- facts ---------------------------------------------------------------------------------


def test_floats_go_through_their_text() -> None:
    facts = {"a": 0.1, "b": 0.2}
    assert evaluate(parse_when("a + b == 0.3"), facts).value is True
    assert evaluate(parse_derived("a * 3"), facts).value == Decimal("0.3")


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), -float("inf"), Decimal("NaN"), Decimal("sNaN"), Decimal("-Inf")],
    ids=repr,
)
def test_non_finite_numbers_are_null(bad: Any) -> None:
    facts = {"a": bad}
    assert evaluate(parse_derived("a + 1"), facts) == Outcome(None, ("a",))
    assert evaluate(parse_when("a > 1"), facts) == Outcome(None, ("a",))
    assert evaluate(parse_when("a == null"), facts) == Outcome(True, ())
    assert evaluate(parse_when("a in [1]"), facts) == Outcome(None, ("a",))


def test_ints_are_decimals() -> None:
    outcome = evaluate(parse_derived("a"), {"a": 7})
    assert outcome.value == Decimal(7) and isinstance(outcome.value, Decimal)
    assert evaluate(parse_derived("a"), {"a": True}).value is True
    assert evaluate(parse_derived("a"), {"a": "x"}).value == "x"


def test_long_fact_numbers_are_rounded_to_34_digits() -> None:
    big = Decimal("1" * 150)
    assert evaluate(parse_when("a > 0"), {"a": big}).value is True
    value = evaluate(parse_derived("a"), {"a": big}).value
    assert len(value.as_tuple().digits) == 34 and value == Context(prec=34).plus(big)


def test_tuples_and_read_only_mappings() -> None:
    facts = MappingProxyType({"items": ({"qty": 2},), "order": MappingProxyType({"total": 5})})
    assert evaluate(parse_derived("items[0].qty * order.total"), facts).value == 10


def test_dots_always_mean_nesting() -> None:
    assert evaluate(parse_derived("order.total"), {"order.total": 5}) == Outcome(
        None, ("order.total",)
    )


def _shared_tree(depth: int) -> Any:
    """A list of two lists of two lists... sharing nodes: 2**depth leaves, depth objects."""
    node: Any = 1
    for _ in range(depth):
        node = [node, node]
    return node


def test_cyclic_facts_do_not_hang() -> None:
    a: list[Any] = []
    a.append(a)
    b: list[Any] = []
    b.append(b)
    facts = {"a": a, "b": b, "c": {"k": a}}
    assert evaluate(parse_when("a == b"), facts) == Outcome(None, ("a", "b"))
    assert evaluate(parse_when("a != b"), facts) == Outcome(None, ("a", "b"))
    assert evaluate(parse_when("a == a"), facts).value is None
    assert evaluate(parse_when("b in a"), facts).value is None
    assert evaluate(parse_when("c == c"), facts).value is None


def test_structural_equality_has_a_step_budget() -> None:
    # 2**30 comparisons without the budget; equal as far as the budget reaches.
    x, y = _shared_tree(30), _shared_tree(30)
    assert evaluate(parse_when("x == y"), {"x": x, "y": y}) == Outcome(None, ("x", "y"))
    assert evaluate(parse_when("x in ys"), {"x": x, "ys": [y, y]}).value is None
    small = {"x": _shared_tree(10), "y": _shared_tree(10)}
    assert evaluate(parse_when("x == y"), small) == Outcome(True, ())


def test_structural_equality_within_budget() -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]
    same: Any = 1
    for _ in range(MAX_DEPTH):
        same = [same]
    assert evaluate(parse_when("x == y"), {"x": deep, "y": same}).value is True
    assert evaluate(parse_when("x == y"), {"x": [deep], "y": [same]}) == Outcome(None, ("x", "y"))


def test_large_list_membership_is_linear() -> None:
    items = [str(i) for i in range(200_000)]
    assert evaluate(parse_when("x in items"), {"x": "199999", "items": items}).value is True


# --- decimal context -----------------------------------------------------------------------


def test_ambient_decimal_context_is_ignored_and_untouched() -> None:
    forty = "1234567890123456789012345678901234567890"
    with localcontext() as ctx:
        ctx.prec = 5
        ctx.traps[Inexact] = True
        ctx.clear_flags()
        third = evaluate(parse_derived("1 / 3"), {}).value
        assert third == Decimal("0." + "3" * 34)
        assert evaluate(parse_derived("-" + forty), {}).value == Decimal("-" + forty)
        assert evaluate(parse_derived("x * x"), {"x": Decimal("1e999999")}).value is None
        assert not any(ctx.flags.values())
        assert ctx.prec == 5


# --- limits --------------------------------------------------------------------------------


def test_limits_are_the_documented_ones() -> None:
    assert (MAX_LENGTH, MAX_TOKENS, MAX_DEPTH, MAX_NUMBER_DIGITS, MAX_LIST_ITEMS) == (
        2000,
        400,
        32,
        40,
        100,
    )


def test_length_limit() -> None:
    name = "a" * MAX_LENGTH
    assert parse_when(name).fields() == {name}
    with pytest.raises(ExprError, match="longer than 2,000 characters") as info:
        parse_when(name + " ")
    assert info.value.column == MAX_LENGTH + 1


@pytest.mark.parametrize(
    "text",
    [
        "1+" * 50_000 + "1",
        "(" * 10_000 + "1" + ")" * 10_000,
        "a" * 100_000,
        "'" + "x" * 100_000,
    ],
    ids=["sum-100k", "parens-10k", "name-100k", "string-100k"],
)
@pytest.mark.parametrize("kind", ["when", "derived"])
def test_huge_input_is_refused_before_any_work(text: str, kind: str) -> None:
    # It returns (with an ExprError), so it did not hang or recurse.
    with pytest.raises(ExprError, match="longer than 2,000 characters") as info:
        PARSERS[kind](text)
    assert info.value.column == MAX_LENGTH + 1


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("(" * 1000 + "1" + ")" * 999, "more than 400 tokens"),
        ("-" * 1999 + "1", "more than 400 tokens"),
        ("not " * 399 + "x", "nesting deeper than 32"),
        ("(" * 399 + "x", "nesting deeper than 32"),
        ("[" * 201 + "]" * 201, "more than 400 tokens"),
    ],
    ids=["parens-1000", "minus-1999", "not-399", "parens-399", "lists-201"],
)
def test_deep_nesting_is_refused(text: str, match: str) -> None:
    with pytest.raises(ExprError, match=match):
        parse_when(text)


def test_token_limit_boundary() -> None:
    at_limit = "-1" + " + 1" * 199  # 400 tokens
    assert evaluate(parse_derived(at_limit), {}).value == 198
    with pytest.raises(ExprError, match="more than 400 tokens"):
        parse_derived(at_limit + " + 1")


def test_list_limit_boundary() -> None:
    items = ", ".join(str(i) for i in range(MAX_LIST_ITEMS))
    assert evaluate(parse_when(f"x in [{items}]"), {"x": 99}).value is True
    with pytest.raises(ExprError, match="more than 100 items"):
        parse_when(f"x in [{items}, 100]")


def test_number_limit_boundary() -> None:
    assert parse_derived("9" * 40)
    assert parse_derived("9" * 20 + "." + "9" * 20)
    with pytest.raises(ExprError, match="more than 40 digits"):
        parse_derived("9" * 21 + "." + "9" * 20)


@contextmanager
def _stack_headroom(frames: int) -> Iterator[None]:
    """Run with only ``frames`` frames of stack above the caller's."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_worst_case_nesting_needs_little_stack() -> None:
    text = "1"
    for _ in range(MAX_DEPTH):  # every precedence level at every depth: 385 tokens
        text = f"(false or true and 1 == 1 + 1 * {text})"
    with _stack_headroom(500):
        when = parse_when(text)
        outcome = evaluate(when, {})
    # `1 + 1 * <a boolean>` cannot be computed: unknown, with no field to blame.
    assert outcome == Outcome(None, ())
    with pytest.raises(ExprError, match="nesting deeper"):
        parse_when(f"({text})")


# --- no code execution ---------------------------------------------------------------------

PAYLOADS = [
    "__import__('os').system('touch {marker}')",
    '__import__("os").system("touch {marker}")',
    "().__class__.__bases__[0].__subclasses__()",
    "().__class__",
    "open('{marker}', 'w')",
    'exec(\'open("{marker}", "w")\')',
    "eval('1')",
    "lambda: open('{marker}', 'w')",
    "[x for x in ()]",
    "a if b else c",
    "f'{{1}}'",
    "1; open('{marker}', 'w')",
    "import os",
    "globals()",
    "2 ** 1000000",
    "`ls`",
    "$(touch {marker})",
]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("kind", ["when", "derived"])
def test_code_is_never_run(payload: str, kind: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = payload.format(marker=marker)
    with pytest.raises(ExprError):
        PARSERS[kind](text)
    assert not marker.exists()
    assert list(tmp_path.iterdir()) == []


def test_dunder_names_are_just_missing_fields() -> None:
    expr = parse_when("__class__ == null and __import__ == null and a.__dict__ == null")
    assert evaluate(expr, {"a": {"x": 1}}).value is True


def test_no_eval_exec_or_compile_at_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("code evaluation was called")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    monkeypatch.setattr(ast, "literal_eval", forbidden)
    for v in VALID:
        evaluate(PARSERS[v.kind](v.expr), v.facts)
    for bad in INVALID:
        with pytest.raises(ExprError):
            PARSERS[bad.kind](bad.expr)


def test_source_has_no_code_evaluation() -> None:
    source = Path(expr_module.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source)
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not called & {"eval", "exec", "compile", "__import__", "getattr", "setattr", "open"}
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"ast", "importlib", "os", "subprocess", "builtins", "literal_eval"}


# --- fuzzing -------------------------------------------------------------------------------

FIELDS = ["a", "b", "s", "c.d", "items[0]", "items[1].qty"]
TOKENS = [
    *FIELDS,
    "1",
    "0",
    "2.50",
    "-",
    "+",
    "*",
    "/",
    "(",
    ")",
    "[",
    "]",
    ",",
    "<",
    "<=",
    ">",
    ">=",
    "==",
    "!=",
    "and",
    "or",
    "not",
    "in",
    "true",
    "false",
    "null",
    "'x'",
    '"120.50"',
    "'",
    '"',
    "\\",
    ".",
    "=",
    "@",
]

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.decimals()
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["120.50", "-3", "1,200", "abc", "", "0", "1e5"])
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["d", "qty", "x"]), children, max_size=3)
    ),
    max_leaves=12,
)
facts_strategy = st.fixed_dictionaries(
    {},
    optional={"a": json_values, "b": json_values, "s": json_values, "c": json_values}
    | {"items": st.lists(json_values, max_size=3)},
)


def _check_error(err: ExprError, text: str) -> None:
    assert err.text == text
    assert 1 <= err.column <= min(len(text), MAX_LENGTH) + 1
    assert err.message and str(err).startswith(f"column {err.column}: ")


def _parse_or_none(parse: Callable[[str], Expr], text: str) -> Expr | None:
    try:
        return parse(text)
    except ExprError as err:
        _check_error(err, text)
        return None


@FUZZ
@given(st.text(max_size=200))
def test_arbitrary_text_only_raises_expr_error(text: str) -> None:
    for parse in PARSERS.values():
        _parse_or_none(parse, text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=30), st.sampled_from(["", " "]), facts_strategy)
def test_token_soup(tokens: list[str], sep: str, facts: dict[str, Any]) -> None:
    text = sep.join(tokens)
    for parse in PARSERS.values():
        expr = _parse_or_none(parse, text)
        if expr is not None:
            outcome = evaluate(expr, facts)
            assert set(outcome.unknown) <= expr.fields()
            assert len(set(outcome.unknown)) == len(outcome.unknown)


def _values() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(
        [*FIELDS, "1", "0", "2.50", "-3", "'x'", '"120.50"', "true", "false", "null"]
    )
    return st.recursive(
        leaf,
        lambda inner: (
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(" ".join)
            | inner.map(lambda x: f"({x})")
            | inner.map(lambda x: f"-{x}")
        ),
        max_leaves=6,
    )


def _conditions() -> st.SearchStrategy[str]:
    value = _values()
    comparison = st.tuples(value, st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), value).map(
        " ".join
    )
    member = st.tuples(
        value,
        st.sampled_from(["in", "not in"]),
        st.sampled_from(FIELDS) | st.lists(value, max_size=3).map(lambda xs: f"[{', '.join(xs)}]"),
    ).map(" ".join)
    atom = comparison | member | value
    return st.recursive(
        atom,
        lambda inner: (
            st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(" ".join)
            | inner.map(lambda x: f"not {x}")
            | inner.map(lambda x: f"({x})")
        ),
        max_leaves=5,
    )


def _parse_well_formed(parse: Callable[[str], Expr], text: str) -> Expr | None:
    """Parse a generated well-formed expression: only the limits may refuse it."""
    try:
        return parse(text)
    except ExprError as err:
        assert re.search("tokens|nesting|longer", err.message), (text, err)
        return None


@FUZZ
@given(_conditions(), facts_strategy)
def test_valid_when_parses_and_evaluates(text: str, facts: dict[str, Any]) -> None:
    expr = _parse_well_formed(parse_when, text)
    if expr is None:
        return
    outcome = evaluate(expr, facts)
    hit, unknown = matches(expr, facts)
    assert hit is outcome.value and unknown == outcome.unknown
    assert hit in (True, False, None)
    assert (hit is None) or unknown == ()
    assert set(unknown) <= expr.fields() and len(set(unknown)) == len(unknown)


@FUZZ
@given(_values(), facts_strategy)
def test_valid_values_evaluate(text: str, facts: dict[str, Any]) -> None:
    expr = _parse_well_formed(parse_when, text)
    if expr is None:
        return
    outcome = evaluate(expr, facts)
    assert outcome.value is None or isinstance(outcome.value, Decimal | str | bool | list | dict)


# Arithmetic against an independent computation: a random tree, printed with only the
# parentheses precedence needs, evaluated with Python's decimal module directly.

Tree = tuple[Any, ...]
PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def _ctx() -> Context:
    return Context(
        prec=34,
        rounding=ROUND_HALF_EVEN,
        Emax=999_999,
        Emin=-999_999,
        traps=[InvalidOperation, DivisionByZero, Overflow],
    )


def _compute(tree: Tree, facts: dict[str, Decimal]) -> Decimal | None:
    kind = tree[0]
    if kind == "num":
        return Decimal(tree[1])
    if kind == "field":
        return facts.get(tree[1])
    if kind == "neg":
        inner = _compute(tree[1], facts)
        return None if inner is None else _ctx().minus(inner)
    left, right = _compute(tree[2], facts), _compute(tree[3], facts)
    if left is None or right is None or (tree[1] == "/" and right == 0):
        return None
    ops = {"+": Context.add, "-": Context.subtract, "*": Context.multiply, "/": Context.divide}
    try:
        return ops[tree[1]](_ctx(), left, right)
    except DecimalException:
        return None


def _print(tree: Tree, sep: str) -> str:
    kind = tree[0]
    if kind in ("num", "field"):
        return str(tree[1])
    if kind == "neg":
        inner = _print(tree[1], sep)
        return f"-{inner}" if tree[1][0] in ("num", "field", "neg") else f"-({inner})"
    op = tree[1]
    left, right = _print(tree[2], sep), _print(tree[3], sep)
    if tree[2][0] == "bin" and PREC[tree[2][1]] < PREC[op]:
        left = f"({left})"
    if tree[3][0] == "bin" and PREC[tree[3][1]] <= PREC[op]:
        right = f"({right})"
    return f"{left}{sep}{op}{sep}{right}"


numbers = st.builds(
    lambda whole, frac: f"{whole}.{frac}" if frac else str(whole),
    st.integers(0, 10**12),
    st.one_of(st.just(""), st.integers(0, 999_999).map(str)),
)
trees: st.SearchStrategy[Tree] = st.recursive(
    st.tuples(st.just("num"), numbers)
    | st.tuples(st.just("field"), st.sampled_from(["f0", "f1", "f2"])),
    lambda inner: (
        st.tuples(st.just("neg"), inner)
        | st.tuples(st.just("bin"), st.sampled_from(["+", "-", "*", "/"]), inner, inner)
    ),
    max_leaves=12,
)
arith_facts = st.fixed_dictionaries(
    {},
    optional={
        name: st.decimals(allow_nan=False, allow_infinity=False, places=4, max_value=10**9)
        for name in ("f0", "f1", "f2")
    },
)


@FUZZ
@given(trees, arith_facts, st.sampled_from(["", " ", "  "]))
def test_derived_matches_independent_decimal_arithmetic(
    tree: Tree, facts: dict[str, Decimal], sep: str
) -> None:
    text = _print(tree, sep)
    expected = _compute(tree, facts)
    derived = _parse_well_formed(parse_derived, text)
    if derived is None:
        return
    got = evaluate(derived, facts).value
    if expected is None:
        assert got is None, text
    else:
        assert isinstance(got, Decimal) and got == expected, (text, got, expected)
    # The same text in a when, compared with itself, agrees.
    assert evaluate(parse_when(f"{text} == {text}"), facts).value is (
        True if expected is not None else None
    )


def test_evaluation_is_thread_safe() -> None:
    expr = parse_derived("a / 3 + b * 2")
    errors: list[Exception] = []

    def work(a: int) -> None:
        try:
            for _ in range(200):
                want = _ctx().add(_ctx().divide(Decimal(a), Decimal(3)), Decimal(4))
                assert evaluate(expr, {"a": a, "b": 2}).value == want
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_nested_orderings_are_evaluated_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    # Orderings nested in arithmetic: evaluating an operand twice per level would double
    # the work at every level (2**depth).
    calls = 0
    order = expr_module._order

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return order(*args)

    monkeypatch.setattr(expr_module, "_order", counted)
    text = "a"
    for _ in range(9):
        text = f"(({text} > 1) + 1 > 0)"
    outcome = evaluate(parse_when(text), {"a": 5})
    assert outcome.value is None  # a boolean plus 1 cannot be computed
    # Two orderings a level, but the innermost `a > 1` is two numbers (no general way):
    # linear, where evaluating operands twice would give thousands.
    assert calls == 2 * 9 - 1
