"""What a page derives from a range of past aggregates, kept per ledger head.

A window's whole days and hours (``claros.evidence.windowed``) lie in the past: an append
is stamped with its writer's clock, so what it folds lands in the current hour, not in
them. Adding up 90 day buckets on every page load is what grows with the ledger (each
bucket holds its day's answer times, and a busy hour's samples); the sum is kept here
instead, with the chain head it was read at, and reused while it still holds.

It holds while no entry appended since is stamped inside the range: on reuse the entries
after the head it was read at are read (the ledger's own rows, no records), and any one
stamped in the range, or more than ``MAX_NEW`` of them, reads the range again. A prune
changes the log's first seq, which is part of the key. The aggregates are written with
their entries in one transaction by both stores; the one other writer, a rebuild
(``claros.rebuild``, maybe in another process), ends by writing a new random stamp doc,
which is part of the key too, so what is kept is what a fresh read would give. Per
process (a Lambda's container, the local server), per store object (weakly: a closed
store's go with it).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from claros.store.base import Store

__all__ = ["MAX_KEPT", "MAX_NEW", "STAMP_COLLECTION", "STAMP_KEY", "cached", "clear"]

T = TypeVar("T")

MAX_NEW = 5_000  # entries appended since the read that are checked before reading again
MAX_KEPT = 64  # ranges kept per store (a window reads five; pages read a few windows)
# One doc per workspace, rewritten with a new random stamp when a rebuild replaced its
# aggregates: ranges kept under another stamp are not used again (one keyed read a call).
STAMP_COLLECTION = "aggregate_stamp"
STAMP_KEY = "rebuilt"


class _Kept:
    """A range's value and when it was last known right (a plain class: a dataclass cost
    the functions that read windows ~1 ms of CPU to define at cold start)."""

    __slots__ = ("seen", "value")

    def __init__(self, seen: int, value: Any) -> None:
        self.seen = seen  # the chain head's seq when the range was read (or last found unchanged)
        self.value = value


_LOCK = threading.Lock()
_KEPT: weakref.WeakKeyDictionary[Any, OrderedDict[Hashable, _Kept]] = weakref.WeakKeyDictionary()


def _head_seq(store: Store, workspace: str) -> int:
    head = store.head(workspace)
    return head.seq if head is not None else 0


def _stamp(store: Store, workspace: str) -> str:
    doc = store.get_doc(workspace, STAMP_COLLECTION, STAMP_KEY)
    return "" if doc is None else str(doc.value.get("stamp", ""))


def _unchanged(store: Store, workspace: str, kept: _Kept, lo: int, hi: int, now: int) -> bool:
    """Whether no entry after ``kept.seen`` (up to ``now``) is stamped in [lo, hi)."""
    n = 0
    for entry in store.entries(workspace, since=kept.seen, limit=MAX_NEW + 1):
        if entry.seq > now:
            break
        n += 1
        if n > MAX_NEW or lo <= entry.ts < hi:
            return False
    return True


def cached(
    store: Store,
    workspace: str,
    key: Hashable,
    lo: int,
    hi: int,
    compute: Callable[[], T],
    *,
    head: int | None = None,
) -> T:
    """``compute()`` (a read of aggregates stamped in [lo, hi) ms), or what it gave before
    when no entry since is stamped in that range. ``head``: the chain head's seq, read
    already by the caller before anything of the range; the value must not be changed."""
    now = _head_seq(store, workspace) if head is None else head
    full = (workspace, key, lo, hi, _stamp(store, workspace))
    with _LOCK:
        ranges = _KEPT.get(store)
        kept = ranges.get(full) if ranges is not None else None
    if kept is not None:
        if kept.seen == now:
            return kept.value  # type: ignore[no-any-return]
        if kept.seen < now and _unchanged(store, workspace, kept, lo, hi, now):
            kept.seen = now
            return kept.value  # type: ignore[no-any-return]
    value = compute()  # read after ``now``: an entry in between is checked next time
    with _LOCK:
        ranges = _KEPT.setdefault(store, OrderedDict())
        ranges[full] = _Kept(now, value)
        ranges.move_to_end(full)
        while len(ranges) > MAX_KEPT:
            ranges.popitem(last=False)
    return value


def clear() -> None:
    """Forget every kept range (the bench's first-look timings; nothing else needs it)."""
    with _LOCK:
        _KEPT.clear()
