"""The aggregate buckets (``claros.aggregates``) a store last wrote, kept parsed.

Every append folds its records into its hour's and its day's bucket, in the append's
transaction. Parsing the bucket back from the row on every append was once a third of a
check's CPU on the local server (a busy hour's bucket was ~15 KB then). This keeps, per
bucket, the text written and the dict it was written from: an append reads the row as
before (inside its transaction, under the write lock), and when the text is the one kept
here, it folds into the kept dict instead of parsing the text again. Any other text
(another process wrote the bucket, or a transaction of ours rolled back) is parsed as
before, so what is folded is always what the row holds.

A bucket handed out is removed from the cache (``take``): only the transaction that holds
it may change it, and it comes back (``keep``) only once that transaction has committed.

The samples that made buckets large (the latest checks with their rule references) are
kept as references to their records now: a busy hour's bucket is a few hundred bytes, and
it is written whole with ``jsonutil.dumps`` (~3x cheaper than writing each sample's text
once and reusing it, as was done while they were copies).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

from claros import jsonutil

__all__ = ["BucketCache", "BucketKey", "Kept"]

BucketKey = tuple[str, str, int]  # (workspace, span, start)


class Kept(NamedTuple):
    text: str  # as stored
    bucket: dict[str, Any]  # parsed, or the dict ``text`` was written from


# The current hour and day of a few hundred workspaces; older ones fall out first.
_KEPT = 512


class BucketCache:
    def __init__(self, size: int = _KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[BucketKey, Kept] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: BucketKey, text: str | None) -> dict[str, Any]:
        """The bucket whose stored text is ``text`` (None: no row yet), for the caller's
        transaction alone."""
        with self._lock:
            kept = self._kept.pop(key, None)
        if text is None:
            return {}
        if kept is not None and kept.text == text:
            return kept.bucket
        bucket: dict[str, Any] = jsonutil.loads(text)
        return bucket

    def keep(self, written: Mapping[BucketKey, Kept]) -> None:
        """Buckets a committed transaction wrote: their text and the dict each was
        written from."""
        with self._lock:
            for key, value in written.items():
                self._kept[key] = value
                self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
