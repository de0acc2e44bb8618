"""The aggregate buckets (``claros.aggregates``) a store last wrote, kept parsed.

Every append folds its records into its hour's and its day's bucket, in the append's
transaction. A bucket of a busy hour is ~15 KB of JSON (the latest checks with their rule
references), and parsing it back from the row on every append was a third of a check's
CPU on the local server. This keeps, per bucket, the text written and the dict it was
written from: an append reads the row as before (inside its transaction, under the write
lock), and when the text is the one kept here, it folds into the kept dict instead of
parsing the text again. Any other text (another process wrote the bucket, or a transaction
of ours rolled back) is parsed as before, so what is folded is always what the row holds.

A bucket handed out is removed from the cache (``take``): only the transaction that holds
it may change it, and it comes back (``keep``) only once that transaction has committed.

Writing the bucket back was then the largest cost left: most of its text was its samples,
and a sample never changes once ``claros.aggregates`` has added it (it only appends to
those lists and drops the oldest). ``encode`` writes each sample's text once and reuses it
while the sample stays in the bucket; the text is exactly ``jsonutil.dumps(bucket)``
(tests/store/test_sqlite_append_cost.py). (The largest samples, the latest checks with
their rule references, are now kept as references to their records: a busy hour's bucket
is a few hundred bytes, not ~14 KB.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

from claros import jsonutil

__all__ = ["BucketCache", "BucketKey", "Kept", "Texts", "encode"]

BucketKey = tuple[str, str, int]  # (workspace, span, start)
# Each sample's text, by the sample's id (the sample itself kept, so the id stays its own).
Texts = dict[int, tuple[dict[str, Any], str]]


class Kept(NamedTuple):
    text: str  # as stored
    bucket: dict[str, Any]  # parsed, or the dict ``text`` was written from
    texts: Texts


def encode(
    bucket: Mapping[str, Any], texts: Texts, shared: Texts | None = None
) -> tuple[str, Texts]:
    """``jsonutil.dumps(bucket)``, writing only the samples (top-level lists of objects)
    that ``texts`` does not hold yet; with the texts of the samples the bucket holds now.
    ``shared``: texts written for the other buckets of the same transaction (a check's
    hour and day hold the same sample), looked up and added to."""
    parts = []
    now: Texts = {}
    # The other parts (counters, small dicts) between two sample lists are written as one
    # dict in one call: the members of ``dumps({a: x, b: y})`` between its braces are
    # exactly ``dumps(a):dumps(x),dumps(b):dumps(y)``, and a call per key and per value
    # was most of this function's cost (~20 calls per bucket, measured).
    run: dict[Any, Any] = {}
    for key, value in bucket.items():
        if type(value) is not list or not value or not all(type(item) is dict for item in value):
            run[key] = value
            continue
        if run:
            parts.append(jsonutil.dumps(run)[1:-1])
            run = {}
        items = []
        for item in value:
            known = texts.get(id(item))
            if (known is None or known[0] is not item) and shared is not None:
                known = shared.get(id(item))
            if known is not None and known[0] is item:
                text = known[1]
            else:
                text = jsonutil.dumps(item)
                if shared is not None:
                    shared[id(item)] = (item, text)
            now[id(item)] = (item, text)
            items.append(text)
        parts.append(f"{jsonutil.dumps(key)}:[{','.join(items)}]")
    if run:
        parts.append(jsonutil.dumps(run)[1:-1])
    return "{" + ",".join(parts) + "}", now


# The current hour and day of a few hundred workspaces; older ones fall out first.
_KEPT = 512


class BucketCache:
    def __init__(self, size: int = _KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[BucketKey, Kept] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: BucketKey, text: str | None) -> tuple[dict[str, Any], Texts]:
        """The bucket whose stored text is ``text`` (None: no row yet), for the caller's
        transaction alone, with its samples' texts."""
        with self._lock:
            kept = self._kept.pop(key, None)
        if text is None:
            return {}, {}
        if kept is not None and kept.text == text:
            return kept.bucket, kept.texts
        bucket: dict[str, Any] = jsonutil.loads(text)
        return bucket, {}

    def keep(self, written: Mapping[BucketKey, Kept]) -> None:
        """Buckets a committed transaction wrote: their text, the dict each was written
        from and its samples' texts."""
        with self._lock:
            for key, value in written.items():
                self._kept[key] = value
                self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
