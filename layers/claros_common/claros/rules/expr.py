"""The expression language of a rule's ``when`` and a mapping's ``derived``.

A hand-written tokenizer and recursive-descent parser; nothing is ever handed to ``eval``,
``exec``, ``compile`` or ``ast``. Grammar, lowest precedence first (keywords are lowercase
and case-sensitive)::

    when     := or
    or       := and ("or" and)*
    and      := not ("and" not)*
    not      := "not" not | compare
    compare  := sum [ ("<" | "<=" | ">" | ">=" | "==" | "!=") sum
                    | ["not"] "in" (list | field) ]      -- one comparison, never chained
    derived  := sum                                       -- arithmetic only
    sum      := product (("+" | "-") product)*
    product  := unary (("*" | "/") unary)*
    unary    := "-" unary | value
    value    := field | number | string | "true" | "false" | "null" | "(" or ")" | list
    list     := "[" [sum ("," sum)* [","]] "]"
    field    := name ("." name | "[" digits "]")*    name := [A-Za-z_][A-Za-z0-9_]*
    number   := digits ["." digits]                   (no exponent, no leading "." or "+")
    string   := '...' | "..."   escapes: \\ \" \' \n \t

A field is written without spaces (``items[0].qty``); a dot always means "inside this
object" and ``[n]`` "item n of this list" (0-based; negative indexes do not exist).
``derived`` refuses strings, ``true``/``false``/``null``, comparisons, ``and``/``or``/
``not``/``in`` and lists, naming the column.

Limits, refused at parse time with an :class:`ExprError`: :data:`MAX_LENGTH` characters,
:data:`MAX_TOKENS` tokens, nesting (parentheses, unary minus, ``not``, lists) deeper than
:data:`MAX_DEPTH`, number literals of more than :data:`MAX_NUMBER_DIGITS` digits, lists of
more than :data:`MAX_LIST_ITEMS` items.

Evaluation (:func:`evaluate`, :func:`matches`) never raises:

* Numbers are ``Decimal``. Arithmetic runs in a private context (34 significant digits,
  half-even) whose overflow and invalid operations give null; division by zero gives null.
  Facts that are ``int`` become ``Decimal``; ``float`` goes through ``Decimal(str(f))``;
  NaN and infinities count as null; a fact number of more than 100 digits is rounded to 34.
* A missing field, or null, is null; arithmetic with null (or with a value that is not a
  number) is null. A string that is a plain decimal number (``"120.50"``, ``"-3"``; at most
  100 characters, no spaces, separators or exponent) counts as that number in arithmetic
  and when compared with a number.
* A comparison with null is false. Numbers compare by value (``1 == 1.0``). Strings order by
  code point; two strings compare as strings even when both look like numbers
  (``"9" < "10"`` is false). A number against a string that is not a plain number is false.
  Booleans, lists and objects only take ``==``/``!=``. ``==``/``!=`` between other different
  types are false/true. ``x == null`` is true when x is missing or null, ``x != null`` the
  opposite; those two never record anything. Lists and objects compare structurally.
* ``in``: a list means membership (with ``==``'s rules), a string means substring (the left
  side must be a string), anything else (null, a number, an object) is false. ``not in`` is
  false whenever ``in`` could not be decided either.
* ``and``/``or``/``not`` are two-valued; an operand that is not ``true`` or ``false`` counts
  as false. ``and``/``or`` evaluate left to right and stop once decided.
* :attr:`Outcome.unknown` names every field that was missing or null, or of a type the
  operation could not use, where a comparison, arithmetic, a condition (``and``/``or``/
  ``not``, the whole ``when``) or the whole ``derived`` needed it; in the order the fields
  first appear in the text, each once. Division by zero names nothing: the field is known.

Why evaluation cannot hang: there is no loop, function call, exponentiation or recursion in
the language. The parsed tree has at most :data:`MAX_TOKENS` tokens' worth of nodes and each
node is evaluated at most once; arithmetic is capped at 34 digits; a field lookup follows its
fixed path. The only work that grows with the facts is a list membership or substring test
(linear in the list or string) and structural equality of lists/objects, which stops after
:data:`MAX_DEPTH` levels of nesting and after 100,000 list/object comparisons per
evaluation (then it counts as not decided: false, and the fields are recorded as unknown).
Recursion in the parser and evaluator is bounded by :data:`MAX_DEPTH` times a small
constant (a few hundred frames at worst).
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DecimalException,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)
from typing import Any, ClassVar, Literal, TypeAlias

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_LIST_ITEMS",
    "MAX_NUMBER_DIGITS",
    "MAX_TOKENS",
    "Expr",
    "ExprError",
    "Kind",
    "Outcome",
    "Scope",
    "evaluate",
    "matches",
    "parse_derived",
    "parse_when",
]

MAX_LENGTH = 2_000
MAX_TOKENS = 400
MAX_DEPTH = 32
MAX_NUMBER_DIGITS = 40
MAX_LIST_ITEMS = 100

_MAX_INDEX_DIGITS = 9
_MAX_NUMERIC_STRING = 100
_MAX_FACT_DIGITS = 100
_PRECISION = 34
_MAX_STEPS = 100_000
_EXCERPT = 80

Kind: TypeAlias = Literal["when", "derived"]

_KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
_LITERALS: dict[str, bool | None] = {"true": True, "false": False, "null": None}
_COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})
_TWO_CHAR = frozenset({"<=", ">=", "==", "!="})
_ONE_CHAR = frozenset("<>+-*/()[],")
_LIST_OPS = frozenset("[],")
_SPACE = frozenset(" \t\r\n")
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t"}
_HINTS = {
    "=": "use '==' to compare",
    "!": "use '!=' or 'not'",
    "&": "use 'and'",
    "|": "use 'or'",
    ".": "a '.' goes between field names or digits",
}
_BLANKS = str.maketrans("\n\r\t", "   ")
_NUMERIC_STRING = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")
_ORDER: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class ExprError(ValueError):
    """An expression that cannot be parsed: ``message``, 1-based ``column`` and ``text``.

    ``str()`` reads ``column 10: unexpected ')', expected a value in 'amount > )'`` (long
    texts are shown as an excerpt around the column).
    """

    def __init__(self, message: str, column: int, text: str) -> None:
        self.message = message
        self.column = column
        self.text = text
        super().__init__(f"column {column}: {message} in {_excerpt(text, column)}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.column, self.text))


def _excerpt(text: str, column: int) -> str:
    shown = text.translate(_BLANKS)
    if len(shown) <= _EXCERPT:
        return f"'{shown}'"
    start = max(0, min(column - 1 - _EXCERPT // 2, len(shown) - _EXCERPT))
    head = "…" if start > 0 else ""
    tail = "…" if start + _EXCERPT < len(shown) else ""
    return f"'{head}{shown[start : start + _EXCERPT]}{tail}'"


# --- syntax tree ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lit:
    value: Decimal | str | bool | None  # None is the `null` keyword


@dataclass(frozen=True, slots=True)
class _Field:
    path: str  # as written
    segments: tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _List:
    items: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Neg:
    operand: _Node


@dataclass(frozen=True, slots=True)
class _Arith:
    """``first op1 n1 op2 n2 ...`` of one precedence level, folded left to right."""

    first: _Node
    rest: tuple[tuple[str, _Node], ...]


@dataclass(frozen=True, slots=True)
class _Cmp:
    op: str
    left: _Node
    right: _Node


@dataclass(frozen=True, slots=True)
class _In:
    left: _Node
    right: _Node
    negated: bool


@dataclass(frozen=True, slots=True)
class _Not:
    operand: _Node


@dataclass(frozen=True, slots=True)
class _And:
    operands: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Or:
    operands: tuple[_Node, ...]


_Node: TypeAlias = "_Lit | _Field | _List | _Neg | _Arith | _Cmp | _In | _Not | _And | _Or"
# A compiled node: its value over the facts of an evaluator; a compiled number: the value as a
# number (None when it is not one). See "compiled evaluation" at the end.
_Run: TypeAlias = "Callable[[_Evaluator], Any]"
_Num: TypeAlias = "Callable[[_Evaluator], Decimal | None]"


# --- public API ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expr:
    """A parsed expression. Equal when text and kind are equal."""

    text: str
    kind: Kind
    _root: _Node = field(repr=False, compare=False)
    _fields: tuple[str, ...] = field(repr=False, compare=False)  # first-appearance order
    _run: _Run = field(repr=False, compare=False)  # the tree compiled to closures, once

    def fields(self) -> frozenset[str]:
        """Every field path the expression references, as written (``items[0].qty``)."""
        return frozenset(self._fields)

    def __reduce__(self) -> tuple[Any, ...]:
        # Closures do not pickle: an Expr pickles as its text and is parsed again.
        return (_parse, (self.text, self.kind))


@dataclass(frozen=True, slots=True)
class Outcome:
    value: Any
    unknown: tuple[str, ...]


def parse_when(text: str) -> Expr:
    """Parse a rule's ``when``; raises :class:`ExprError` naming the column."""
    return _parse_cached(text, "when") if isinstance(text, str) else _parse(text, "when")


def parse_derived(text: str) -> Expr:
    """Parse a mapping's ``derived`` (arithmetic only); raises :class:`ExprError`."""
    return _parse_cached(text, "derived") if isinstance(text, str) else _parse(text, "derived")


# Every check evaluates the same rules' and mappings' expressions: parse (and compile)
# each text once per process. An Expr is immutable, so sharing it is safe.
@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str, kind: Kind) -> Expr:
    return _parse(text, kind)


class Scope:
    """Evaluates many expressions over one set of facts (a check's rules): the decimal
    context is made once and each field is looked up once, whatever the number of rules."""

    __slots__ = ("_ev",)

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self._ev = _Evaluator(facts)

    def evaluate(self, expr: Expr) -> Outcome:
        ev = self._ev
        recorded = ev.recorded
        recorded.clear()
        ev.steps = 0
        value = expr._run(ev)
        unknown = tuple(p for p in expr._fields if p in recorded) if recorded else ()
        return Outcome(value, unknown)

    def matches(self, expr: Expr) -> tuple[bool, tuple[str, ...]]:
        if expr.kind != "when":
            raise ValueError(f"matches() needs a 'when' expression, not {expr.kind!r}")
        ev = self._ev
        recorded = ev.recorded
        recorded.clear()
        ev.steps = 0
        value = expr._run(ev)
        unknown = tuple(p for p in expr._fields if p in recorded) if recorded else ()
        return value is True, unknown


def evaluate(expr: Expr, facts: Mapping[str, Any]) -> Outcome:
    """The expression's value over ``facts`` and the fields it found unknown. Never raises."""
    return Scope(facts).evaluate(expr)


def matches(expr: Expr, facts: Mapping[str, Any]) -> tuple[bool, tuple[str, ...]]:
    """Whether a ``when`` holds: only the value ``true`` matches (false, null or any other
    value does not), with the unknown fields. A ``derived`` expression is a ValueError."""
    return Scope(facts).matches(expr)


def _parse(text: str, kind: Kind) -> Expr:
    if not isinstance(text, str):
        raise ExprError(f"an expression must be a string, not {type(text).__name__}", 1, "")
    if len(text) > MAX_LENGTH:
        raise ExprError(
            f"expression is longer than {MAX_LENGTH:,} characters ({len(text):,})",
            MAX_LENGTH + 1,
            text,
        )
    tokens = _Lexer(text).tokens()
    if kind == "derived":
        _refuse_when_only(text, tokens)
    root = _Parser(text, tokens, kind).parse()
    fields = tuple(dict.fromkeys(t.text for t in tokens if t.kind == "field"))
    return Expr(text, kind, root, fields, _compile_top(root, kind))


def _visit(expr: Expr, facts: Mapping[str, Any]) -> Outcome:
    """Evaluate by walking the tree: the reference the compiled closures are tested against
    (same values, same unknown fields), and never used on the hot path."""
    ev = _Evaluator(facts)
    result = ev.visit(expr._root)
    if result.value is None or (expr.kind == "when" and not isinstance(result.value, bool)):
        ev.record(result)
    recorded = ev.recorded
    unknown = tuple(p for p in expr._fields if p in recorded) if recorded else ()
    return Outcome(result.value, unknown)


# --- tokens --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: Literal["num", "str", "field", "kw", "op", "end"]
    text: str  # as written (a string token keeps its quotes)
    column: int  # 1-based
    value: Any = None  # Decimal (num), str (str), tuple of segments (field)


def _is_digit(c: str) -> bool:
    return "0" <= c <= "9"


def _is_name_start(c: str) -> bool:
    return c == "_" or "a" <= c <= "z" or "A" <= c <= "Z"


def _is_name_char(c: str) -> bool:
    return _is_name_start(c) or _is_digit(c)


def _describe(tok: _Token) -> str:
    if tok.kind == "end":
        return "end of text"
    shown = tok.text if len(tok.text) <= 30 else tok.text[:29] + "…"
    return f"string {shown}" if tok.kind == "str" else f"'{shown}'"


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str, pos: int) -> ExprError:
        return ExprError(message, pos + 1, self.text)

    def char_at(self, pos: int) -> str:
        return self.text[pos] if pos < len(self.text) else ""

    def skip_digits(self, pos: int) -> int:
        while _is_digit(self.char_at(pos)):
            pos += 1
        return pos

    def tokens(self) -> list[_Token]:
        out: list[_Token] = []
        n = len(self.text)
        while True:
            while self.pos < n and self.text[self.pos] in _SPACE:
                self.pos += 1
            if self.pos >= n:
                break
            if len(out) == MAX_TOKENS:
                raise self.error(f"more than {MAX_TOKENS} tokens", self.pos)
            out.append(self.token())
        out.append(_Token("end", "", n + 1))
        return out

    def token(self) -> _Token:
        c = self.text[self.pos]
        if _is_digit(c):
            return self.number()
        if c in "'\"":
            return self.string()
        if _is_name_start(c):
            return self.name()
        start = self.pos
        two = self.text[start : start + 2]
        op = two if two in _TWO_CHAR else c if c in _ONE_CHAR else None
        if op is None:
            hint = _HINTS.get(c)
            raise self.error(f"unknown character {c!r}" + (f" ({hint})" if hint else ""), start)
        self.pos += len(op)
        return _Token("op", op, start + 1)

    def number(self) -> _Token:
        start = self.pos
        self.pos = self.skip_digits(start)
        if self.char_at(self.pos) == ".":
            if not _is_digit(self.char_at(self.pos + 1)):
                raise self.error("expected digits after '.' in a number", self.pos + 1)
            self.pos = self.skip_digits(self.pos + 1)
        literal = self.text[start : self.pos]
        after = self.char_at(self.pos)
        if after == "." or _is_name_char(after):
            raise self.error(f"unexpected {after!r} after a number", self.pos)
        if len(literal) - literal.count(".") > MAX_NUMBER_DIGITS:
            raise self.error(f"number has more than {MAX_NUMBER_DIGITS} digits", start)
        return _Token("num", literal, start + 1, Decimal(literal))

    def string(self) -> _Token:
        start = self.pos
        quote = self.text[start]
        chars: list[str] = []
        i = start + 1
        while i < len(self.text):
            c = self.text[i]
            if c == quote:
                self.pos = i + 1
                return _Token("str", self.text[start : i + 1], start + 1, "".join(chars))
            if c == "\\":
                escaped = self.char_at(i + 1)
                if escaped == "":
                    break
                if escaped not in _ESCAPES:
                    raise self.error(
                        f"unknown escape '\\{escaped}' in a string (use \\\\ \\\" \\' \\n or \\t)",
                        i,
                    )
                chars.append(_ESCAPES[escaped])
                i += 2
                continue
            chars.append(c)
            i += 1
        raise self.error("unclosed string", start)

    def read_name(self) -> str:
        start = self.pos
        while _is_name_char(self.char_at(self.pos)):
            self.pos += 1
        return self.text[start : self.pos]

    def name(self) -> _Token:
        start = self.pos
        first = self.read_name()
        if first in _KEYWORDS:
            return _Token("kw", first, start + 1)
        segments: list[str | int] = [first]
        while True:
            c = self.char_at(self.pos)
            if c == ".":
                self.pos += 1
                if not _is_name_start(self.char_at(self.pos)):
                    raise self.error("expected a name after '.'", self.pos)
                segments.append(self.read_name())
            elif c == "[":
                segments.append(self.index())
            else:
                break
        return _Token("field", self.text[start : self.pos], start + 1, tuple(segments))

    def index(self) -> int:
        start = self.pos + 1  # after '['
        end = self.skip_digits(start)
        if end == start:
            raise self.error("expected an index (0, 1, 2, ...) after '['", start)
        if end - start > _MAX_INDEX_DIGITS:
            raise self.error(f"index has more than {_MAX_INDEX_DIGITS} digits", start)
        if self.char_at(end) != "]":
            raise self.error("expected ']' after the index", end)
        self.pos = end + 1
        return int(self.text[start:end])


def _refuse_when_only(text: str, tokens: list[_Token]) -> None:
    for tok in tokens:
        what: str | None = None
        if tok.kind == "str":
            what = "strings are"
        elif tok.kind == "kw" or (tok.kind == "op" and tok.text in _COMPARE):
            what = f"'{tok.text}' is"
        elif tok.kind == "op" and tok.text in _LIST_OPS:
            what = "lists are"
        if what is not None:
            raise ExprError(
                f"unexpected {_describe(tok)} — {what} not allowed in derived", tok.column, text
            )


# --- parser --------------------------------------------------------------------------------


def _is_op(tok: _Token, op: str) -> bool:
    return tok.kind == "op" and tok.text == op


def _is_kw(tok: _Token, word: str) -> bool:
    return tok.kind == "kw" and tok.text == word


class _Parser:
    def __init__(self, text: str, tokens: list[_Token], kind: Kind) -> None:
        self.text = text
        self.tokens = tokens
        self.kind = kind
        self.i = 0
        self.depth = 0

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def error(self, message: str, tok: _Token) -> ExprError:
        return ExprError(message, tok.column, self.text)

    def unexpected(self, tok: _Token, expected: str) -> ExprError:
        return self.error(f"unexpected {_describe(tok)}, expected {expected}", tok)

    def enter(self, tok: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(
                f"nesting deeper than {MAX_DEPTH} levels (parentheses, '-', 'not', lists)", tok
            )

    def top(self) -> _Node:
        return self.or_() if self.kind == "when" else self.sum_()

    def parse(self) -> _Node:
        node = self.top()
        tok = self.peek()
        if _is_op(tok, ")"):
            raise self.error("unexpected ')' (no '(' is open)", tok)
        if tok.kind != "end":
            raise self.unexpected(tok, "an operator or end of text")
        return node

    def or_(self) -> _Node:
        operands = [self.and_()]
        while _is_kw(self.peek(), "or"):
            self.advance()
            operands.append(self.and_())
        return operands[0] if len(operands) == 1 else _Or(tuple(operands))

    def and_(self) -> _Node:
        operands = [self.not_()]
        while _is_kw(self.peek(), "and"):
            self.advance()
            operands.append(self.not_())
        return operands[0] if len(operands) == 1 else _And(tuple(operands))

    def not_(self) -> _Node:
        tok = self.peek()
        if not _is_kw(tok, "not"):
            return self.compare()
        self.advance()
        self.enter(tok)
        operand = self.not_()
        self.depth -= 1
        return _Not(operand)

    def at_comparison(self) -> bool:
        tok = self.peek()
        return (
            (tok.kind == "op" and tok.text in _COMPARE)
            or _is_kw(tok, "in")
            or (_is_kw(tok, "not") and _is_kw(self.peek(1), "in"))
        )

    def compare(self) -> _Node:
        left = self.sum_()
        if not self.at_comparison():
            return left
        tok = self.advance()
        node: _Node
        if tok.kind == "op":
            node = _Cmp(tok.text, left, self.sum_())
        else:
            negated = tok.text == "not"
            if negated:
                self.advance()  # 'in'
            node = _In(left, self.container(), negated)
        if self.at_comparison():
            after = self.peek()
            raise self.error(
                f"unexpected {_describe(after)}: comparisons cannot be chained; "
                "join them with 'and'",
                after,
            )
        return node

    def container(self) -> _Node:
        tok = self.peek()
        if _is_op(tok, "["):
            return self.list_()
        if tok.kind == "field":
            self.advance()
            return _Field(tok.text, tok.value)
        raise self.unexpected(tok, 'a list like ["a", "b"] or a field after \'in\'')

    def sum_(self) -> _Node:
        first = self.product()
        rest: list[tuple[str, _Node]] = []
        while (tok := self.peek()).kind == "op" and tok.text in ("+", "-"):
            self.advance()
            rest.append((tok.text, self.product()))
        return _Arith(first, tuple(rest)) if rest else first

    def product(self) -> _Node:
        first = self.unary()
        rest: list[tuple[str, _Node]] = []
        while (tok := self.peek()).kind == "op" and tok.text in ("*", "/"):
            self.advance()
            rest.append((tok.text, self.unary()))
        return _Arith(first, tuple(rest)) if rest else first

    def unary(self) -> _Node:
        tok = self.peek()
        if not _is_op(tok, "-"):
            return self.value()
        self.advance()
        self.enter(tok)
        operand = self.unary()
        self.depth -= 1
        if isinstance(operand, _Lit) and isinstance(operand.value, Decimal):
            return _Lit(operand.value.copy_negate())  # exact, whatever the length
        return _Neg(operand)

    def value(self) -> _Node:
        tok = self.peek()
        if tok.kind in ("num", "str"):
            self.advance()
            return _Lit(tok.value)
        if tok.kind == "field":
            self.advance()
            return _Field(tok.text, tok.value)
        if tok.kind == "kw" and tok.text in _LITERALS:
            self.advance()
            return _Lit(_LITERALS[tok.text])
        if _is_op(tok, "("):
            return self.group()
        if _is_op(tok, "["):
            return self.list_()
        raise self.unexpected(tok, "a value")

    def group(self) -> _Node:
        opening = self.advance()
        self.enter(opening)
        node = self.top()
        close = self.peek()
        if not _is_op(close, ")"):
            if close.kind == "end":
                raise self.error("'(' is never closed", opening)
            raise self.unexpected(close, "an operator or ')'")
        self.advance()
        self.depth -= 1
        return node

    def list_(self) -> _Node:
        opening = self.advance()
        self.enter(opening)
        items: list[_Node] = []
        while not _is_op(self.peek(), "]"):
            if len(items) == MAX_LIST_ITEMS:
                raise self.error(f"list has more than {MAX_LIST_ITEMS} items", self.peek())
            items.append(self.sum_())
            sep = self.peek()
            if _is_op(sep, ","):
                self.advance()
            elif sep.kind == "end":
                raise self.error("'[' is never closed", opening)
            elif not _is_op(sep, "]"):
                raise self.unexpected(sep, "',' or ']'")
        self.advance()
        self.depth -= 1
        return _List(tuple(items))


# --- evaluation ----------------------------------------------------------------------------


@dataclass(slots=True)  # not frozen: frozen dataclasses are slow to make, and these are
class _V:  # made for every node of every rule of every check
    """A value and the fields to blame when it turns out null or of the wrong type."""

    value: Any
    blame: tuple[str, ...] = ()


def _context() -> Context:
    return Context(
        prec=_PRECISION,
        rounding=ROUND_HALF_EVEN,
        Emax=999_999,
        Emin=-999_999,
        traps=[InvalidOperation, DivisionByZero, Overflow],
    )


def _numeric(text: str) -> Decimal | None:
    if len(text) <= _MAX_NUMERIC_STRING and _NUMERIC_STRING.fullmatch(text):
        return Decimal(text)
    return None


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, str):
        return _numeric(value)
    return None


def _is_null(node: _Node) -> bool:
    return isinstance(node, _Lit) and node.value is None


def _orderable(a: Any, b: Any) -> tuple[Any, Any] | None:
    """The pair to order, or None when ``a`` and ``b`` cannot be ordered."""
    if isinstance(a, str) and isinstance(b, str):
        return a, b
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        x, y = _as_number(a), _as_number(b)
        if x is not None and y is not None:
            return x, y
    return None


class _Evaluator:
    """The state of evaluating over one set of facts (a :class:`Scope`): the field caches,
    the decimal context, the fields recorded as unknown and the step budget of the current
    expression. Its ``visit`` walks the tree (the reference path, see :func:`_visit`); the
    compiled closures (below) take it as their one argument and reuse its general helpers."""

    _dispatch: ClassVar[dict[type, Callable[[_Evaluator, Any], _V]]]

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.facts = facts
        self.fields: dict[str, Any] = {}  # path as written -> normalized value
        self.numbers: dict[str, Decimal | None] = {}  # path -> the value as a number, if any
        self.ctx = _context()
        self.recorded: set[str] = set()
        self.steps = 0
        self.ops: dict[str, Callable[[Decimal, Decimal], Decimal]] = {
            "+": self.ctx.add,
            "-": self.ctx.subtract,
            "*": self.ctx.multiply,
            "/": self.ctx.divide,
        }

    def record(self, v: _V) -> None:
        self.recorded.update(v.blame)

    def visit(self, node: _Node) -> _V:
        # Dispatch on the node's type with a dict: measurably faster than `match` on the
        # hot path (every node of every rule of every check).
        return self._dispatch[type(node)](self, node)

    def _lit(self, node: _Lit) -> _V:
        return _V(node.value)

    def _field(self, node: _Field) -> _V:
        return _V(self.lookup(node.path, node.segments), (node.path,))

    def lookup(self, path: str, segments: tuple[str | int, ...]) -> Any:
        """A field's normalized value, looked up once per scope (the same path as written
        always has the same segments)."""
        try:
            return self.fields[path]
        except KeyError:
            value = self.fields[path] = self.resolve(segments)
            return value

    def number(self, path: str, segments: tuple[str | int, ...]) -> Decimal | None:
        """A field's value as a number (a number, or a string that is a plain number)."""
        try:
            return self.numbers[path]
        except KeyError:
            number = self.numbers[path] = _as_number(self.lookup(path, segments))
            return number

    def _list(self, node: _List) -> _V:
        return _V([self.visit(item).value for item in node.items])

    def _cmp(self, node: _Cmp) -> _V:
        return _V(self.compare(node))

    def _in(self, node: _In) -> _V:
        return _V(self.member(node))

    def _not(self, node: _Not) -> _V:
        return _V(not self.truth(self.visit(node.operand)))

    def _and(self, node: _And) -> _V:
        return _V(all(self.truth(self.visit(o)) for o in node.operands))

    def _or(self, node: _Or) -> _V:
        return _V(any(self.truth(self.visit(o)) for o in node.operands))

    def truth(self, v: _V) -> bool:
        if isinstance(v.value, bool):
            return v.value
        self.record(v)
        return False

    # values

    def resolve(self, segments: tuple[str | int, ...]) -> Any:
        current: Any = self.facts
        for seg in segments:
            if isinstance(seg, int):
                if not isinstance(current, list | tuple) or seg >= len(current):
                    return None
                current = current[seg]
            else:
                if not isinstance(current, Mapping):
                    return None
                current = current.get(seg)
        return self.normalize(current)

    def normalize(self, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return Decimal(value)
        if isinstance(value, float):
            return Decimal(str(value)) if math.isfinite(value) else None
        if isinstance(value, Decimal):
            return self.finite(value)
        return value

    def finite(self, value: Decimal) -> Decimal | None:
        if not value.is_finite():
            return None
        if len(value.as_tuple().digits) <= _MAX_FACT_DIGITS:
            return value
        try:
            return self.ctx.plus(value)
        except DecimalException:
            return None

    # arithmetic

    def negate(self, node: _Neg) -> _V:
        v = self.visit(node.operand)
        n = _as_number(v.value)
        if n is None:
            self.record(v)
            return _V(None, v.blame)
        try:
            return _V(self.ctx.minus(n))
        except DecimalException:
            return _V(None)

    def arith(self, node: _Arith) -> _V:
        numbers: list[Decimal] = []
        blame: list[str] = []
        for child in (node.first, *(c for _, c in node.rest)):
            v = self.visit(child)
            n = _as_number(v.value)
            if n is None:
                self.record(v)
                blame.extend(v.blame)
            else:
                numbers.append(n)
        if len(numbers) != len(node.rest) + 1:
            return _V(None, tuple(dict.fromkeys(blame)))
        return _V(self.fold(numbers[0], [op for op, _ in node.rest], numbers[1:]))

    def fold(self, first: Decimal, ops: list[str], rest: list[Decimal]) -> Decimal | None:
        acc = first
        try:
            for op, n in zip(ops, rest, strict=True):
                if op == "/" and n.is_zero():
                    return None
                acc = self.ops[op](acc, n)
        except DecimalException:
            return None
        return acc

    # comparisons

    def fail(self, left: _V, right: _V) -> bool:
        """Record the operands of an undecidable comparison: the null ones, else both."""
        if left.value is None or right.value is None:
            for v in (left, right):
                if v.value is None:
                    self.record(v)
        else:
            self.record(left)
            self.record(right)
        return False

    def compare(self, node: _Cmp) -> bool:
        left, right = self.visit(node.left), self.visit(node.right)
        op = node.op
        # The common case (two numbers, ordered) without the general path's checks.
        if type(left.value) is Decimal and type(right.value) is Decimal and op in _ORDER:
            return bool(_ORDER[op](left.value, right.value))
        if op in ("==", "!="):
            if _is_null(node.left) or _is_null(node.right):
                same: bool | None = left.value is None and right.value is None
            else:
                same = self.equal(left.value, right.value)
            if same is None:
                return self.fail(left, right)
            return same if node.op == "==" else not same
        pair = (
            None
            if left.value is None or right.value is None
            else _orderable(left.value, right.value)
        )
        if pair is None:
            return self.fail(left, right)
        return bool(_ORDER[node.op](pair[0], pair[1]))

    def equal(self, a: Any, b: Any) -> bool | None:
        """``==`` on two evaluated values; None when it cannot be decided."""
        if a is None or b is None:
            return None
        if isinstance(a, str) and isinstance(b, Decimal):
            a, b = b, a
        if isinstance(a, Decimal) and isinstance(b, str):
            n = _numeric(b)
            return None if n is None else a == n
        return self.same(a, b, 0)

    def same(self, a: Any, b: Any, depth: int) -> bool | None:
        """Structural equality; None when a step budget or the depth limit runs out."""
        a, b = self.normalize(a), self.normalize(b)
        if a is None or b is None:
            return a is None and b is None
        if isinstance(a, bool) or isinstance(b, bool):
            return isinstance(a, bool) and isinstance(b, bool) and a == b
        if isinstance(a, Decimal) and isinstance(b, Decimal):
            return a == b
        if isinstance(a, str) and isinstance(b, str):
            return a == b
        both_lists = isinstance(a, list | tuple) and isinstance(b, list | tuple)
        both_maps = isinstance(a, Mapping) and isinstance(b, Mapping)
        if not (both_lists or both_maps):
            return a is b
        self.steps += 1
        if self.steps > _MAX_STEPS or depth >= MAX_DEPTH:
            return None
        return self.same_items(a, b, depth) if both_lists else self.same_maps(a, b, depth)

    def same_items(self, a: Any, b: Any, depth: int) -> bool | None:
        if len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):
            result = self.same(x, y, depth + 1)
            if result is not True:
                return result
        return True

    def same_maps(self, a: Mapping[Any, Any], b: Mapping[Any, Any], depth: int) -> bool | None:
        if len(a) != len(b):
            return False
        for key, x in a.items():
            if key not in b:
                return False
            result = self.same(x, b[key], depth + 1)
            if result is not True:
                return result
        return True

    def member(self, node: _In) -> bool:
        left, right = self.visit(node.left), self.visit(node.right)
        found = self.contains(left, right)
        if found is None:
            return False
        return found != node.negated

    def contains(self, left: _V, right: _V) -> bool | None:
        box, needle = right.value, left.value
        if not isinstance(box, str | list | tuple):
            self.record(right)  # null, or not something to look in
            if needle is None:
                self.record(left)
            return None
        if needle is None:
            self.record(left)
            return None
        if isinstance(box, str):
            return isinstance(needle, str) and needle in box
        return any(self.equal(needle, self.normalize(item)) is True for item in box)


# Every node type of the AST, and the evaluator's method for it.
_Evaluator._dispatch = {
    _Lit: _Evaluator._lit,
    _Field: _Evaluator._field,
    _List: _Evaluator._list,
    _Neg: _Evaluator.negate,
    _Arith: _Evaluator.arith,
    _Cmp: _Evaluator._cmp,
    _In: _Evaluator._in,
    _Not: _Evaluator._not,
    _And: _Evaluator._and,
    _Or: _Evaluator._or,
}


# --- compiled evaluation -------------------------------------------------------------------
#
# Each tree is compiled once, when it is parsed, into nested closures that take the
# evaluator (the facts, the field caches, the decimal context, the recorded fields, the step
# budget) and return the node's value: no dispatch and no value objects per node. The common
# shapes (a field against a number or a string, arithmetic on numbers, and/or/not over
# booleans) take a short path; whenever the short path is not sure, the closure hands the
# values to the general code below, which is the visitor's logic with the blame made static.
#
# Why blame can be static: of all the nodes, only a field carries blame that is not recorded
# yet. Arithmetic and negation record their operands' blame themselves before they give null,
# and every other node has none. So where the visitor records a child's blame, the closure
# records the child's path when the child is a field, and nothing otherwise. The recorded
# fields form a set and are reported in the order of the text, so the order in which they are
# recorded does not matter; nor does the order of field lookups, which change nothing but the
# caches. Children are still evaluated in the visitor's order (the step budget is shared).

_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    **_ORDER,
    "==": operator.eq,
    "!=": operator.ne,
}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_CTX_OPS: dict[str, Callable[[Context, Decimal, Decimal], Decimal]] = {
    "+": Context.add,
    "-": Context.subtract,
    "*": Context.multiply,
    "/": Context.divide,
}


def _blame(node: _Node) -> str:
    """The path to record when ``node``'s value is null or of the wrong type ("" for none)."""
    return node.path if isinstance(node, _Field) else ""


def _compile_top(root: _Node, kind: Kind) -> _Run:
    run = _compile(root)
    path = _blame(root)
    if not path:
        return run
    when = kind == "when"

    def top(ev: _Evaluator) -> Any:
        value = run(ev)
        if value is None or (when and not isinstance(value, bool)):
            ev.recorded.add(path)
        return value

    return top


def _compile(node: _Node) -> _Run:
    # Callers deep in the tree use _COMPILERS directly and loops, not comprehensions: each
    # level of nesting then costs a few frames of stack (test_worst_case_nesting...).
    return _COMPILERS[type(node)](node)


def _compile_lit(node: _Lit) -> _Run:
    value = node.value

    def lit(ev: _Evaluator) -> Any:
        return value

    return lit


def _compile_field(node: _Field) -> _Run:
    path, segments = node.path, node.segments

    def field_(ev: _Evaluator) -> Any:
        try:
            return ev.fields[path]
        except KeyError:
            return ev.lookup(path, segments)

    return field_


def _compile_list(node: _List) -> _Run:
    items = tuple([_COMPILERS[type(item)](item) for item in node.items])

    def list_(ev: _Evaluator) -> Any:
        return [item(ev) for item in items]

    return list_


def _compile_number(node: _Node) -> _Num:
    """``node``'s value as a number: a Decimal, a string that is a plain number, else None."""
    if isinstance(node, _Field):
        path, segments = node.path, node.segments

        def field_number(ev: _Evaluator) -> Decimal | None:
            try:
                return ev.numbers[path]
            except KeyError:
                return ev.number(path, segments)

        return field_number
    if isinstance(node, _Lit):
        constant = _as_number(node.value)

        def lit_number(ev: _Evaluator) -> Decimal | None:
            return constant

        return lit_number
    run = _COMPILERS[type(node)](node)
    if isinstance(node, _Arith | _Neg):
        return run  # a Decimal or None already
    return lambda ev: _as_number(run(ev))


def _compile_neg(node: _Neg) -> _Run:
    number, path = _compile_number(node.operand), _blame(node.operand)

    def neg(ev: _Evaluator) -> Decimal | None:
        n = number(ev)
        if n is None:
            if path:
                ev.recorded.add(path)
            return None
        try:
            return ev.ctx.minus(n)
        except DecimalException:
            return None

    return neg


def _compile_arith(node: _Arith) -> _Run:
    children = [node.first]
    steps: list[tuple[bool, Callable[[Context, Decimal, Decimal], Decimal]]] = []
    for op, child in node.rest:
        children.append(child)
        steps.append((op == "/", _CTX_OPS[op]))
    numbers: list[_Num] = []
    for child in children:
        numbers.append(_compile_number(child))
    paths = [_blame(child) for child in children]
    if len(children) == 2:
        last = children[1]
        constant = _as_number(last.value) if isinstance(last, _Lit) else None
        if constant is not None:
            return _binary_constant(numbers[0], paths[0], constant, *steps[0])
        return _binary(numbers[0], numbers[1], paths[0], paths[1], *steps[0])

    def arith(ev: _Evaluator) -> Decimal | None:
        values = [number(ev) for number in numbers]
        if None in values:
            for value, path in zip(values, paths, strict=True):
                if value is None and path:
                    ev.recorded.add(path)
            return None
        return _fold(ev.ctx, values, steps)

    return arith


def _binary(
    left: _Num,
    right: _Num,
    left_path: str,
    right_path: str,
    divide: bool,
    op: Callable[[Context, Decimal, Decimal], Decimal],
) -> _Run:
    def binary(ev: _Evaluator) -> Decimal | None:
        x, y = left(ev), right(ev)
        if x is None or y is None:
            if x is None and left_path:
                ev.recorded.add(left_path)
            if y is None and right_path:
                ev.recorded.add(right_path)
            return None
        if divide and y.is_zero():
            return None
        try:
            return op(ev.ctx, x, y)
        except DecimalException:
            return None

    return binary


def _binary_constant(
    left: _Num,
    left_path: str,
    constant: Decimal,
    divide: bool,
    op: Callable[[Context, Decimal, Decimal], Decimal],
) -> _Run:
    """``left op constant`` (``order.total / 2``); a division by zero is null."""
    zero = divide and constant.is_zero()

    def binary_constant(ev: _Evaluator) -> Decimal | None:
        x = left(ev)
        if x is None:
            if left_path:
                ev.recorded.add(left_path)
            return None
        if zero:
            return None
        try:
            return op(ev.ctx, x, constant)
        except DecimalException:
            return None

    return binary_constant


def _fold(
    ctx: Context,
    values: list[Decimal | None],
    steps: list[tuple[bool, Callable[[Context, Decimal, Decimal], Decimal]]],
) -> Decimal | None:
    acc = values[0]
    try:
        for (divide, op), n in zip(steps, values[1:], strict=True):
            if acc is None or n is None or (divide and n.is_zero()):
                return None
            acc = op(ctx, acc, n)
    except DecimalException:
        return None
    return acc


# comparisons


def _compile_cmp(node: _Cmp) -> _Run:
    left, right, op = node.left, node.right, node.op
    if isinstance(left, _Field) or isinstance(right, _Field):
        fast = _field_cmp(op, left, right)
        if fast is not None:
            return fast
    if _always_number(left) and _always_number(right):
        return _numbers_cmp(op, left, right)
    run_left, run_right = _COMPILERS[type(left)](left), _COMPILERS[type(right)](right)
    left_path, right_path = _blame(left), _blame(right)
    null = _is_null(left) or _is_null(right)
    if op not in _ORDER:

        def equality(ev: _Evaluator) -> bool:
            return _compare(ev, op, run_left(ev), run_right(ev), left_path, right_path, null)

        return equality

    order = _TESTS[op]

    def ordered(ev: _Evaluator) -> bool:
        a, b = run_left(ev), run_right(ev)
        if type(a) is Decimal and type(b) is Decimal:
            return order(a, b)
        return _compare(ev, op, a, b, left_path, right_path, null)

    return ordered


def _numbers_cmp(op: str, left: _Node, right: _Node) -> _Run:
    # Two numbers (literals, arithmetic) compare by value for every operator; when one is
    # null the general way records nothing (neither side is a field) and gives false.
    test = _TESTS[op]
    left_number, right_number = _compile_number(left), _compile_number(right)
    if isinstance(right, _Lit) and isinstance(right.value, Decimal):
        constant = right.value

        def number_vs_constant(ev: _Evaluator) -> bool:
            x = left_number(ev)
            if x is not None:
                return test(x, constant)
            return _compare(ev, op, x, constant, "", "", False)

        return number_vs_constant

    def numbers(ev: _Evaluator) -> bool:
        x, y = left_number(ev), right_number(ev)
        if x is not None and y is not None:
            return test(x, y)
        return _compare(ev, op, x, y, "", "", False)

    return numbers


def _always_number(node: _Node) -> bool:
    """Whether ``node``'s value is always a Decimal or null."""
    return isinstance(node, _Arith | _Neg) or (
        isinstance(node, _Lit) and type(node.value) is Decimal
    )


def _field_cmp(op: str, left: _Node, right: _Node) -> _Run | None:
    """A field against a number (a number literal or arithmetic) or a string literal, either
    way round; None for other shapes."""
    if isinstance(left, _Field):
        field_, other, test = left, right, _TESTS[op]
    elif isinstance(right, _Field):
        field_, other, test = right, left, _TESTS[_MIRROR[op]]
    else:
        return None
    path, segments = field_.path, field_.segments
    if field_ is left:

        def general(ev: _Evaluator, a: Any, b: Any) -> bool:
            return _compare(ev, op, a, b, path, "", False)

    else:

        def general(ev: _Evaluator, a: Any, b: Any) -> bool:
            return _compare(ev, op, b, a, "", path, False)

    if _always_number(other):
        return _field_vs_number(path, segments, _compile_number(other), test, general)
    if isinstance(other, _Lit) and type(other.value) is str:
        return _field_vs_string(path, segments, other.value, test, general)
    return None


def _field_vs_number(
    path: str,
    segments: tuple[str | int, ...],
    other: _Num,
    test: Callable[[Any, Any], bool],
    general: Callable[[_Evaluator, Any, Any], bool],
) -> _Run:
    # A field that reads as a number against a number: the visitor compares them by value,
    # whether the field holds a number or a string that is a plain number, for every
    # operator. Anything else (null on either side, a string that is not a number, a
    # boolean, a list, an object) goes the general way.
    def field_vs_number(ev: _Evaluator) -> bool:
        try:
            n = ev.numbers[path]
        except KeyError:
            n = ev.number(path, segments)
        b = other(ev)
        if n is not None and b is not None:
            return test(n, b)
        return general(ev, ev.lookup(path, segments), b)

    return field_vs_number


def _field_vs_string(
    path: str,
    segments: tuple[str | int, ...],
    text: str,
    test: Callable[[Any, Any], bool],
    general: Callable[[_Evaluator, Any, Any], bool],
) -> _Run:
    # Two strings compare as strings for every operator (by code point, even when both look
    # like numbers); anything else goes the general way.
    def field_vs_string(ev: _Evaluator) -> bool:
        try:
            a = ev.fields[path]
        except KeyError:
            a = ev.lookup(path, segments)
        if type(a) is str:
            return test(a, text)
        return general(ev, a, text)

    return field_vs_string


def _compare(
    ev: _Evaluator, op: str, a: Any, b: Any, left_path: str, right_path: str, null: bool
) -> bool:
    """:meth:`_Evaluator.compare` on evaluated values; ``null``: one side is the literal."""
    if type(a) is Decimal and type(b) is Decimal and op in _ORDER:
        return bool(_ORDER[op](a, b))
    if op in ("==", "!="):
        same = (a is None and b is None) if null else ev.equal(a, b)
        if same is None:
            return _fail(ev, a, b, left_path, right_path)
        return same if op == "==" else not same
    pair = None if a is None or b is None else _orderable(a, b)
    if pair is None:
        return _fail(ev, a, b, left_path, right_path)
    return bool(_ORDER[op](pair[0], pair[1]))


def _fail(ev: _Evaluator, a: Any, b: Any, left_path: str, right_path: str) -> bool:
    """:meth:`_Evaluator.fail`: record the null operands, else both."""
    either = a is None or b is None
    if left_path and (a is None or not either):
        ev.recorded.add(left_path)
    if right_path and (b is None or not either):
        ev.recorded.add(right_path)
    return False


def _compile_in(node: _In) -> _Run:
    left, negated = _COMPILERS[type(node.left)](node.left), node.negated
    left_path, right_path = _blame(node.left), _blame(node.right)
    box = node.right
    if isinstance(box, _List) and all(isinstance(item, _Lit) for item in box.items):
        # A list of literals: the same list every time, made once.
        values = tuple(item.value for item in box.items if isinstance(item, _Lit))
        if all(type(value) is str for value in values):
            strings = frozenset(values)

            def in_strings(ev: _Evaluator) -> bool:
                needle = left(ev)
                if type(needle) is str:  # a string equals a string only
                    return (needle in strings) is not negated
                return _member(ev, needle, values, left_path, "", negated)

            return in_strings

        def in_literals(ev: _Evaluator) -> bool:
            return _member(ev, left(ev), values, left_path, "", negated)

        return in_literals
    right = _COMPILERS[type(box)](box)

    def in_(ev: _Evaluator) -> bool:
        return _member(ev, left(ev), right(ev), left_path, right_path, negated)

    return in_


def _member(
    ev: _Evaluator, needle: Any, box: Any, left_path: str, right_path: str, negated: bool
) -> bool:
    """:meth:`_Evaluator.member` on evaluated values."""
    if not isinstance(box, str | list | tuple):
        if right_path:
            ev.recorded.add(right_path)  # null, or not something to look in
        if needle is None and left_path:
            ev.recorded.add(left_path)
        return False
    if needle is None:
        if left_path:
            ev.recorded.add(left_path)
        return False
    if isinstance(box, str):
        found = isinstance(needle, str) and needle in box
    else:
        found = any(ev.equal(needle, ev.normalize(item)) is True for item in box)
    return found != negated


# conditions: an operand that is not true or false counts as false, and its field is recorded


def _compile_operands(nodes: tuple[_Node, ...]) -> tuple[tuple[_Run, str], ...]:
    operands = []
    for node in nodes:
        operands.append((_COMPILERS[type(node)](node), _blame(node)))
    return tuple(operands)


def _compile_not(node: _Not) -> _Run:
    operand, path = _COMPILERS[type(node.operand)](node.operand), _blame(node.operand)

    def not_(ev: _Evaluator) -> bool:
        value = operand(ev)
        if value is True:
            return False
        if value is not False and path:
            ev.recorded.add(path)
        return True

    return not_


def _compile_and(node: _And) -> _Run:
    operands = _compile_operands(node.operands)
    if len(operands) == 2:
        return _and2(*operands[0], *operands[1])

    def and_(ev: _Evaluator) -> bool:
        for operand, path in operands:
            value = operand(ev)
            if value is not True:
                if value is not False and path:
                    ev.recorded.add(path)
                return False
        return True

    return and_


def _compile_or(node: _Or) -> _Run:
    operands = _compile_operands(node.operands)
    if len(operands) == 2:
        return _or2(*operands[0], *operands[1])

    def or_(ev: _Evaluator) -> bool:
        for operand, path in operands:
            value = operand(ev)
            if value is True:
                return True
            if value is not False and path:
                ev.recorded.add(path)
        return False

    return or_


def _and2(first: _Run, first_path: str, second: _Run, second_path: str) -> _Run:
    def and2(ev: _Evaluator) -> bool:
        value = first(ev)
        if value is True:
            value = second(ev)
            if value is True:
                return True
            if value is not False and second_path:
                ev.recorded.add(second_path)
        elif value is not False and first_path:
            ev.recorded.add(first_path)
        return False

    return and2


def _or2(first: _Run, first_path: str, second: _Run, second_path: str) -> _Run:
    def or2(ev: _Evaluator) -> bool:
        value = first(ev)
        if value is True:
            return True
        if value is not False and first_path:
            ev.recorded.add(first_path)
        value = second(ev)
        if value is True:
            return True
        if value is not False and second_path:
            ev.recorded.add(second_path)
        return False

    return or2


_COMPILERS: dict[type, Callable[[Any], _Run]] = {
    _Lit: _compile_lit,
    _Field: _compile_field,
    _List: _compile_list,
    _Neg: _compile_neg,
    _Arith: _compile_arith,
    _Cmp: _compile_cmp,
    _In: _compile_in,
    _Not: _compile_not,
    _And: _compile_and,
    _Or: _compile_or,
}
