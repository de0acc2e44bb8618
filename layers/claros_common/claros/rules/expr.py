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

Evaluation (:func:`evaluate`, :func:`matches`) never raises. It is three-valued: a value is
decided, or **unknown** (``None``, with the fields it depends on in :attr:`Outcome.unknown`).

* Numbers are ``Decimal``. Arithmetic runs in a private context (34 significant digits,
  half-even). Facts that are ``int`` become ``Decimal``; ``float`` goes through
  ``Decimal(str(f))``; NaN and infinities count as null; a fact number of more than 100
  digits is rounded to 34.
* Money-like strings are numbers, read by the near-miss amount finder's parser
  (:func:`claros.rules.amounts.read_number`): ``"$500.00"``, ``"500 EUR"``, ``"EUR 500"``,
  ``" 500"``, ``"1.200,50 EUR"``, ``"5e2"``. ``"1.000"`` and ``"1,000"`` are not read (their
  reading depends on the locale); nor are ``"NaN"``, ``"Infinity"``, ``"1e999999"`` or
  anything longer than 64 characters. A string that is not a number stays a string.
* Currencies are never converted: a comparison or arithmetic of two amounts whose strings
  name different currencies (``"5 KWD" < "10 EUR"``, through arithmetic too) is unknown,
  naming the fields of both sides. A bare number has no currency (``"$5" == 5``). A
  ``derived`` value with one currency among its operands is written in it (``"6 KWD"``).
* Unknown: arithmetic, a comparison or ``in`` whose operand is missing or null, or of a type
  the operation cannot use (a word against a number, a boolean against a string, a list
  where a number is needed, an ambiguous number); a division by zero (it names the divisor's
  fields) or an overflow. ``x == null`` / ``x != null`` are always decided.
* Comparisons: numbers by value (``1 == 1.0``, ``"$5" == 5``); two strings that both read
  as numbers by value (``"9" < "10"``); other strings by code point, and a word never
  equals another string, except that two words that differ only in spelling
  (:func:`folded`: ``"acme"``, ``"ACME "``, ``"ＡＣＭＥ"`` against ``"ACME"``) are unknown
  (and :attr:`Scope.spelled`, which makes the rule hold: claros.rules.decide), with
  ``==``, ``!=``, ``in``/``not in`` and the orderings where the spelling decides.
  Booleans, lists and objects take ``==``/``!=`` (lists and objects structurally, after
  100,000 comparisons or 32 levels: unknown).
* ``in``: a list means membership (with ``==``'s rules: found is true; else false when some
  item could be compared, unknown when none could or an item of a list literal is
  unknown), a string means substring (the needle must be a string), anything else is
  unknown. ``not in`` is the negation.
* ``and``/``or``/``not``: ``false and x`` and ``x and false`` are false, ``true or x`` and
  ``x or true`` true, whatever x; otherwise an unknown operand (or one that is not a
  boolean) makes the result unknown; ``not`` of unknown is unknown. A decided value names
  no unknown field. A ``when`` whose value is not a boolean is unknown.
* :attr:`Outcome.unknown` names, in the order the fields first appear in the text, each
  once, the fields an unknown value depends on.

Why evaluation cannot hang: there is no loop, function call, exponentiation or recursion in
the language. The parsed tree has at most :data:`MAX_TOKENS` tokens' worth of nodes and each
node is evaluated at most once (its currency read at most twice); arithmetic is capped at
34 digits; a field lookup follows its fixed path. The only work that grows with the facts
is a list membership or substring test (linear in the list or string) and structural
equality of lists/objects, which stops after :data:`MAX_DEPTH` levels of nesting and after
100,000 list/object comparisons per evaluation (then it is unknown, naming the fields
compared).
Recursion in the parser and evaluator is bounded by :data:`MAX_DEPTH` times a small
constant (a few hundred frames at worst).
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Mapping
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DecimalException,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)
from typing import Any, Literal, NamedTuple, TypeAlias

from claros.rules.amounts import Ambiguous, read_currency, read_number

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
    "folded",
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
# The nodes and tokens are NamedTuples, not dataclasses: a frozen dataclass compiles six
# generated methods when its module is imported (about 0.7 ms a class here, 9 ms for this
# module, paid by every cold start that checks or writes a rule), a NamedTuple one. Nodes
# are compiled to closures by type (``_COMPILERS``) and never compared with each other.


class _Lit(NamedTuple):
    value: Decimal | str | bool | None  # None is the `null` keyword


class _Field(NamedTuple):
    path: str  # as written
    segments: tuple[str | int, ...]


class _List(NamedTuple):
    items: tuple[_Node, ...]


class _Neg(NamedTuple):
    operand: _Node


class _Arith(NamedTuple):
    """``first op1 n1 op2 n2 ...`` of one precedence level, folded left to right."""

    first: _Node
    rest: tuple[tuple[str, _Node], ...]


class _Cmp(NamedTuple):
    op: str
    left: _Node
    right: _Node


class _In(NamedTuple):
    left: _Node
    right: _Node
    negated: bool


class _Not(NamedTuple):
    operand: _Node


class _And(NamedTuple):
    operands: tuple[_Node, ...]


class _Or(NamedTuple):
    operands: tuple[_Node, ...]


_Node: TypeAlias = "_Lit | _Field | _List | _Neg | _Arith | _Cmp | _In | _Not | _And | _Or"


# --- public API ----------------------------------------------------------------------------


class Expr:
    """A parsed expression. Equal when text and kind are equal. Immutable. A plain class,
    not a frozen dataclass (every function that decides or writes rules defines it at its
    cold start, ~1 ms of CPU as a dataclass)."""

    __slots__ = ("text", "kind", "_root", "_fields", "_run")

    text: str
    kind: Kind
    _root: _Node
    _fields: tuple[str, ...]  # first-appearance order
    # The tree compiled to closures, once: (evaluator, fields) -> Outcome.
    _run: Callable[[_Evaluator, tuple[str, ...]], tuple[Any, tuple[str, ...]]]

    def __init__(
        self,
        text: str,
        kind: Kind,
        root: _Node,
        fields: tuple[str, ...],
        run: Callable[[_Evaluator, tuple[str, ...]], tuple[Any, tuple[str, ...]]],
    ) -> None:
        for name, value in zip(self.__slots__, (text, kind, root, fields, run), strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: an Expr is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: an Expr is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.text, self.kind) == (other.text, other.kind)

    def __hash__(self) -> int:
        return hash((self.text, self.kind))

    def __repr__(self) -> str:
        return f"Expr(text={self.text!r}, kind={self.kind!r})"

    def is_condition(self) -> bool:
        """Whether the expression can be true or false: not a value written where a ``when``
        wants a condition (``amount + 1``, ``'refund'``, ``12``, ``null``, a list), whose
        value is never true or false, so that a ``when`` of it is always unknown. A bare
        field may hold a boolean, and counts."""
        root = self._root
        if isinstance(root, _Lit):
            return isinstance(root.value, bool)
        return not isinstance(root, _Arith | _Neg | _List)

    def fields(self) -> frozenset[str]:
        """Every field path the expression references, as written (``items[0].qty``)."""
        return frozenset(self._fields)

    def __reduce__(self) -> tuple[Any, ...]:
        # Closures do not pickle: an Expr pickles as its text and is parsed again.
        return (_parse, (self.text, self.kind))


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class Outcome(NamedTuple):
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
        ev.steps = 0
        return Outcome(*expr._run(ev, expr._fields))

    def matches(self, expr: Expr) -> tuple[bool | None, tuple[str, ...]]:
        if expr.kind != "when":
            raise ValueError(f"matches() needs a 'when' expression, not {expr.kind!r}")
        ev = self._ev
        ev.steps = 0
        ev.spelled = ev.numeral = False
        return expr._run(ev, expr._fields)  # a when is True, False or None

    @property
    def spelled(self) -> bool:
        """Whether the last :meth:`matches` met two words that differ only in spelling
        (:func:`folded`): a ``when`` it left unknown holds its rule, whatever the rule's
        ``on_unknown`` (docs/rules.md)."""
        return self._ev.spelled

    @property
    def numeral(self) -> bool:
        """Whether what made it :attr:`spelled` was a number written in a way the one
        parser does not read (``"400."``, ``"4_00"``, ``"inf"``) but a lenient reader may."""
        return self._ev.numeral


def evaluate(expr: Expr, facts: Mapping[str, Any]) -> Outcome:
    """The expression's value over ``facts`` and the fields it found unknown. Never raises.
    A value that cannot be decided is None, with the fields that made it so."""
    return Scope(facts).evaluate(expr)


def matches(expr: Expr, facts: Mapping[str, Any]) -> tuple[bool | None, tuple[str, ...]]:
    """Whether a ``when`` holds: True, False, or None when it cannot be decided (then with
    the unknown fields it depends on). A ``derived`` expression is a ValueError."""
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


# --- tokens --------------------------------------------------------------------------------


class _Token(NamedTuple):
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
#
# Three-valued: a node's value is a fact value (Decimal, str, bool, None, list, dict) or
# _Unknown, "cannot be decided", carrying the fields to blame. Only a field's value can be
# null without blame yet: its blame is its own path, known when the tree is compiled, so
# each closure below knows which path to name when an operand it needs is null or of the
# wrong type. Decided values carry no blame, so `false and <unknown>` is false and names
# nothing.
#
# Each tree is compiled once, when it is parsed, into nested closures that take the
# evaluator (the facts, the field caches, the decimal context, the step budget).


class _Unknown:
    """A value that cannot be decided, and the field paths that made it so."""

    __slots__ = ("blame",)

    def __init__(self, blame: tuple[str, ...]) -> None:
        self.blame = blame


_Run: TypeAlias = "Callable[[_Evaluator], Any]"
_Num: TypeAlias = "Callable[[_Evaluator], Decimal | _Unknown]"


def _context() -> Context:
    return Context(
        prec=_PRECISION,
        rounding=ROUND_HALF_EVEN,
        Emax=999_999,
        Emin=-999_999,
        traps=[InvalidOperation, DivisionByZero, Overflow],
    )


def _number_of(value: Any) -> Decimal | Ambiguous | None:
    """A value as a number: a Decimal, a money-like string's number (the one parser,
    :func:`claros.rules.amounts.read_number`), AMBIGUOUS, or None (not a number)."""
    if type(value) is Decimal:
        return value
    if isinstance(value, str):
        return read_number(value)
    return None


_FOLD_CACHED = 256  # longer texts (a reason, a note) are folded each time, never kept


def folded(text: str) -> str:
    """A word as a lenient reader may take it: case, accents, compatibility forms
    (fullwidth letters, ligatures), invisible characters (zero-width spaces, soft hyphens,
    a byte order mark), control characters other than spaces (``\x00``, ``\x1f``,
    ``\x90``) and runs of spaces do not count; ``"ÀCME "``, ``"ａｃｍｅ"`` and
    ``"AC\u200bME"`` are ``"acme"``. Databases that collate case- and accent-insensitively
    (MariaDB's ``utf8mb4_unicode_ci``) and apps that trim find one record for all of them;
    others tell them apart. Two words that differ but fold alike are therefore neither
    equal nor unequal to a rule (tests/security/test_supplier_spelled_past_a_deny_list.py)."""
    return _folded(text) if len(text) <= _FOLD_CACHED else _fold_word(text)


# The control characters that are not spaces: Unicode's collation weighs them nothing
# (DUCET gives U+0001 [.0000.0000.0000]), so ``AC\x01ME`` is ACME to a collating database
# (tests/security/test_supplier_spelled_with_control_characters.py). Python's
# ``str.split`` takes U+001C-U+001F for spaces; a collation does not.
_CONTROLS = dict.fromkeys([*range(0x00, 0x09), *range(0x0E, 0x20), *range(0x7F, 0x85),
                           *range(0x86, 0xA0)])  # fmt: skip


def _fold_word(text: str) -> str:
    text = text.translate(_CONTROLS)
    if text.isascii():
        return " ".join(text.split()).lower()
    import unicodedata  # only for text beyond ASCII

    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return " ".join(_unseen().sub("", decomposed).split())


@functools.cache
def _unseen() -> re.Pattern[str]:
    """What a reader does not see, after NFKD: combining diacritical marks (the accents NFKD
    splits off) and Unicode's default-ignorable code points (zero-width spaces and joiners,
    soft hyphen, bidirectional marks, variation selectors, the byte order mark, tags).
    Compiled at the first word beyond ASCII, not at import (a cold start's cost)."""
    return re.compile(
        "[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
        "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
        "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
        "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]+"
    )


_folded = functools.lru_cache(maxsize=8192)(_fold_word)


def _why(value: Any, path: str) -> tuple[str, ...]:
    """The blame of an operand that could not be used: its own, or its field's path."""
    if isinstance(value, _Unknown):
        return value.blame
    return (path,) if path else ()


def _undecided(a: Any, b: Any, a_path: str, b_path: str) -> _Unknown | None:
    """_Unknown naming the operands that are null or unknown; None when neither is."""
    a_bad = a is None or isinstance(a, _Unknown)
    b_bad = b is None or isinstance(b, _Unknown)
    if not (a_bad or b_bad):
        return None
    return _Unknown((_why(a, a_path) if a_bad else ()) + (_why(b, b_path) if b_bad else ()))


class _Evaluator:
    """The state of evaluating over one set of facts (a :class:`Scope`): the field caches,
    the decimal context and the step budget of the current expression."""

    __slots__ = (
        "ctx", "currencies", "facts", "fields", "folds", "numbers", "numeral", "spelled", "steps",
    )  # fmt: skip

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.facts = facts
        self.spelled = False  # two words met that differ only in spelling (folded)
        self.numeral = False  # ... or a number met one written as no number it reads
        self.folds: dict[str, str] | None = None  # long texts folded, once per scope
        self.fields: dict[str, Any] = {}  # path as written -> normalized value
        self.numbers: dict[str, Decimal | Ambiguous | None] = {}  # path -> as a number
        self.currencies: dict[str, str | None] = {}  # path -> the currency written in it
        self.ctx = _context()
        self.steps = 0

    def lookup(self, path: str, segments: tuple[str | int, ...]) -> Any:
        """A field's normalized value, looked up once per scope."""
        try:
            return self.fields[path]
        except KeyError:
            value = self.fields[path] = self.resolve(segments)
            return value

    def number(self, path: str, segments: tuple[str | int, ...]) -> Decimal | Ambiguous | None:
        try:
            return self.numbers[path]
        except KeyError:
            number = self.numbers[path] = _number_of(self.lookup(path, segments))
            return number

    def currency(self, path: str, segments: tuple[str | int, ...]) -> str | None:
        """The ISO code a field's money-like string is written in; None for anything else."""
        try:
            return self.currencies[path]
        except KeyError:
            value = self.lookup(path, segments)
            code = self.currencies[path] = read_currency(value) if type(value) is str else None
            return code

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

    def equal(self, a: Any, b: Any) -> bool | None:
        """``==`` on two values; None when it cannot be decided (different kinds of value,
        an ambiguous number, the step budget)."""
        if type(a) is Decimal and type(b) is Decimal:
            return bool(a == b)
        a_str, b_str = isinstance(a, str), isinstance(b, str)
        if a_str and b_str:
            if a == b:
                return True
            x, y = read_number(a), read_number(b)
            if type(x) is Decimal and type(y) is Decimal:
                if _other_currencies(read_currency(a), read_currency(b)):
                    return None  # amounts in two currencies: Claros does not convert
                return bool(x == y)
            if x is None or y is None:
                # A word never equals another string, unless the two differ only in
                # spelling: then neither equal nor unequal (Claros does not guess).
                return self.other_word(a, b)
            return None  # two numbers one can't read
        if a_str and type(b) is Decimal:
            return self.number_and_text(b, a)
        if type(a) is Decimal and b_str:
            return self.number_and_text(a, b)
        if a is None or b is None:
            return a is None and b is None
        if isinstance(a, bool) and isinstance(b, bool):
            return a == b
        both_lists = isinstance(a, list | tuple) and isinstance(b, list | tuple)
        both_maps = isinstance(a, Mapping) and isinstance(b, Mapping)
        if both_lists or both_maps:
            return self.same(a, b, 0)
        return None

    def number_and_text(self, number: Decimal, text: str) -> bool | None:
        """``==`` on a number and a string: by the string's value when the one parser reads
        it, else undecided, and ``numeral`` when it is written as a number an app may read
        (``"1_187"`` for 1187, as pydantic's int does: the rule holds, as with ``<`` and
        ``>``; tests/security/test_order_number_spelled_past_a_deny_list.py)."""
        value = read_number(text)
        if type(value) is Decimal:
            return bool(number == value)
        if _numeral(text):
            self.spelled = self.numeral = True
        return None

    def fold(self, text: str) -> str:
        """:func:`folded`, each text folded once per scope however many rules read it (a
        long one, a reason or a note, costs up to ~0.5 us a character beyond ASCII; short
        ones come from a process-wide cache)."""
        folds = self.folds
        if folds is None:
            folds = self.folds = {}
        try:
            return folds[text]
        except KeyError:
            word = _folded(text) if len(text) <= _FOLD_CACHED else _fold_word(text)
            folds[text] = word
            return word

    def other_word(self, a: str, b: str) -> bool | None:
        """False for two different words, None (and ``spelled``) when they differ only in
        spelling (:func:`folded`)."""
        if self.fold(a) != self.fold(b):
            return False
        self.spelled = True
        return None

    def same(self, a: Any, b: Any, depth: int) -> bool | None:
        """Structural equality; None when a step budget or the depth limit runs out."""
        a, b = self.normalize(a), self.normalize(b)
        if a is None or b is None:
            return a is None and b is None
        if isinstance(a, bool) or isinstance(b, bool):
            return isinstance(a, bool) and isinstance(b, bool) and a == b
        if isinstance(a, Decimal) and isinstance(b, Decimal):
            return bool(a == b)
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

    def member(self, needle: Any, items: Any) -> bool | None:
        """Whether a list holds ``needle`` (with ``==``'s rules); None when no item could
        be compared with it at all, or when it is not found and an item is null: a null
        item is an unknown one, as a null field in a written list is (a lookup that found
        no record for one of the items gives its value as null:
        tests/security/test_lookup_item_not_found_is_no_such_group.py)."""
        decided = False
        null = False
        was, self.spelled = self.spelled, False
        for item in items:
            value = self.normalize(item)
            if value is None:
                null = True
                continue
            found = self.equal(needle, value)
            if found is True:
                self.spelled = was
                return True
            if found is False:
                decided = True
        spelled, self.spelled = self.spelled, was or self.spelled
        if spelled:
            return None  # one item differs only in spelling: neither in nor not in
        if null:
            return None
        return False if decided or not items else None


_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    **_ORDER,
    "==": operator.eq,
    "!=": operator.ne,
}
_CTX_OPS: dict[str, Callable[[Context, Decimal, Decimal], Decimal]] = {
    "+": Context.add,
    "-": Context.subtract,
    "*": Context.multiply,
    "/": Context.divide,
}


def _is_null(node: _Node) -> bool:
    return isinstance(node, _Lit) and node.value is None


def _blame(node: _Node) -> str:
    """The path to name when ``node``'s value is null or of the wrong type ("" for none)."""
    return node.path if isinstance(node, _Field) else ""


def _paths(node: _Node) -> tuple[str, ...]:
    """Every field path under ``node``, in the order of the text."""
    if isinstance(node, _Field):
        return (node.path,)
    if isinstance(node, _Neg | _Not):
        return _paths(node.operand)
    if isinstance(node, _Arith):
        out = _paths(node.first)
        for _, child in node.rest:
            out += _paths(child)
        return out
    if isinstance(node, _Cmp | _In):
        return _paths(node.left) + _paths(node.right)
    if isinstance(node, _List):
        out = ()
        for item in node.items:
            out += _paths(item)
        return out
    if isinstance(node, _And | _Or):
        out = ()
        for operand in node.operands:
            out += _paths(operand)
        return out
    return ()


def _compile_top(
    root: _Node, kind: Kind
) -> Callable[[_Evaluator, tuple[str, ...]], tuple[Any, tuple[str, ...]]]:
    """The whole expression: (value, unknown fields in the order of the text); the value is
    None when it cannot be decided (for a `when`: anything but a boolean)."""
    run, path, when = _compile(root), _blame(root), kind == "when"
    currency = None if when else _compile_currency(root)

    def top(ev: _Evaluator, fields: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
        value = run(ev)
        if value is True or value is False:
            return value, ()
        if currency is not None and type(value) is Decimal:
            code = currency(ev)
            if type(code) is str:
                # A derived amount keeps the currency its operands are written in, so a
                # rule comparing it with an amount in another currency is unknown too.
                return _written_in(value, code), ()
        if isinstance(value, _Unknown):
            blame = value.blame
        elif when or value is None:
            blame = (path,) if path else ()  # a bare field that is null, or not a boolean
        else:
            return value, ()
        named = set(blame)
        return None, tuple(p for p in fields if p in named)

    return top


def _written_in(value: Decimal, code: str) -> str:
    """``value`` as a money string in ``code`` that reads back as exactly ``value``: "6 KWD";
    "1.2345E+1 KWD" where "12.345 KWD" would be ambiguous (docs/rules.md)."""
    text = f"{value} {code}"
    return text if read_number(text) == value else f"{value:E} {code}"


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
    items = _compile_operands(node.items)

    def list_(ev: _Evaluator) -> Any:
        out = []
        blame: tuple[str, ...] | None = None
        for item, path in items:
            value = item(ev)
            if isinstance(value, _Unknown) or (value is None and path):
                blame = (blame or ()) + _why(value, path)
            else:
                out.append(value)
        return out if blame is None else _Unknown(blame)

    return list_


def _compile_number(node: _Node) -> _Num:
    """``node``'s value as a number: a Decimal, else _Unknown naming what it could not read.
    Arithmetic under it is compiled without its own currency check: the arithmetic at the
    top checks its whole tree once."""
    if isinstance(node, _Field):
        path, segments = node.path, node.segments
        blame = _Unknown((path,))

        def field_number(ev: _Evaluator) -> Decimal | _Unknown:
            try:
                n = ev.numbers[path]
            except KeyError:
                n = ev.number(path, segments)
            return n if type(n) is Decimal else blame

        return field_number
    if isinstance(node, _Lit):
        n = _number_of(node.value)
        constant: Decimal | _Unknown = n if type(n) is Decimal else _Unknown(())

        def lit_number(ev: _Evaluator) -> Decimal | _Unknown:
            return constant

        return lit_number
    if isinstance(node, _Arith):
        return _compile_arith_raw(node)  # a Decimal or _Unknown already
    if isinstance(node, _Neg):
        return _compile_neg_raw(node)
    run = _COMPILERS[type(node)](node)

    def other_number(ev: _Evaluator) -> Decimal | _Unknown:
        value = run(ev)
        if isinstance(value, _Unknown):
            return value
        n = _number_of(value)
        return n if type(n) is Decimal else _Unknown(())

    return other_number


def _compile_neg(node: _Neg) -> _Run:
    return _unmixed(node, _compile_neg_raw(node))


def _compile_neg_raw(node: _Neg) -> _Run:
    number, paths = _compile_number(node.operand), _paths(node.operand)

    def neg(ev: _Evaluator) -> Decimal | _Unknown:
        n = number(ev)
        if type(n) is not Decimal:
            return n
        try:
            return ev.ctx.minus(n)
        except DecimalException:
            return _Unknown(paths)

    return neg


_Step: TypeAlias = "tuple[bool, Callable[[Context, Decimal, Decimal], Decimal], _Unknown]"


def _compile_arith(node: _Arith) -> _Run:
    return _unmixed(node, _compile_arith_raw(node))


def _compile_arith_raw(node: _Arith) -> _Run:
    children = [node.first]
    steps: list[_Step] = []
    for name, child in node.rest:
        children.append(child)
        # A division by zero cannot be decided: it names the divisor's fields.
        steps.append((name == "/", _CTX_OPS[name], _Unknown(_paths(child))))
    numbers: list[_Num] = []
    for child in children:
        numbers.append(_compile_number(child))
    failed = _Unknown(_paths(node))  # overflow and the like: every field it used
    if len(children) == 2:
        return _binary(numbers[0], numbers[1], steps[0], failed)

    def arith(ev: _Evaluator) -> Decimal | _Unknown:
        values = [number(ev) for number in numbers]
        blame: tuple[str, ...] | None = None
        for value in values:
            if isinstance(value, _Unknown):
                blame = (blame or ()) + value.blame
        if blame is not None:
            return _Unknown(blame)
        return _fold(ev.ctx, values, steps, failed)

    return arith


def _fold(
    ctx: Context, values: list[Decimal | _Unknown], steps: list[_Step], failed: _Unknown
) -> Decimal | _Unknown:
    acc = values[0]
    try:
        for (divide, op, by_zero), n in zip(steps, values[1:], strict=True):
            if not (type(acc) is Decimal and type(n) is Decimal):
                return failed  # not reached: the caller checked every value
            if divide and n.is_zero():
                return by_zero
            acc = op(ctx, acc, n)
    except DecimalException:
        return failed
    return acc


def _binary(left: _Num, right: _Num, step: _Step, failed: _Unknown) -> _Run:
    divide, op, by_zero = step

    def binary(ev: _Evaluator) -> Decimal | _Unknown:
        x, y = left(ev), right(ev)
        if type(x) is not Decimal or type(y) is not Decimal:
            return _either(x, y)
        if divide and y.is_zero():
            return by_zero
        try:
            return op(ev.ctx, x, y)
        except DecimalException:
            return failed

    return binary


def _either(x: Decimal | _Unknown, y: Decimal | _Unknown) -> _Unknown:
    """The unknown operands of a binary operation, as one."""
    if isinstance(x, _Unknown) and isinstance(y, _Unknown):
        return _Unknown(x.blame + y.blame)
    return x if isinstance(x, _Unknown) else y  # type: ignore[return-value]


# currencies: two amounts written in different currencies are neither compared nor
# combined (Claros does not convert; "5 KWD" < "10 EUR" is unknown, not 5 < 10). A bare
# number carries no currency: "$5" == 5 stays true.

_Cur: TypeAlias = "Callable[[_Evaluator], str | None | _Unknown]"


def _other_currencies(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a != b


def _compile_currency(node: _Node) -> _Cur | None:
    """The currency ``node``'s number is written in, as a function giving the ISO code,
    None (none written) or _Unknown (its arithmetic mixes two); None when ``node`` can
    never carry one (a bare number, a word, a condition)."""
    if isinstance(node, _Field):
        path, segments = node.path, node.segments

        def field_currency(ev: _Evaluator) -> str | None:
            try:
                return ev.currencies[path]
            except KeyError:
                return ev.currency(path, segments)

        return field_currency
    if isinstance(node, _Lit):
        code = read_currency(node.value) if type(node.value) is str else None
        if code is None:
            return None

        def lit_currency(ev: _Evaluator) -> str | None:
            return code

        return lit_currency
    if isinstance(node, _Neg):
        return _compile_currency(node.operand)
    if isinstance(node, _Arith):
        return _arith_currency(node)
    return None


def _arith_currency(node: _Arith) -> _Cur | None:
    parts: list[_Cur] = []
    for child in (node.first, *(child for _, child in node.rest)):
        part = _compile_currency(child)
        if part is not None:
            parts.append(part)
    if len(parts) < 2:
        return parts[0] if parts else None
    mixed = _Unknown(_paths(node))

    def arith_currency(ev: _Evaluator) -> str | None | _Unknown:
        found: str | None = None
        for part in parts:
            code = part(ev)
            if isinstance(code, _Unknown):
                return code
            if code is not None:
                if found is not None and code != found:
                    return mixed
                found = code
        return found

    return arith_currency


def _can_mix(node: _Node) -> bool:
    """Whether arithmetic under ``node`` combines two operands that may carry a currency."""
    if isinstance(node, _Neg):
        return _can_mix(node.operand)
    if not isinstance(node, _Arith):
        return False
    children = (node.first, *(child for _, child in node.rest))
    carriers = 0
    for child in children:
        if _can_mix(child):
            return True
        if _carries(child):
            carriers += 1
    return carriers >= 2


def _carries(node: _Node) -> bool:
    """Whether ``node``'s number may carry a currency (``_compile_currency`` is not None),
    without compiling anything: a field, a money literal, or arithmetic over one."""
    if isinstance(node, _Field):
        return True
    if isinstance(node, _Lit):
        return type(node.value) is str and read_currency(node.value) is not None
    if isinstance(node, _Neg):
        return _carries(node.operand)
    if isinstance(node, _Arith):
        return _carries(node.first) or any(_carries(child) for _, child in node.rest)
    return False


def _unmixed(node: _Arith | _Neg, run: _Run) -> _Run:
    """Arithmetic ``run``, unknown when it combines amounts in two currencies."""
    currency = _compile_currency(node) if _can_mix(node) else None
    if currency is None:
        return run

    def unmixed(ev: _Evaluator) -> Decimal | _Unknown:
        value: Decimal | _Unknown = run(ev)
        if type(value) is not Decimal:
            return value
        code = currency(ev)
        return code if isinstance(code, _Unknown) else value

    return unmixed


def _same_currency(left: _Node, right: _Node, run: _Run) -> _Run:
    """Comparison ``run``, unknown when its two sides are amounts in two currencies."""
    left_currency, right_currency = _compile_currency(left), _compile_currency(right)
    if left_currency is None or right_currency is None:
        return run
    mixed = _Unknown(_paths(left) + _paths(right))

    def same_currency(ev: _Evaluator) -> bool | _Unknown:
        result: bool | _Unknown = run(ev)
        if result is not True and result is not False:
            return result
        # Arithmetic that mixes currencies is unknown already (_unmixed): a side's currency
        # is a code or None here.
        a = left_currency(ev)
        if type(a) is not str:
            return result
        b = right_currency(ev)
        return mixed if type(b) is str and b != a else result

    return same_currency


# comparisons


def _compile_cmp(node: _Cmp) -> _Run:
    left, right, op = node.left, node.right, node.op
    run_left, run_right = _COMPILERS[type(left)](left), _COMPILERS[type(right)](right)
    left_path, right_path = _blame(left), _blame(right)
    test = _TESTS[op]
    if op in _ORDER:
        # Numbers first (a field's number is read once per scope); anything else the
        # general way, on the values.
        # A field's value is looked up again from the scope's cache; any other operand is
        # evaluated once (evaluating it again would double the work at every level of
        # nesting).
        left_number, right_number = _quick_number(left, run_left), _quick_number(right, run_right)
        left_field, right_field = isinstance(left, _Field), isinstance(right, _Field)

        def ordered(ev: _Evaluator) -> bool | _Unknown:
            x, y = left_number(ev), right_number(ev)
            if type(x) is Decimal and type(y) is Decimal:
                return test(x, y)
            a = run_left(ev) if left_field else x
            b = run_right(ev) if right_field else y
            return _order(ev, test, a, b, left_path, right_path)

        return _same_currency(left, right, ordered)
    negated = op == "!="
    if _is_null(left) or _is_null(right):
        # `x == null`: true when x is missing or null. Decided whatever x holds.
        def null_test(ev: _Evaluator) -> bool | _Unknown:
            a, b = run_left(ev), run_right(ev)
            for v in (a, b):
                if isinstance(v, _Unknown):
                    return v
            return (a is None and b is None) is not negated

        return null_test

    def equality(ev: _Evaluator) -> bool | _Unknown:
        a, b = run_left(ev), run_right(ev)
        if type(a) is Decimal and type(b) is Decimal:
            return test(a, b)
        undecided = _undecided(a, b, left_path, right_path)
        if undecided is not None:
            return undecided
        same = ev.equal(a, b)
        if same is None:
            return _Unknown(_why(a, left_path) + _why(b, right_path))
        return same is not negated

    return _same_currency(left, right, equality)


def _quick_number(node: _Node, run: _Run) -> _Run:
    """A field's value as a number (cached; anything else when it is not one), or the
    node's own value."""
    if not isinstance(node, _Field):
        return run
    path, segments = node.path, node.segments

    def field_number(ev: _Evaluator) -> Any:
        try:
            return ev.numbers[path]
        except KeyError:
            return ev.number(path, segments)

    return field_number


def _order(
    ev: _Evaluator, test: Callable[[Any, Any], bool], a: Any, b: Any, a_path: str, b_path: str
) -> bool | _Unknown:
    """``<`` ``<=`` ``>`` ``>=``: numbers (money-like strings too) by value, two strings that
    are not numbers by code point (unknown, and ``spelled``, when their spelling decides:
    ``" 2026-11-02" >= "2026-10-01"``); anything else cannot be decided."""
    undecided = _undecided(a, b, a_path, b_path)
    if undecided is not None:
        return undecided
    x, y = _number_of(a), _number_of(b)
    if type(x) is Decimal and type(y) is Decimal:
        return test(x, y)
    if x is None and y is None and isinstance(a, str) and isinstance(b, str):
        result = test(a, b)
        if result is test(ev.fold(a), ev.fold(b)):
            return result
        ev.spelled = True
    elif (type(x) is Decimal and _numeral(b)) or (type(y) is Decimal and _numeral(a)):
        ev.spelled = ev.numeral = True
    return _Unknown(_why(a, a_path) + _why(b, b_path))


_NUMBER_WORDS = frozenset({"inf", "infinity", "nan"})
_DECIMAL_DIGIT = re.compile(r"\d")  # any script's (str.isdecimal), searched in C


def _numeral(value: Any) -> bool:
    """A string compared with a number that the one parser did not read as one (or read
    two ways: ``1,000``), but that a lenient reader may: it holds a digit (``400.``,
    ``4_00``, ``٤٠٠``) or spells infinity or NaN, as Python's ``float`` and pydantic take
    them. The agent wrote it, so the rule holds
    (tests/security/test_amount_written_as_no_number_claros_reads.py). Whatever its length:
    ``float`` strips any run of spaces and reads 70 digits, so a cut-off here would be the
    way past."""
    if not isinstance(value, str):
        return False
    if _DECIMAL_DIGIT.search(value) is not None:
        return True
    return value.strip().lstrip("+-").lower() in _NUMBER_WORDS


def _compile_in(node: _In) -> _Run:
    left, negated = _COMPILERS[type(node.left)](node.left), node.negated
    left_path, right_path = _blame(node.left), _blame(node.right)
    box = node.right
    if isinstance(box, _List):
        return _in_list(left, left_path, box, negated)
    right = _COMPILERS[type(box)](box)

    def in_(ev: _Evaluator) -> bool | _Unknown:
        needle, container = left(ev), right(ev)
        undecided = _undecided(needle, container, left_path, right_path)
        if undecided is not None:
            return undecided
        if isinstance(container, str):
            if not isinstance(needle, str):
                return _Unknown(_why(needle, left_path) + _why(container, right_path))
            if needle in container:
                return not negated
            word = ev.fold(needle)
            if not word or word not in ev.fold(container):
                return negated
            ev.spelled = True  # there but for its spelling: neither in nor not in
            return _Unknown(_why(needle, left_path) + _why(container, right_path))
        if isinstance(container, list | tuple):
            found = ev.member(needle, container)
            if found is None:
                return _Unknown(_why(needle, left_path) + _why(container, right_path))
            return found is not negated
        return _Unknown(_why(container, right_path))  # a number, object or boolean

    return in_


def _in_list(left: _Run, left_path: str, box: _List, negated: bool) -> _Run:
    """``x in [...]``: found in any item is decided; else an unknown item (a null or unknown
    field) leaves it unknown."""
    items = _compile_operands(box.items)
    words: frozenset[str] | None = None
    spellings: frozenset[str] = frozenset()
    if box.items and all(
        isinstance(i, _Lit) and type(i.value) is str and read_number(i.value) is None
        for i in box.items
    ):
        # Words only: a string equals one of them exactly, or differs from one only in
        # spelling (neither in nor not in), or is none of them.
        words = frozenset(
            i.value for i in box.items if isinstance(i, _Lit) and isinstance(i.value, str)
        )
        spellings = frozenset(map(folded, words))
    spelled = _Unknown((left_path,) if left_path else ())

    def in_list(ev: _Evaluator) -> bool | _Unknown:
        needle = left(ev)
        if needle is None or isinstance(needle, _Unknown):
            return _Unknown(_why(needle, left_path))
        if words is not None and type(needle) is str:
            if needle in words:
                return not negated
            if ev.fold(needle) not in spellings:
                return negated
            ev.spelled = True
            return spelled
        return _in_items(ev, needle, items, left_path, negated)

    return in_list


def _in_items(
    ev: _Evaluator,
    needle: Any,
    items: tuple[tuple[_Run, str], ...],
    left_path: str,
    negated: bool,
) -> bool | _Unknown:
    """``needle in [...]`` item by item (a list holding fields or numbers), with ``==``'s
    rules: found is decided; else an unknown item, or one that differs from it only in
    spelling, leaves it unknown; else any item compared decides it."""
    blame: tuple[str, ...] | None = None
    decided = False
    was, ev.spelled = ev.spelled, False
    for item, path in items:
        value = item(ev)
        if isinstance(value, _Unknown) or (value is None and path):
            blame = (blame or ()) + _why(value, path)
            continue
        found = ev.equal(needle, value)
        if found is True:
            ev.spelled = was
            return not negated
        if found is False:
            decided = True
    spelled, ev.spelled = ev.spelled, was or ev.spelled
    if blame is not None:
        return _Unknown(blame)
    if (decided and not spelled) or not items:
        return negated
    return _Unknown(_why(needle, left_path))


# conditions: true, false, or unknown (an operand that is not a boolean is unknown)


def _compile_operands(nodes: tuple[_Node, ...]) -> tuple[tuple[_Run, str], ...]:
    operands = []
    for node in nodes:
        operands.append((_COMPILERS[type(node)](node), _blame(node)))
    return tuple(operands)


def _compile_not(node: _Not) -> _Run:
    operand, path = _COMPILERS[type(node.operand)](node.operand), _blame(node.operand)

    def not_(ev: _Evaluator) -> bool | _Unknown:
        value = operand(ev)
        if value is True:
            return False
        if value is False:
            return True
        return value if isinstance(value, _Unknown) else _Unknown(_why(value, path))

    return not_


def _compile_and(node: _And) -> _Run:
    operands = _compile_operands(node.operands)

    def and_(ev: _Evaluator) -> bool | _Unknown:
        # false wins over unknown: `false and x` and `x and false` are false whatever x is.
        blame: tuple[str, ...] | None = None
        for operand, path in operands:
            value = operand(ev)
            if value is False:
                return False
            if value is not True:
                blame = (blame or ()) + _why(value, path)
        return True if blame is None else _Unknown(blame)

    return and_


def _compile_or(node: _Or) -> _Run:
    operands = _compile_operands(node.operands)

    def or_(ev: _Evaluator) -> bool | _Unknown:
        # true wins over unknown: `true or x` and `x or true` are true whatever x is.
        blame: tuple[str, ...] | None = None
        for operand, path in operands:
            value = operand(ev)
            if value is True:
                return True
            if value is not False:
                blame = (blame or ()) + _why(value, path)
        return False if blame is None else _Unknown(blame)

    return or_


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
