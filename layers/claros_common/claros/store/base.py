"""The Store protocol: everything Claros keeps, behind one interface.

Three kinds of thing are stored:

* the **ledger**: per workspace, entries with seq 1, 2, 3 ... each covering one *record*
  (a check, approval, override, outcome, rule version ...). ``append`` writes the record,
  its entry and the new chain head in one transaction, with any ``DocWrite``s the caller
  needs to land atomically with it (an ask marked answered, an index doc). Entries and
  records are never updated; they are deleted only by ``prune``, below a signed checkpoint.
* **checkpoints** and **public keys**: signed, append-only.
* **docs**: small mutable JSON objects (keys, members, rules' current state, asks, app
  tools, settings, index docs) addressed by (workspace, collection, key), each with a
  revision number for optimistic concurrency.

Both implementations (``sqlite.SqliteStore``, ``dynamo.DynamoStore``) pass one
conformance suite (``tests/store``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from claros.canonical import canonical_bytes
from claros.ledger import Checkpoint, Entry, PublicKey

__all__ = [
    "ChainBusyError",
    "ConflictError",
    "Doc",
    "DocWrite",
    "GLOBAL",
    "NewRecord",
    "PruneError",
    "PruneResult",
    "RecordTooLargeError",
    "Store",
    "StorageUnavailableError",
    "StoreError",
]

# Docs that belong to no workspace (API keys by hash, the list of workspaces) live here.
GLOBAL = "_"

# A stored record (canonical JSON) may not exceed this; DynamoDB items cap at 400 KB and
# records are stored compressed there, so this leaves room.
MAX_RECORD_BYTES = 1_500_000


class StoreError(Exception):
    """Base of every storage error."""


class ConflictError(StoreError):
    """A conditional write found the doc in another state; nothing was written."""

    def __init__(self, message: str, *, collection: str = "", key: str = "") -> None:
        super().__init__(message)
        self.collection = collection
        self.key = key


class ChainBusyError(StoreError):
    """The chain head kept moving under us; the caller should retry after a moment."""

    retry_after_s = 1


class StorageUnavailableError(StoreError):
    """The storage cannot do this now: a full disk, a read-only filesystem or database, an
    I/O error, a database locked too long. Nothing was written (the transaction rolled
    back); the same request succeeds once the cause is gone. The API answers 503 with the
    message (what is wrong, never a path) and Retry-After."""

    def __init__(self, message: str, *, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RecordTooLargeError(StoreError):
    """The record is larger than the store can keep in one row."""


class PruneError(StoreError):
    """A prune was asked for without a signed checkpoint at its last entry."""


@dataclass(frozen=True, slots=True)
class Doc:
    collection: str
    key: str
    value: dict[str, Any]
    rev: int


@dataclass(frozen=True, slots=True)
class DocWrite:
    """Put (``value``) or delete (``value=None``) one doc.

    ``expect_rev``: None writes unconditionally; 0 requires that the doc does not exist;
    n > 0 requires that it is at revision n. A failed condition raises ``ConflictError``
    and nothing of the transaction is written.
    """

    workspace: str
    collection: str
    key: str
    value: Mapping[str, Any] | None
    expect_rev: int | None = None


@dataclass(frozen=True, slots=True)
class NewRecord:
    """One record to append: its kind, its id (unique per kind) and its content."""

    kind: str
    ref_id: str
    record: Mapping[str, Any]


# One append is one DynamoDB transaction: 2 items per record, the head, and the doc writes
# must stay within its 100 actions.
MAX_BATCH_RECORDS = 10
MAX_BATCH_WRITES = 60


def record_bytes(record: Mapping[str, Any]) -> tuple[bytes, str]:
    """A record as the ledger keeps it: its canonical JSON and that text's sha256 (the
    entry's payload_sha256). CanonicalError for values JSON cannot carry."""
    raw = canonical_bytes(record)
    if len(raw) > MAX_RECORD_BYTES:
        raise RecordTooLargeError(f"record is {len(raw)} bytes; the limit is {MAX_RECORD_BYTES}")
    return raw, hashlib.sha256(raw).hexdigest()


def check_batch(records: Sequence[NewRecord], writes: Sequence[DocWrite]) -> None:
    if not records:
        raise StoreError("append needs at least one record")
    if len(records) > MAX_BATCH_RECORDS or len(writes) > MAX_BATCH_WRITES:
        raise StoreError(
            f"one append takes at most {MAX_BATCH_RECORDS} records and {MAX_BATCH_WRITES} "
            f"doc writes (got {len(records)} and {len(writes)})"
        )


@dataclass(frozen=True, slots=True)
class PruneResult:
    entries_deleted: int
    records_deleted: int
    through_seq: int


@dataclass(frozen=True, slots=True)
class KeptRecord:
    """A record of a kind pruning keeps (``claros.ledger.NEVER_PRUNED``), as written at
    ``seq``: its canonical JSON, the bytes its (perhaps pruned) entry's payload hashed."""

    seq: int
    kind: str
    ref_id: str
    raw: bytes


@runtime_checkable
class Store(Protocol):
    # --- the ledger -------------------------------------------------------------------
    def append(
        self,
        workspace: str,
        kind: str,
        ref_id: str,
        record: Mapping[str, Any],
        *,
        writes: Sequence[DocWrite] = (),
        ts: int | None = None,
    ) -> Entry:
        """Write ``record`` and its chain entry (next seq) atomically, with ``writes``."""
        ...

    def append_many(
        self,
        workspace: str,
        records: Sequence[NewRecord],
        *,
        writes: Sequence[DocWrite] = (),
        ts: int | None = None,
    ) -> list[Entry]:
        """Several records with consecutive entries, and ``writes``, all or nothing."""
        ...

    def head(self, workspace: str) -> Entry | None:
        """The last entry of the chain (kept even when everything below it was pruned)."""
        ...

    def entries(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[Entry]:
        """Entries with seq > since, ascending."""
        ...

    def entries_with_records(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[tuple[Entry, dict[str, Any] | None]]:
        """Entries with seq > since, ascending, each with its record (None if deleted)."""
        ...

    def entries_with_raw_records(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[tuple[Entry, bytes | None]]:
        """As ``entries_with_records``, each record as the bytes it is kept as: its canonical
        JSON, the very bytes ``payload_sha256`` hashed. Exports write them as they are."""
        ...

    def get_record(self, workspace: str, kind: str, ref_id: str) -> dict[str, Any] | None: ...

    def prune(self, workspace: str, through_seq: int) -> PruneResult:
        """Delete entries with seq <= through_seq and their records, except the kinds in
        ``claros.ledger.NEVER_PRUNED``. Requires a checkpoint at ``through_seq``."""
        ...

    def kept_records(self, workspace: str, through_seq: int) -> list[KeptRecord]:
        """The records of the kinds in ``NEVER_PRUNED`` written at or below
        ``through_seq``, in seq order (rule and mapping versions: a few per edit)."""
        ...

    # --- checkpoints and public keys --------------------------------------------------
    def add_checkpoint(self, checkpoint: Checkpoint) -> bool:
        """Store a signed checkpoint; False if one at that seq exists already."""
        ...

    def checkpoints(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> list[Checkpoint]: ...

    def latest_checkpoint(self, workspace: str) -> Checkpoint | None: ...

    def add_public_key(self, key: PublicKey) -> None: ...

    def public_keys(self, workspace: str) -> list[PublicKey]: ...

    # --- docs -------------------------------------------------------------------------
    def get_doc(self, workspace: str, collection: str, key: str) -> Doc | None: ...

    def query_docs(
        self,
        workspace: str,
        collection: str,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        descending: bool = False,
    ) -> list[Doc]:
        """Docs of a collection in key order, starting after the key ``after``."""
        ...

    def write_docs(self, writes: Sequence[DocWrite]) -> None:
        """All the writes or none (``ConflictError``)."""
        ...

    def close(self) -> None: ...

    # --- aggregates and the verified-through state (issue 13: pages that stay fast) ----
    def aggregate_buckets(
        self, workspace: str, first: int, last: int, *, span: str = "hour"
    ) -> list[tuple[int, dict[str, Any]]]:
        """The aggregates (``claros.aggregates``) of the hours (``span="hour"``, numbered
        ts // 1 h) or UTC days (``"day"``) in [first, last), ascending; one with no entry
        has none. ``append``/``append_many`` fold their records into their hour's and
        day's aggregates in the same transaction."""
        ...

    def verified_state(self, workspace: str) -> dict[str, Any] | None:
        """How far the chain was verified (``claros.evidence.verified``), or None."""
        ...

    def save_verified_state(
        self, workspace: str, state: Mapping[str, Any], *, expect_seq: int | None
    ) -> bool:
        """Keep ``state`` (its ``seq``: verified through that entry) if the one stored is
        still at ``expect_seq`` (None: none stored yet); False when another verify moved it
        first (nothing written)."""
        ...
