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
from typing import Any, NamedTuple, Protocol, runtime_checkable

from claros.canonical import canonical_bytes
from claros.ledger import Checkpoint, Entry, PublicKey

__all__ = [
    "ChainBusyError",
    "CheckCounts",
    "CheckPage",
    "CheckQuery",
    "ConflictError",
    "Doc",
    "DocWrite",
    "GLOBAL",
    "MAX_DOCS_READ",
    "NewRecord",
    "PruneError",
    "PruneResult",
    "KeyTooLongError",
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

# Docs read together (Store.get_docs): what one DynamoDB BatchGetItem takes.
MAX_DOCS_READ = 100


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


class KeyTooLongError(StoreError):
    """A doc's name is longer than the store can key an item by (DynamoDB: 1,024 bytes);
    nothing was written. The API answers 400 with the message."""


class PruneError(StoreError):
    """A prune was asked for without a signed checkpoint at its last entry."""


# The value types here are NamedTuples, not frozen dataclasses: every function imports this
# module at cold start, and a frozen dataclass compiles six generated methods when it is
# defined (about 1.3 ms CPU each; a NamedTuple about 0.3). Immutable, compared by value
# and repr'd alike; ``_replace`` is ``dataclasses.replace``.
class Doc(NamedTuple):
    collection: str
    key: str
    value: dict[str, Any]
    rev: int


class DocWrite(NamedTuple):
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


class NewRecord(NamedTuple):
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


def docs_asked(wanted: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The distinct (collection, key) pairs a ``get_docs`` call reads, in the order first
    asked; ValueError beyond ``MAX_DOCS_READ`` (a caller's bug: no request asks for more)."""
    pairs = list(dict.fromkeys(wanted))
    if len(pairs) > MAX_DOCS_READ:
        raise ValueError(f"at most {MAX_DOCS_READ} docs are read together, not {len(pairs)}")
    return pairs


def check_batch(records: Sequence[NewRecord], writes: Sequence[DocWrite]) -> None:
    if not records:
        raise StoreError("append needs at least one record")
    if len(records) > MAX_BATCH_RECORDS or len(writes) > MAX_BATCH_WRITES:
        raise StoreError(
            f"one append takes at most {MAX_BATCH_RECORDS} records and {MAX_BATCH_WRITES} "
            f"doc writes (got {len(records)} and {len(writes)})"
        )


class PruneResult(NamedTuple):
    entries_deleted: int
    records_deleted: int
    through_seq: int


class KeptRecord(NamedTuple):
    """A record of a kind pruning keeps (``claros.ledger.NEVER_PRUNED``), as written at
    ``seq``: its canonical JSON, the bytes its (perhaps pruned) entry's payload hashed."""

    seq: int
    kind: str
    ref_id: str
    raw: bytes


# --- activity: listing and counting check records (issue 13) ---------------------------
# Check ids are ``claros.clock.new_id("chk")``: ``chk_<ms:12 hex>...``, so key order is time
# order and a time range is a range of keys. A check row's ``ts`` is taken just before its
# id, so an id's millisecond is at or a little after the row's ts; the key range is widened
# by this much above ``until`` and the exact ts bound is applied to each row.
CHECK_ID_SLACK_MS = 60_000
# The arguments' text a search looks in: their canonical JSON, the first this many
# characters, letters A-Z compared case-insensitively (both stores compare the same way).
SEARCH_CHARS = 16_000


class CheckQuery(NamedTuple):
    """Which check records a listing wants. Every field set must hold (AND); None = any.

    ``outcome``: "ok" or "error" (the status reported), or "none" (no outcome yet).
    ``since``/``until``: the row's ts in [since, until), ms. ``text``: a substring of the
    arguments' canonical JSON (``search_text``)."""

    app: str | None = None
    tool: str | None = None
    agent: str | None = None
    person: str | None = None
    result: str | None = None
    rule_id: str | None = None
    outcome: str | None = None
    since: int | None = None
    until: int | None = None
    text: str | None = None


class CheckPage(NamedTuple):
    """Matching checks, newest first, each with its outcome record (None when none yet).

    ``scanned``: check records read to find them (a page never reads more than its scan
    limit). ``next``: the check id to continue strictly below, None when no older check
    lies in the range. A page may hold fewer rows than asked (even none) and still have a
    ``next``: the scan limit was reached first."""

    rows: list[tuple[dict[str, Any], dict[str, Any] | None]]
    scanned: int
    next: str | None


class CheckCounts(NamedTuple):
    """Matching checks per result among the newest ``scanned`` checks of the range;
    ``complete`` is False when older checks in the range were not read (the scan limit)."""

    by_result: dict[str, int]
    scanned: int
    complete: bool


def ascii_lower(text: str) -> str:
    """Lower-case A-Z only, as SQLite's lower() does."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def search_text(row: Mapping[str, Any]) -> str | None:
    """What a text search of a check row looks in (None: the call had no arguments)."""
    arguments = row.get("arguments")
    if not arguments:
        return None
    return ascii_lower(canonical_bytes(arguments).decode("utf-8")[:SEARCH_CHARS])


def check_key_range(query: CheckQuery, before: str | None) -> tuple[str, str | None]:
    """(lowest id included, id every result lies strictly below, or None for no bound)."""
    low = f"chk_{max(0, query.since):012x}" if query.since is not None else ""
    high = before
    if query.until is not None:
        cap = f"chk_{max(0, query.until + CHECK_ID_SLACK_MS):012x}"
        high = cap if high is None or cap < high else high
    return low, high


def check_matches(
    query: CheckQuery, row: Mapping[str, Any], outcome: Mapping[str, Any] | None
) -> bool:
    """Whether a check row (and its outcome record) is what ``query`` asks for: the one
    definition both stores implement (SQLite in SQL, DynamoDB as a filter expression) and
    the tests compare them with."""
    agent = row.get("agent") or {}
    plain = (
        (query.app, row.get("app")),
        (query.tool, row.get("tool")),
        (query.agent, agent.get("name") if isinstance(agent, Mapping) else None),
        (query.person, row.get("on_behalf_of")),
        (query.result, row.get("result")),
    )
    if any(want is not None and got != want for want, got in plain):
        return False
    ts = int(row.get("ts") or 0)
    if query.since is not None and ts < query.since:
        return False
    if query.until is not None and ts >= query.until:
        return False
    if query.rule_id is not None and not any(
        isinstance(r, Mapping) and r.get("id") == query.rule_id for r in row.get("rules") or []
    ):
        return False
    if query.outcome is not None:
        status = outcome.get("status") if outcome else None
        if (status or "none") != query.outcome:
            return False
    if query.text is not None:
        text = search_text(row)
        if text is None or ascii_lower(query.text) not in text:
            return False
    return True


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

    def get_raw_record(self, workspace: str, kind: str, ref_id: str) -> bytes | None:
        """``get_record``'s record as the bytes it is kept as (its canonical JSON), for a
        reader that parses it its own way."""
        ...

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

    def get_docs(self, workspace: str, wanted: Sequence[tuple[str, str]]) -> list[Doc | None]:
        """The docs ``wanted`` (collection, key) of one workspace, in the order asked, None
        where there is none: each read as ``get_doc`` reads it, all in one request (one
        round trip where the store is across a network). At most ``MAX_DOCS_READ`` pairs
        (ValueError beyond); a pair asked twice is read once."""
        ...

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

    # --- activity (issue 13): key-ordered reads of check records, never a scan of the
    # workspace: at most ``scan_limit`` check records read per call (on DynamoDB up to one
    # more per records partition: a round reads at least one item of each).
    def list_checks(
        self,
        workspace: str,
        query: CheckQuery,
        *,
        before: str | None = None,
        limit: int = 50,
        scan_limit: int = 2_000,
    ) -> CheckPage:
        """Check records matching ``query``, newest first (by check id), with ids below
        ``before``; reads at most ``scan_limit`` check records (DynamoDB: plus one
        per records partition)."""
        ...

    def count_checks(
        self, workspace: str, query: CheckQuery, *, scan_limit: int = 10_000
    ) -> CheckCounts:
        """Matches per result among the newest ``scan_limit`` checks of the query's range."""
        ...

    def record_entry(self, workspace: str, kind: str, ref_id: str) -> Entry | None:
        """The ledger entry that wrote a record (None: no such record, or its entry was
        pruned): one keyed read of each."""
        ...

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

    # --- a page that stays fast (issue 13, item 7) -------------------------------------
    def checkpoint_before(self, workspace: str, seq: int) -> Checkpoint | None:
        """The latest signed checkpoint at a seq below ``seq`` (None: none): one keyed
        read, where ``checkpoints`` would list every one below."""
        ...

    # --- rebuilding the aggregates (issue 13: ledgers older than the aggregates) --------
    def aggregate_version(
        self, workspace: str, span: str, start: int
    ) -> tuple[dict[str, Any] | None, str]:
        """One hour's or day's aggregate as stored (None: none, or one that does not read,
        which the rebuild replaces) and an opaque version of it, which changes whenever an
        append folds into it."""
        ...

    def put_aggregate(
        self, workspace: str, span: str, start: int, bucket: Mapping[str, Any], *, expect: str
    ) -> bool:
        """Replace that aggregate with ``bucket`` if it is still at the version ``expect``
        (``aggregate_version``); False, nothing written, when an append folded into it
        since (``claros.rebuild`` then folds the new entries in and tries again)."""
        ...
