"""The signed checkpoints a verifier holds, by seq, in about 50 bytes each.

A verifier must keep every checkpoint until the chain reaches its seq (an export lists
them all before the entries: 10,000 for a million entries), but only what verification
needs of it: seq, hash, ts and the key that signed it (its signature was checked on the
way in). Kept as a dict of objects that is ~300 bytes a checkpoint, 3 MB a million
entries; kept in arrays (seq and ts 8 bytes each, the hash as its 32 bytes, the key as an
index into the few key ids) it is ~50 bytes, so a verifier's memory stays flat.

It reads as a ``Mapping[int, V]`` (seq -> ``make(seq, hash, ts, key_id)``), in seq order.
A hash that is not 64 lowercase hex digits (never the case for a checkpoint parsed from
JSON, which ``Checkpoint.from_json`` refuses) is kept aside as given.

Pure code: no storage, no network.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

__all__ = ["CheckpointTable", "Span"]

V = TypeVar("V")
# A run of a table's checkpoints: seqs, their hashes' 32 bytes each, hashes kept aside.
Span = tuple["array[int]", bytes, dict[int, str]]
_HEX64 = re.compile(r"[0-9a-f]{64}")


class CheckpointTable(Mapping[int, V]):
    def __init__(self, make: Callable[[int, str, int, str], V]) -> None:
        self._make = make
        self.seqs = array("q")  # ascending
        self.hashes = bytearray()  # 32 bytes per seq, in the same order
        self._ts = array("q")
        self._key = array("I")  # index into _key_ids
        self._key_ids: list[str] = []
        self._key_index: dict[str, int] = {}
        self._odd: dict[int, str] = {}  # seq -> a hash that is not 64 hex digits

    def put(self, seq: int, hash_: str, ts: int, key_id: str) -> None:
        """Add (or replace) the checkpoint at ``seq``."""
        key = self._key_index.get(key_id)
        if key is None:
            key = self._key_index[key_id] = len(self._key_ids)
            self._key_ids.append(key_id)
        raw = bytes.fromhex(hash_) if _HEX64.fullmatch(hash_) else bytes(32)
        if raw.hex() == hash_:
            self._odd.pop(seq, None)
        else:
            self._odd[seq] = hash_
        seqs = self.seqs
        if not seqs or seq > seqs[-1]:  # the usual case: in seq order
            seqs.append(seq)
            self.hashes += raw
            self._ts.append(ts)
            self._key.append(key)
            return
        at = bisect_left(seqs, seq)
        if seqs[at] == seq:
            self.hashes[at * 32 : at * 32 + 32] = raw
            self._ts[at], self._key[at] = ts, key
            return
        seqs.insert(at, seq)
        self.hashes[at * 32 : at * 32] = raw
        self._ts.insert(at, ts)
        self._key.insert(at, key)

    def discard(self, seq: int) -> None:
        at = self._find(seq)
        if at < 0:
            return
        del self.seqs[at], self._ts[at], self._key[at]
        del self.hashes[at * 32 : at * 32 + 32]
        self._odd.pop(seq, None)

    def _find(self, seq: int) -> int:
        at = bisect_left(self.seqs, seq)
        return at if at < len(self.seqs) and self.seqs[at] == seq else -1

    def index_after(self, seq: int) -> int:
        """The index (in ``seqs``) of the first checkpoint after ``seq``."""
        return bisect_right(self.seqs, seq)

    def span(self, lo: int, hi: int) -> Span:
        """The checkpoints with ``lo <= seq < hi``, as ``put_span`` takes them: their seqs,
        their hashes (32 bytes each, in the same order), those kept aside (by seq). Made
        in three copies, not one string per checkpoint (a worker of ``claros verify`` is
        sent ~100 with each buffer)."""
        at, end = bisect_left(self.seqs, lo), bisect_left(self.seqs, hi)
        odd = {seq: h for seq, h in self._odd.items() if lo <= seq < hi} if self._odd else {}
        return self.seqs[at:end], bytes(self.hashes[at * 32 : end * 32]), odd

    def put_span(self, span: Span, ts: int, key_id: str) -> None:
        """The checkpoints of ``span`` (another table's), each with ``ts`` and ``key_id``;
        all after those held, in seq order (as ``span`` gives them)."""
        seqs, hashes, odd = span
        if not seqs:
            return
        if (self.seqs and seqs[0] <= self.seqs[-1]) or len(hashes) != 32 * len(seqs):
            raise ValueError("a span goes after the checkpoints held, 32 bytes a hash")
        key = self._key_index.get(key_id)
        if key is None:
            key = self._key_index[key_id] = len(self._key_ids)
            self._key_ids.append(key_id)
        self.seqs.extend(seqs)
        self.hashes += hashes
        self._ts.extend(array("q", [ts]) * len(seqs))
        self._key.extend(array("I", [key]) * len(seqs))
        self._odd.update(odd)

    def ts_at(self, index: int) -> int:
        return self._ts[index]

    def hash_at(self, index: int) -> str:
        seq = self.seqs[index]
        odd = self._odd.get(seq) if self._odd else None
        return odd if odd is not None else self.hashes[index * 32 : index * 32 + 32].hex()

    def _item(self, at: int) -> V:
        seq = self.seqs[at]
        return self._make(seq, self.hash_at(at), self._ts[at], self._key_ids[self._key[at]])

    def get(self, seq: int, default: V | None = None) -> V | None:  # type: ignore[override]
        # Without the KeyError a Mapping's get goes through: the general path asks for
        # every entry's seq, and most have no checkpoint.
        at = self._find(seq)
        return default if at < 0 else self._item(at)

    def __getitem__(self, seq: int) -> V:
        at = self._find(seq)
        if at < 0:
            raise KeyError(seq)
        return self._item(at)

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and self._find(seq) >= 0

    def __iter__(self) -> Iterator[int]:
        return iter(self.seqs)

    def __len__(self) -> int:
        return len(self.seqs)
