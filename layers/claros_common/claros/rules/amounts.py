"""Near-miss money: the largest money-like argument of an action (evidence.txt).

"Amounts are found by key words, not by domain: a key whose words include amount, total,
subtotal, price, cost, fee, payment, refund, charge or sum, with a number or a string like
$1,200.50 or 900 EUR. A currency comes from a symbol, a three-letter code next to the
number, or a currency field."

How that is read here:

* **Key words.** A key is split into words on everything that is not a letter (``_``, ``-``,
  ``.``, spaces, digits...) and on camelCase/PascalCase boundaries, then lowercased:
  ``grand_total`` → grand, total; ``refundAmount`` → refund, amount; ``USDPrice`` → usd,
  price; ``summary`` → summary (not sum); ``amount_cents`` → amount, cents. A key matches
  when one of its words is a key word or its plural (:data:`KEY_WORDS`). So ``total_count``
  matches too: the rule is words, not meaning. Keys longer than 200 characters never match.
* **Values.** Under a matching key: an ``int``, ``float`` or ``Decimal`` (never a ``bool``,
  NaN or infinity), taken as written (``amount_cents: 1200`` is 1200); a money-like string
  (:func:`parse_money`); an object whose ``value`` field is either (``"amount": {"value":
  12, "currency": "EUR"}`` gives path ``amount.value``; an inner ``amount`` field is found
  anyway, as a key of its own); a list of any of these (``prices[1]``).
* **Walk.** Objects and lists are walked recursively in insertion order, 32 levels deep and
  at most 100,000 values, so ``items[2].unit_price`` counts. Paths join keys with ``.`` and
  list positions with ``[n]``, keys as written.
* **Currency.** A symbol in the string (``$`` is USD, ``¥`` is JPY: :data:`SYMBOLS`) or an
  ISO 4217 code next to the number (``900 EUR``, ``usd 12``; :data:`ISO_4217`, so ``900
  PCS`` is not money at all); else the first currency field (a key whose words include
  "currency", with an ISO code or a symbol as its value) of the object holding the amount,
  else of the nearest enclosing object that has one; else none.
* **Largest.** By value, so a negative amount (a credit) loses to any positive one; on a tie
  the first one found wins.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NamedTuple

__all__ = [
    "AMBIGUOUS",
    "ISO_4217",
    "Ambiguous",
    "KEY_WORDS",
    "SYMBOLS",
    "Money",
    "find_amount",
    "key_words",
    "parse_money",
    "read_number",
]

KEY_WORDS = frozenset(
    {
        "amount",
        "total",
        "subtotal",
        "price",
        "cost",
        "fee",
        "payment",
        "refund",
        "charge",
        "sum",
        "amounts",
        "totals",
        "subtotals",
        "prices",
        "costs",
        "fees",
        "payments",
        "refunds",
        "charges",
        "sums",
    }
)

SYMBOLS: Mapping[str, str] = {
    "$": "USD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "₩": "KRW",
    "₽": "RUB",
    "₺": "TRY",
    "₪": "ILS",
    "₫": "VND",
    "₱": "PHP",
    "₦": "NGN",
    "฿": "THB",
}

# Active ISO 4217 codes (funds and precious metals included; XXX "no currency" and XTS
# "testing" left out).
ISO_4217 = frozenset(
    """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD
    BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF DKK DOP
    DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR
    IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD
    MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB
    PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD
    SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS
    VED VES VND VUV WST XAF XAG XAU XBA XBB XBC XBD XCD XCG XDR XOF XPD XPF XPT XSU XUA YER
    ZAR ZMW ZWG ZWL
    """.split()
)

_MAX_DEPTH = 32
_MAX_VALUES = 100_000
_MAX_KEY = 200
_MAX_MONEY_STRING = 64
_AMBIGUOUS_SYMBOLS = frozenset({"$", "¥"})  # a code next to them says which dollar or yen
_GROUP_ONLY = frozenset(" \u00a0\u2009\u202f'\u2019")  # spaces and apostrophes: 1 200, 1'200

_SP = "[ \u00a0\u2009\u202f]*"
_SYM = "[" + re.escape("".join(SYMBOLS)) + "]"
_CUR = rf"(?:{_SYM}|[A-Za-z]{{3}})"
_MONEY_PATTERN = (
    rf"(?P<sign1>[-+\u2212])?{_SP}(?P<pre>{_CUR})?{_SP}(?P<sign2>[-+\u2212])?{_SP}"
    rf"(?P<num>[0-9]+(?:[.,'\u2019 \u00a0\u2009\u202f][0-9]+)*)(?P<exp>[eE][-+]?[0-9]{{1,4}})?"
    rf"{_SP}(?P<post>{_CUR})?"
)
_MAX_ADJUSTED = 300  # 5e2 is money; 1e999 is not (no JSON number writes it)
# What splits the digit runs of a matched number: its number group holds only digits and
# single separators, so any non-digit is one (an ASCII class: cheap to compile).
_SEPARATOR = re.compile("([^0-9])")
_PLAIN = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_AMBIGUOUS_NUMBER = re.compile(r"[1-9][0-9]{0,2}[.,][0-9]{3}")
_LETTER_RUNS = re.compile(r"[^\W\d_]+")


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class Money(NamedTuple):
    amount: Decimal
    currency: str | None  # ISO 4217 code
    path: str  # where it was found: "amount", "refund.amount", "items[2].unit_price"


def find_amount(arguments: Mapping[str, Any]) -> Money | None:
    """The largest money-like argument, or None when no matching key holds money."""
    walk = _Walk()
    if isinstance(arguments, Mapping):
        walk.mapping(arguments, "", 0, None)
    if walk.amount is None:
        return None
    return Money(walk.amount, walk.currency, walk.path)


@functools.cache
def _money() -> re.Pattern[str]:
    """The money pattern, compiled at the first money-like string rather than at import:
    its classes of characters beyond Latin-1 (thin spaces, the minus sign, most currency
    symbols) cost ~2 ms to compile, at every cold start of every function that imports the
    rule language, and a process whose amounts are all JSON numbers never needs it."""
    return re.compile(_MONEY_PATTERN)


@functools.lru_cache(maxsize=8192)  # the same keys come back call after call
def key_words(key: str) -> tuple[str, ...]:
    """The lowercased words of a key: ``"refundAmount"`` → ``("refund", "amount")``."""
    words: list[str] = []
    for run in _LETTER_RUNS.findall(key):
        words.extend(_camel_split(run))
    return tuple(w.lower() for w in words)


class Ambiguous:
    """A number whose reading depends on the writer's locale: ``1.000`` (1 to a machine,
    1000 to a German reader) or ``1,000``. The near-miss finder takes the reading
    :func:`parse_money` documents; the expression language does not guess (a rule then
    cannot be decided on it: its ``on_unknown`` answers)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "AMBIGUOUS"


AMBIGUOUS = Ambiguous()


def read_number(text: str) -> Decimal | Ambiguous | None:
    """A string as the expression language reads it: the number of a money-like string
    (:func:`parse_money`, currency dropped), :data:`AMBIGUOUS` for a single ``.`` or ``,``
    followed by exactly three digits (``1.000``, ``1,000 EUR``), None when it is not a
    number (a word, a date, ``NaN``, ``Infinity``, ``1e999999``, more than 64 characters)."""
    if len(text) > 4 * _MAX_MONEY_STRING:  # never money, and never kept in the cache
        return None
    return _read_number(text)


@functools.lru_cache(maxsize=8192)  # the same strings come back rule after rule
def _read_number(text: str) -> Decimal | Ambiguous | None:
    parsed = _parse(text)
    if parsed is None:
        return None
    number, _currency, ambiguous = parsed
    return AMBIGUOUS if ambiguous else number


def read_currency(text: str) -> str | None:
    """The ISO code a money-like string is written in (``"5 KWD"``, ``"€9"``), or None: no
    currency written, or not money."""
    if len(text) > 4 * _MAX_MONEY_STRING:
        return None
    return _read_currency(text)


@functools.lru_cache(maxsize=8192)
def _read_currency(text: str) -> str | None:
    parsed = _parse(text)
    return None if parsed is None else parsed[1]


def parse_money(text: str) -> tuple[Decimal, str | None] | None:
    """The amount and currency of a money-like string, or None.

    Accepted: an optional sign, an optional symbol or ISO code before and/or after the
    number (a code beside ``$`` or ``¥`` names the currency: ``$12 CAD`` is CAD; other
    disagreements are not money), and digits with optional grouping and decimal part:
    ``$1,200.50``, ``1200.50``, ``900 EUR``, ``EUR 900``, ``€900``, ``-12.5``,
    ``USD 1,000``, ``1 200,50 €``, ``CHF 1'200.50``.

    Separators: with two kinds, the last one is the decimal point (``1,200.50``,
    ``1.200,50``). With one kind used more than once, it groups thousands (``1.200.000``).
    A single ``.`` is always a decimal point (``1.200`` is 1.2, as machines write it); a
    single ``,`` followed by exactly three digits groups thousands (``1,200`` is 1200),
    otherwise it is a decimal comma (``12,50``). Spaces and apostrophes only group. Groups
    must be 1-3 digits then 3 digits each, or the string is not money. Dates, words and
    anything longer than 64 characters are not money.
    """
    parsed = _parse(text)
    return None if parsed is None else (parsed[0], parsed[1])


def _parse(text: str) -> tuple[Decimal, str | None, bool] | None:
    """The one reading of money-like strings: (number, currency, ambiguous) or None."""
    text = text.strip()
    if not text or len(text) > _MAX_MONEY_STRING:
        return None
    m = _money().fullmatch(text)
    if m is None or (m["sign1"] and m["sign2"]):
        return None
    ok, currency = _currency_beside(m["pre"], m["post"])
    if not ok:
        return None
    core = m["num"]
    if m["exp"]:
        # An exponent goes with a plain number only (5e2, 1.5E3), and stays within what
        # a JSON number can write.
        if not _PLAIN.fullmatch(core):
            return None
        number: Decimal | None = Decimal(core + m["exp"])
        if abs(Decimal(core + m["exp"]).adjusted()) > _MAX_ADJUSTED:
            return None
    else:
        number = _number(core)
    if number is None:
        return None
    if (m["sign1"] or m["sign2"] or "") in ("-", "\u2212"):
        number = number.copy_negate()
    return number, currency, not m["exp"] and _AMBIGUOUS_NUMBER.fullmatch(core) is not None


# --- key words -----------------------------------------------------------------------------


def _camel_split(run: str) -> list[str]:
    out: list[str] = []
    start = 0
    for i in range(1, len(run)):
        prev, here = run[i - 1], run[i]
        after = run[i + 1] if i + 1 < len(run) else ""
        if (prev.islower() and here.isupper()) or (
            prev.isupper() and here.isupper() and after.islower()
        ):
            out.append(run[start:i])
            start = i
    out.append(run[start:])
    return out


def _matches(key: str) -> bool:
    return len(key) <= _MAX_KEY and _has_key_word(key)


def _is_currency_key(key: str) -> bool:
    return len(key) <= _MAX_KEY and _has_currency_word(key)


# Keys longer than _MAX_KEY never reach these caches.
@functools.lru_cache(maxsize=8192)
def _has_key_word(key: str) -> bool:
    return any(w in KEY_WORDS for w in key_words(key))


@functools.lru_cache(maxsize=8192)
def _has_currency_word(key: str) -> bool:
    return "currency" in key_words(key)


# --- money strings -------------------------------------------------------------------------


def _code(marker: str | None) -> str | None:
    """The ISO code a symbol or code stands for; "" when it is not a currency."""
    if marker is None:
        return None
    if marker in SYMBOLS:
        return SYMBOLS[marker]
    upper = marker.upper()
    return upper if upper in ISO_4217 else ""


def _currency_beside(pre: str | None, post: str | None) -> tuple[bool, str | None]:
    """Whether the markers around a number make money, and the currency they name."""
    a, b = _code(pre), _code(post)
    if a == "" or b == "":
        return False, None
    if a is None or b is None or a == b:
        return True, a or b
    if pre in _AMBIGUOUS_SYMBOLS and post not in SYMBOLS:
        return True, b
    if post in _AMBIGUOUS_SYMBOLS and pre not in SYMBOLS:
        return True, a
    return False, None


def _grouped(runs: list[str]) -> str | None:
    """Digit runs that group thousands correctly, joined; else None."""
    first, rest = runs[0], runs[1:]
    if not 1 <= len(first) <= 3 or first.startswith("0") or any(len(r) != 3 for r in rest):
        return None
    return "".join(runs)


def _number(core: str) -> Decimal | None:
    parts = _SEPARATOR.split(core)
    runs, seps = parts[0::2], parts[1::2]
    if not seps:
        return Decimal(core)
    last = seps[-1]
    if len(set(seps)) == 1:
        if len(seps) == 1 and last == ".":
            return Decimal(f"{runs[0]}.{runs[1]}")
        if len(seps) == 1 and last == "," and _grouped(runs) is None:
            return Decimal(f"{runs[0]}.{runs[1]}")
        whole = _grouped(runs)
        return None if whole is None else Decimal(whole)
    groups = set(seps[:-1])
    if last in _GROUP_ONLY or len(groups) != 1 or last in groups:
        return None
    whole = _grouped(runs[:-1])
    return None if whole is None else Decimal(f"{whole}.{runs[-1]}")


def _field_currency(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    code = _code(value.strip())
    return code or None


# --- the walk ------------------------------------------------------------------------------


def _decimal(value: Any) -> Decimal | None:
    """A number argument as a Decimal; None for bools, NaN, infinities and non-numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        number = Decimal(str(value))
    elif isinstance(value, Decimal):
        number = value
    else:
        return None
    return number if number.is_finite() else None


# Values of these exact types are never containers: under a key that does not match they
# can be counted and skipped without the general walk (the result is the same).
_LEAVES = frozenset({str, int, float, bool, type(None), Decimal})
_NUMBERS = frozenset({int, float, Decimal})


class _Walk:
    def __init__(self) -> None:
        # The best Money so far, made into one at the end.
        self.amount: Decimal | None = None
        self.currency: str | None = None
        self.path = ""
        self.seen = 0

    def offer(self, amount: Decimal, currency: str | None, path: str) -> None:
        if self.amount is None or amount > self.amount:
            self.amount, self.currency, self.path = amount, currency, path

    def mapping(self, obj: Mapping[Any, Any], path: str, depth: int, outer: str | None) -> None:
        currency = self.own_currency(obj) or outer
        for key, value in obj.items():
            name = key if type(key) is str else str(key)
            if type(value) in _LEAVES and not (len(name) <= _MAX_KEY and _has_key_word(name)):
                self.seen += 1  # neither money nor holding any: counted, nothing more
                continue
            self.value(value, f"{path}.{name}" if path else name, depth + 1, currency, name)

    def own_currency(self, obj: Mapping[Any, Any]) -> str | None:
        for key, value in obj.items():
            name = key if type(key) is str else str(key)
            if len(name) <= _MAX_KEY and _has_currency_word(name):
                code = _field_currency(value)
                if code is not None:
                    return code
        return None

    def value(self, value: Any, path: str, depth: int, currency: str | None, key: str) -> None:
        self.seen += 1
        if self.seen > _MAX_VALUES:
            return
        matched = _matches(key)
        if matched:
            self.candidate(value, path, currency)
        if depth >= _MAX_DEPTH:
            return
        if type(value) is dict or isinstance(value, Mapping):
            self.mapping(value, path, depth, currency)
        elif isinstance(value, list | tuple):
            # Items of a list inherit its key: "prices": [10, 20] holds two prices.
            for i, item in enumerate(value):
                if not matched and type(item) in _LEAVES:
                    self.seen += 1  # as in mapping()
                    continue
                self.value(item, f"{path}[{i}]", depth + 1, currency, key if matched else "")

    def candidate(self, value: Any, path: str, currency: str | None) -> None:
        if type(value) in _NUMBERS:  # the common case first; none of these is a str or Mapping
            number = _decimal(value)
            if number is not None:
                self.offer(number, currency, path)
        elif isinstance(value, str):
            parsed = parse_money(value)
            if parsed is not None:
                self.offer(parsed[0], parsed[1] or currency, path)
        elif isinstance(value, Mapping):
            self.wrapped(value, path, currency)
        else:
            number = _decimal(value)
            if number is not None:
                self.offer(number, currency, path)

    def wrapped(self, obj: Mapping[Any, Any], path: str, outer: str | None) -> None:
        """``"amount": {"value": 12, "currency": "EUR"}``: the object's ``value`` field."""
        currency = self.own_currency(obj) or outer
        for key, value in obj.items():
            name = str(key)
            if name.lower() == "value" and not isinstance(value, Mapping | list | tuple):
                self.candidate(value, f"{path}.{name}", currency)
                return
