"""A window's start edge as a row minus what lies before the window's start (issue 13,
item 7: a first look as fast at a million entries as at 10k).

A window's start edge, from its start to the next midnight, is read forward as the hour
rows up to midnight and the records of its partial hour; early in the day that is up to
23 rows and an hour of records (at 1M entries an hour row is ~12 KB and an hour holds
~350 records). ``claros.evidence.windowed`` may read it instead as a row that holds the
edge and what lies before it (the start's day row, or the hour rows from the start's
hour) minus what lies before the start (the hour rows and the minutes of records from
the day's or the hour's start): ``minus(a, b)``, whichever side reads less. Nothing more
is written per append.

What subtracts exactly: counts, the ``ov_n`` bins, and the answer times (taken away by
value when a median's bin is split: ``Less``). What may not, with the doubt it leaves,
settled against the rest of the window (``settled``), else the edge is read forward:

* a guard both sides have (``guard``): the edge may or may not hold it; the rest must;
* a node left empty (``node``): a check that counted nothing (an approved repeat) still
  makes its agent's node; the rest must have the node;
* a sample list missing items (``tail``): a row keeps the latest few; the rest must hold
  enough later items that the ones the row dropped could not be among the window's;
* an exact decimal sum (``dec``): its value subtracts, but its exponent is the finest of
  the amounts added and the part before may have set it; the rest must have one as fine.
  A sum too long for exact arithmetic (over 24 digits) or not finite is not subtracted;
* ``seq_min`` and ``seq_max`` (no page reads them) are not subtracted at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from claros.aggregates import FLAGGED_ITEMS, SAMPLES

__all__ = ["DECIMALS", "UNSUBTRACTED", "Less", "keep", "minus", "settled"]

DECIMALS = frozenset({"amounts", "sev_amounts"})  # maps of exact decimal sums (as text)
UNSUBTRACTED = frozenset({"seq_min", "seq_max"})
_TAILS = {"flagged": FLAGGED_ITEMS, "items": FLAGGED_ITEMS}
_DIGITS = 24  # longer sums may have been rounded (28 digits): not subtracted

Path = tuple[str, ...]
Doubt = tuple[Any, ...]


def keep(key: str) -> int:
    """How many of the latest items a bucket keeps in list ``key``."""
    return _TAILS.get(key, SAMPLES)


class Less:
    """A part of a window's gathered ``ov_ms``: answer times to take away (those of what
    lies before a window's start, inside a row that holds them)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts

    def __eq__(self, other: object) -> bool:  # the tests compare a kept sum with a fresh one
        return isinstance(other, Less) and self.parts == other.parts

    __hash__ = None  # type: ignore[assignment]


class _Cannot(Exception):
    """b is not a part of a, or a sum that does not subtract exactly."""


def _parts(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _seqs(b: Mapping[str, Any]) -> set[int]:
    """The seqs of every sample ``b`` holds: a row's latest items that lie before the
    start are among the latest items of the part before (a subset keeps them)."""
    out: set[int] = set()
    for key, items in b.items():
        if key.startswith("s_"):
            out.update(int(item["seq"]) for item in items)
    for node in (b.get("flagged") or {}).values():
        out.update(int(item["seq"]) for item in node.get("items") or ())
    return out


def minus(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[dict[str, Any], list[Doubt]] | None:
    """``a`` without ``b`` (a bucket, or a window's sum, that holds every entry ``b``
    does), and the doubts the rest of the window must settle; None: it does not subtract
    (``b`` holds what ``a`` does not, a sum that is not exact, ``seq_min``/``seq_max``)."""
    if any(key in UNSUBTRACTED for key in a):
        return None
    doubts: list[Doubt] = []
    try:
        out = _node(a, b, (), False, _seqs(b), doubts)
    except _Cannot:
        return None
    return out, doubts


def _node(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    path: Path,
    decimals: bool,
    seqs: set[int],
    doubts: list[Doubt],
) -> dict[str, Any]:
    if any(key not in a for key in b):
        raise _Cannot
    out: dict[str, Any] = {}
    for key, av in a.items():
        bv = b.get(key)
        if bv is None:
            out[key] = av  # shared, never changed: a window's sum copies what it merges
        elif key == "ov_ms" and not path:
            out[key] = [*_parts(av), Less(_parts(bv))]
        elif key == "ov_n" and not path:
            left = _counts(av, bv)
            if left:
                out[key] = left
        elif key == "guards":
            _guards(out, av, bv, path, doubts)
        elif isinstance(av, list):
            _tail(out, key, av, (*path, key), seqs, doubts)
        elif isinstance(av, dict):
            _child(out, key, av, bv, (*path, key), decimals or key in DECIMALS, seqs, doubts)
        elif decimals:
            _decimal(out, key, av, bv, (*path, key), doubts)
        else:
            _count(out, key, av, bv)
    return out


def _child(
    out: dict[str, Any],
    key: str,
    av: dict[str, Any],
    bv: Any,
    path: Path,
    decimals: bool,
    seqs: set[int],
    doubts: list[Doubt],
) -> None:
    if not isinstance(bv, dict):
        raise _Cannot
    sub = _node(av, bv, path, decimals, seqs, doubts)
    if sub:
        out[key] = sub
    else:  # a check that counted nothing (an approved repeat) still makes its agent's node
        doubts.append(("node", path))


def _count(out: dict[str, Any], key: str, av: Any, bv: Any) -> None:
    if not isinstance(av, int) or not isinstance(bv, int) or av < bv:
        raise _Cannot
    if av > bv:
        out[key] = av - bv  # a count is never 0 in a bucket: one that is, is absent


def _guards(out: dict[str, Any], av: Any, bv: Any, path: Path, doubts: list[Doubt]) -> None:
    """A guard only ``a`` has is the edge's; one ``b`` has too may be the edge's or not."""
    if any(g not in av for g in bv):
        raise _Cannot
    certain = [g for g in av if g not in bv]
    doubts.extend(("guard", path, g) for g in bv)
    if certain:
        out["guards"] = certain


def _counts(a: Any, b: Any) -> Any:
    """``ov_n`` (person -> decision -> bin -> answers) less ``b``'s: a node there always
    holds a count, so an empty one is absent with no doubt."""
    if isinstance(a, int) and isinstance(b, int):
        if a < b:
            raise _Cannot
        return a - b
    if not isinstance(a, dict) or not isinstance(b, dict) or any(k not in a for k in b):
        raise _Cannot
    out = {}
    for key, value in a.items():
        left = _counts(value, b[key]) if key in b else value
        if left:
            out[key] = left
    return out


def _tail(
    out: dict[str, Any], key: str, items: list[Any], path: Path, seqs: set[int], doubts: list[Doubt]
) -> None:
    """A list of the latest items by seq, those before the start taken out. When the list
    was full and lost some, the edge's next latest items are unknown, all older than the
    list's oldest: the rest of the window must hold enough newer ones."""
    rest = [item for item in items if int(item["seq"]) not in seqs]
    if len(rest) < len(items) and len(items) >= keep(key):
        doubts.append(("tail", path, keep(key), min(int(i["seq"]) for i in items), len(rest)))
    if rest:
        out[key] = rest


def _decimal(
    out: dict[str, Any], key: str, av: Any, bv: Any, path: Path, doubts: list[Doubt]
) -> None:
    da, ea = _exact(av)
    db, eb = _exact(bv)
    left = da - db
    if eb > ea:
        # The finest amount is on the edge's side: its sum has the row's exponent.
        out[key] = str(left)
        return
    doubts.append(("dec", path, ea))
    if left:  # zero: the edge may hold no amount in that currency, or some adding to 0
        out[key] = str(left)


def _exact(text: Any) -> tuple[Decimal, int]:
    """A sum and its exponent, if short enough that adding and subtracting stay exact."""
    try:
        value = Decimal(str(text))
    except ArithmeticError as exc:
        raise _Cannot from exc
    sign_digits_exponent = value.as_tuple()
    exponent = sign_digits_exponent.exponent
    if not isinstance(exponent, int) or len(sign_digits_exponent.digits) > _DIGITS:
        raise _Cannot  # NaN or infinite, or too long
    return value, exponent


def _at(bucket: Mapping[str, Any], path: Path) -> Any:
    node: Any = bucket
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def settled(doubts: list[Doubt], rest: Mapping[str, Any]) -> bool:
    """Whether ``rest`` (the window's sum without the edge, its samples not yet cut)
    settles every doubt, so that it plus the edge is what a scan of the window gives."""
    for doubt in doubts:
        sort, path = doubt[0], doubt[1]
        found = _at(rest, path)
        if sort == "node":
            ok = found is not None
        elif sort == "guard":
            ok = isinstance(found, Mapping) and doubt[2] in (found.get("guards") or ())
        elif sort == "tail":
            _, _, wanted, oldest, known = doubt
            newer = sum(1 for item in found or () if int(item["seq"]) > oldest)
            ok = known + newer >= wanted
        else:  # dec: the rest's sum is as fine as the row's, so the edge's is too
            ok = found is not None and _exponent(found) <= doubt[2]
        if not ok:
            return False
    return True


def _exponent(text: Any) -> float:
    try:
        return _exact(text)[1]
    except _Cannot:
        return float("inf")
