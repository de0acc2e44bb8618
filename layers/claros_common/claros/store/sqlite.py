"""SQLite store: the embedded default. One file in the data directory, WAL mode.

The ledger and its records refuse UPDATE, and DELETE except inside a prune (triggers), so
even a bug in Claros, or someone with the sqlite3 shell who does not also drop the
triggers, cannot quietly rewrite history. A prune writes a row in ``prune_marks`` in its
own transaction, which the deletes require and which is refused unless a signed
checkpoint sits at the prune's last entry and a ``prune`` entry names it; the prune
removes the row before it commits. (Whoever drops the triggers can delete anyway: every
verifier then names the missing entries, docs/ledger.md "Trust".)

Threads: one connection per thread; an append takes the write lock first
(``BEGIN IMMEDIATE``) so two writers never read the same chain head.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from claros import jsonutil
from claros.aggregates import SPANS, fold
from claros.ledger import NEVER_PRUNED, ZERO_HASH, Checkpoint, Entry, PublicKey
from claros.store.base import (
    ConflictError,
    Doc,
    DocWrite,
    KeptRecord,
    NewRecord,
    PruneError,
    PruneResult,
    StorageUnavailableError,
    StoreError,
    check_batch,
    record_bytes,
)

__all__ = ["SqliteStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    workspace TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, ref_id TEXT NOT NULL,
    ts INTEGER NOT NULL, payload_sha256 TEXT NOT NULL, prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (workspace, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
    workspace TEXT NOT NULL, kind TEXT NOT NULL, ref_id TEXT NOT NULL, seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (workspace, kind, ref_id)
);
CREATE TABLE IF NOT EXISTS heads (
    workspace TEXT PRIMARY KEY, seq INTEGER NOT NULL, kind TEXT NOT NULL,
    ref_id TEXT NOT NULL, ts INTEGER NOT NULL, payload_sha256 TEXT NOT NULL,
    prev_hash TEXT NOT NULL, hash TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checkpoints (
    workspace TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL, ts INTEGER NOT NULL,
    key_id TEXT NOT NULL, signature TEXT NOT NULL,
    PRIMARY KEY (workspace, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS public_keys (
    workspace TEXT NOT NULL, key_id TEXT NOT NULL, public_key TEXT NOT NULL,
    created_at INTEGER NOT NULL, algorithm TEXT NOT NULL,
    PRIMARY KEY (workspace, key_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS docs (
    workspace TEXT NOT NULL, collection TEXT NOT NULL, key TEXT NOT NULL,
    rev INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (workspace, collection, key)
) WITHOUT ROWID;

-- Hourly aggregates (claros.aggregates), folded by each append in its transaction, and
-- the verified-through state (claros.evidence.verified).
CREATE TABLE IF NOT EXISTS aggregates (
    workspace TEXT NOT NULL, span TEXT NOT NULL, start INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (workspace, span, start)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS verified (
    workspace TEXT PRIMARY KEY, seq INTEGER NOT NULL, body TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS prune_marks (
    workspace TEXT PRIMARY KEY, through_seq INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
BEGIN SELECT RAISE(ABORT, 'the ledger refuses updates'); END;
DROP TRIGGER IF EXISTS ledger_delete_below_checkpoint;
CREATE TRIGGER IF NOT EXISTS ledger_delete_only_by_a_prune BEFORE DELETE ON ledger
WHEN NOT EXISTS (SELECT 1 FROM prune_marks m
                 WHERE m.workspace = OLD.workspace AND OLD.seq <= m.through_seq)
BEGIN SELECT RAISE(ABORT, 'ledger entries are deleted only by a prune'); END;
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'ledger records refuse updates'); END;
DROP TRIGGER IF EXISTS records_delete_below_checkpoint;
CREATE TRIGGER IF NOT EXISTS records_delete_only_by_a_prune BEFORE DELETE ON records
WHEN OLD.kind IN ({kept})
  OR NOT EXISTS (SELECT 1 FROM prune_marks m
                 WHERE m.workspace = OLD.workspace AND OLD.seq <= m.through_seq)
BEGIN SELECT RAISE(ABORT, 'ledger records are deleted only by a prune, never versions'); END;
CREATE TRIGGER IF NOT EXISTS prune_marks_need_a_prune BEFORE INSERT ON prune_marks
WHEN NOT EXISTS (SELECT 1 FROM checkpoints c
                 WHERE c.workspace = NEW.workspace AND c.seq = NEW.through_seq)
  OR NOT EXISTS (SELECT 1 FROM records r
                 WHERE r.workspace = NEW.workspace AND r.kind = 'prune'
                   AND r.seq > NEW.through_seq
                   AND json_extract(r.body, '$.through_seq') = NEW.through_seq)
BEGIN SELECT RAISE(ABORT, 'a prune needs its signed checkpoint and its prune entry'); END;
CREATE TRIGGER IF NOT EXISTS prune_marks_no_update BEFORE UPDATE ON prune_marks
BEGIN SELECT RAISE(ABORT, 'prune marks refuse updates'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints refuse updates'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'checkpoints refuse deletes'); END;
""".replace("{kept}", ", ".join(f"'{kind}'" for kind in sorted(NEVER_PRUNED)))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# SQLite's answers that mean the storage, not the request, is at fault (extended codes
# such as SQLITE_IOERR_WRITE or SQLITE_READONLY_DIRECTORY included): what each means.
_STORAGE_FAULTS = {
    "SQLITE_FULL": "storage is full",
    "SQLITE_READONLY": "storage is read-only",
    "SQLITE_IOERR": "storage could not read or write",
    "SQLITE_CANTOPEN": "storage cannot be opened",
    "SQLITE_BUSY": "storage is busy",
    "SQLITE_LOCKED": "storage is busy",
    "SQLITE_PROTOCOL": "storage is busy",
}


def _storage_fault(exc: sqlite3.Error) -> StorageUnavailableError | None:
    """The one mapping of SQLite's storage faults to the Store's error (503 + reason)."""
    name = getattr(exc, "sqlite_errorname", "")
    for code, what in _STORAGE_FAULTS.items():
        if name == code or name.startswith(code + "_"):
            return StorageUnavailableError(f"{what} ({exc}); nothing was written, retry later")
    return None


class _Connection(sqlite3.Connection):
    """A connection whose storage faults are StorageUnavailableError, in one place."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql == "ROLLBACK" and not self.in_transaction:
            # SQLite rolls back by itself on some faults (a full disk); the ROLLBACK after
            # it is then nothing to do, not a second error hiding the first.
            return self.cursor()
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as exc:
            fault = _storage_fault(exc)
            if fault is None:
                raise
            raise fault from exc

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(sql_script)
        except sqlite3.OperationalError as exc:
            fault = _storage_fault(exc)
            if fault is None:
                raise
            raise fault from exc


def _unusable(path: str, exc: sqlite3.DatabaseError) -> StoreError:
    """A database file SQLite cannot open or read, as a StoreError that names it."""
    name = getattr(exc, "sqlite_errorname", "")
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        return StoreError(f"{path} is not a Claros database: {exc}")
    return _storage_fault(exc) or StoreError(f"cannot open the Claros database {path}: {exc}")


def _entry(row: Sequence[Any]) -> Entry:
    return Entry(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])


class SqliteStore:
    """A Store on one SQLite file (or ``:memory:``-like temp paths in tests)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            self._conn().executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise _unusable(self.path, exc) from exc
        except StoreError:
            self.close()
            raise

    # --- connections ------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(
                    self.path,
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=60,
                    factory=_Connection,
                )
            except sqlite3.DatabaseError as exc:
                raise _unusable(self.path, exc) from exc
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                # NORMAL in WAL mode is durable against application crashes; a power cut
                # can lose the last transactions but never corrupts or reorders the chain.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA busy_timeout=60000")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.DatabaseError as exc:
                conn.close()
                raise _unusable(self.path, exc) from exc
            except StoreError:
                conn.close()
                raise
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

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
        return self.append_many(workspace, [NewRecord(kind, ref_id, record)], writes=writes, ts=ts)[
            0
        ]

    def append_many(
        self,
        workspace: str,
        records: Sequence[NewRecord],
        *,
        writes: Sequence[DocWrite] = (),
        ts: int | None = None,
    ) -> list[Entry]:
        check_batch(records, writes)
        prepared = []
        for new in records:
            raw, payload = record_bytes(new.record)
            prepared.append((new, raw.decode("utf-8"), payload))
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            head = conn.execute(
                "SELECT seq, hash FROM heads WHERE workspace = ?", (workspace,)
            ).fetchone()
            seq, prev = (head[0], head[1]) if head else (0, ZERO_HASH)
            when = ts if ts is not None else _now_ms()
            entries = []
            for new, body, payload in prepared:
                seq += 1
                entry = Entry.build(
                    workspace, seq, new.kind, new.ref_id, when, new.record, prev, payload=payload
                )
                conn.execute(
                    "INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (workspace, seq, new.kind, new.ref_id, when, payload, prev, entry.hash),
                )
                try:
                    conn.execute(
                        "INSERT INTO records VALUES (?, ?, ?, ?, ?)",
                        (workspace, new.kind, new.ref_id, seq, body),
                    )
                except sqlite3.IntegrityError as exc:
                    raise ConflictError(
                        f"a {new.kind} record {new.ref_id!r} exists already",
                        collection=new.kind,
                        key=new.ref_id,
                    ) from exc
                entries.append(entry)
                prev = entry.hash
            last = entries[-1]
            self._fold(conn, workspace, when, entries, prepared)
            conn.execute(
                "INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (workspace, last.seq, last.kind, last.ref_id, last.ts, last.payload_sha256,
                 last.prev_hash, last.hash),
            )  # fmt: skip
            self._apply(conn, writes)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return entries

    @staticmethod
    def _fold(
        conn: sqlite3.Connection,
        workspace: str,
        when: int,
        entries: Sequence[Entry],
        prepared: Sequence[tuple[NewRecord, str, str]],
    ) -> None:
        """The records into their hour's and day's aggregates, inside the append's
        transaction (all the batch's entries carry one ts)."""
        records = [jsonutil.loads(body) for _new, body, _payload in prepared]
        for span, size in SPANS.items():
            start = when // size
            row = conn.execute(
                "SELECT body FROM aggregates WHERE workspace = ? AND span = ? AND start = ?",
                (workspace, span, start),
            ).fetchone()
            bucket: dict[str, Any] = jsonutil.loads(row[0]) if row else {}
            for entry, record in zip(entries, records, strict=True):
                fold(bucket, entry.seq, entry.kind, record)
            conn.execute(
                "INSERT OR REPLACE INTO aggregates VALUES (?, ?, ?, ?)",
                (workspace, span, start, jsonutil.dumps(bucket)),
            )

    def aggregate_buckets(
        self, workspace: str, first: int, last: int, *, span: str = "hour"
    ) -> list[tuple[int, dict[str, Any]]]:
        rows = self._conn().execute(
            "SELECT start, body FROM aggregates WHERE workspace = ? AND span = ?"
            " AND start >= ? AND start < ? ORDER BY start",
            (workspace, span, first, last),
        )
        return [(int(start), jsonutil.loads(body)) for start, body in rows]

    def verified_state(self, workspace: str) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute("SELECT body FROM verified WHERE workspace = ?", (workspace,))
            .fetchone()
        )
        return jsonutil.loads(row[0]) if row else None

    def save_verified_state(
        self, workspace: str, state: Mapping[str, Any], *, expect_seq: int | None
    ) -> bool:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT seq FROM verified WHERE workspace = ?", (workspace,)
            ).fetchone()
            if (row[0] if row else None) != expect_seq:
                conn.execute("ROLLBACK")
                return False
            conn.execute(
                "INSERT OR REPLACE INTO verified VALUES (?, ?, ?)",
                (workspace, int(state["seq"]), jsonutil.dumps(dict(state))),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return True

    def head(self, workspace: str) -> Entry | None:
        row = (
            self._conn()
            .execute(
                "SELECT workspace, seq, kind, ref_id, ts, payload_sha256, prev_hash, hash"
                " FROM heads WHERE workspace = ?",
                (workspace,),
            )
            .fetchone()
        )
        return _entry(row) if row else None

    def entries(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[Entry]:
        cur = self._conn().execute(
            "SELECT workspace, seq, kind, ref_id, ts, payload_sha256, prev_hash, hash "
            "FROM ledger WHERE workspace = ? AND seq > ? ORDER BY seq LIMIT ?",
            (workspace, since, -1 if limit is None else limit),
        )
        for row in cur:
            yield _entry(row)

    def entries_with_records(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[tuple[Entry, dict[str, Any] | None]]:
        cur = self._conn().execute(
            "SELECT l.workspace, l.seq, l.kind, l.ref_id, l.ts, l.payload_sha256, l.prev_hash,"
            " l.hash, r.body FROM ledger l LEFT JOIN records r"
            " ON r.workspace = l.workspace AND r.kind = l.kind AND r.ref_id = l.ref_id"
            " AND r.seq = l.seq"
            " WHERE l.workspace = ? AND l.seq > ? ORDER BY l.seq LIMIT ?",
            (workspace, since, -1 if limit is None else limit),
        )
        for row in cur:
            yield _entry(row), (jsonutil.loads(row[8]) if row[8] is not None else None)

    def entries_with_raw_records(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[tuple[Entry, bytes | None]]:
        # The body column holds the record's canonical JSON as it was hashed.
        cur = self._conn().execute(
            "SELECT l.workspace, l.seq, l.kind, l.ref_id, l.ts, l.payload_sha256, l.prev_hash,"
            " l.hash, CAST(r.body AS BLOB) FROM ledger l LEFT JOIN records r"
            " ON r.workspace = l.workspace AND r.kind = l.kind AND r.ref_id = l.ref_id"
            " AND r.seq = l.seq"
            " WHERE l.workspace = ? AND l.seq > ? ORDER BY l.seq LIMIT ?",
            (workspace, since, -1 if limit is None else limit),
        )
        for row in cur:
            yield Entry(*row[:8]), row[8]

    def get_record(self, workspace: str, kind: str, ref_id: str) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute(
                "SELECT body FROM records WHERE workspace = ? AND kind = ? AND ref_id = ?",
                (workspace, kind, ref_id),
            )
            .fetchone()
        )
        return jsonutil.loads(row[0]) if row else None

    def prune(self, workspace: str, through_seq: int) -> PruneResult:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not conn.execute(
                "SELECT 1 FROM checkpoints WHERE workspace = ? AND seq = ?",
                (workspace, through_seq),
            ).fetchone():
                raise PruneError(f"no signed checkpoint at seq {through_seq}")
            try:  # what lets the deletes through; removed again before the commit
                conn.execute("INSERT INTO prune_marks VALUES (?, ?)", (workspace, through_seq))
            except sqlite3.IntegrityError as exc:
                raise PruneError(
                    f"no prune entry says through_seq {through_seq}: append one first "
                    "(claros.evidence.retention.prune does)"
                ) from exc
            kept = tuple(sorted(NEVER_PRUNED))
            marks = ",".join("?" * len(kept))
            records = conn.execute(
                "DELETE FROM records WHERE workspace = ? AND (kind, ref_id) IN"
                " (SELECT kind, ref_id FROM ledger WHERE workspace = ? AND seq <= ?)"
                f" AND kind NOT IN ({marks})",
                (workspace, workspace, through_seq, *kept),
            ).rowcount
            entries = conn.execute(
                "DELETE FROM ledger WHERE workspace = ? AND seq <= ?", (workspace, through_seq)
            ).rowcount
            conn.execute("DELETE FROM prune_marks WHERE workspace = ?", (workspace,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return PruneResult(entries, records, through_seq)

    def kept_records(self, workspace: str, through_seq: int) -> list[KeptRecord]:
        kept = tuple(sorted(NEVER_PRUNED))
        rows = (
            self._conn()
            .execute(
                "SELECT seq, kind, ref_id, CAST(body AS BLOB) FROM records WHERE workspace = ?"
                f" AND kind IN ({','.join('?' * len(kept))}) AND seq <= ? ORDER BY seq",
                (workspace, *kept, through_seq),
            )
            .fetchall()
        )
        return [KeptRecord(int(r[0]), r[1], r[2], bytes(r[3])) for r in rows]

    # --- checkpoints and public keys --------------------------------------------------
    def add_checkpoint(self, checkpoint: Checkpoint) -> bool:
        cur = self._conn().execute(
            "INSERT OR IGNORE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
            (
                checkpoint.workspace,
                checkpoint.seq,
                checkpoint.hash,
                checkpoint.ts,
                checkpoint.key_id,
                checkpoint.signature,
            ),
        )
        return cur.rowcount == 1

    def checkpoints(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> list[Checkpoint]:
        rows = (
            self._conn()
            .execute(
                "SELECT workspace, seq, hash, ts, key_id, signature FROM checkpoints"
                " WHERE workspace = ? AND seq > ? ORDER BY seq LIMIT ?",
                (workspace, since, -1 if limit is None else limit),
            )
            .fetchall()
        )
        return [Checkpoint(*row) for row in rows]

    def latest_checkpoint(self, workspace: str) -> Checkpoint | None:
        row = (
            self._conn()
            .execute(
                "SELECT workspace, seq, hash, ts, key_id, signature FROM checkpoints"
                " WHERE workspace = ? ORDER BY seq DESC LIMIT 1",
                (workspace,),
            )
            .fetchone()
        )
        return Checkpoint(*row) if row else None

    def add_public_key(self, key: PublicKey) -> None:
        self._conn().execute(
            "INSERT OR IGNORE INTO public_keys VALUES (?, ?, ?, ?, ?)",
            (key.workspace, key.key_id, key.public_key, key.created_at, key.algorithm),
        )

    def public_keys(self, workspace: str) -> list[PublicKey]:
        rows = (
            self._conn()
            .execute(
                "SELECT workspace, key_id, public_key, created_at, algorithm FROM public_keys"
                " WHERE workspace = ? ORDER BY created_at, key_id",
                (workspace,),
            )
            .fetchall()
        )
        return [PublicKey(*row) for row in rows]

    # --- docs -------------------------------------------------------------------------
    def get_doc(self, workspace: str, collection: str, key: str) -> Doc | None:
        row = (
            self._conn()
            .execute(
                "SELECT rev, body FROM docs WHERE workspace = ? AND collection = ? AND key = ?",
                (workspace, collection, key),
            )
            .fetchone()
        )
        return Doc(collection, key, jsonutil.loads(row[1]), row[0]) if row else None

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
        sql = "SELECT key, rev, body FROM docs WHERE workspace = ? AND collection = ?"
        args: list[Any] = [workspace, collection]
        if prefix:
            # Keys are compared as text: everything that starts with prefix sorts between
            # prefix and prefix + U+10FFFF.
            sql += " AND key >= ? AND key < ?"
            args += [prefix, prefix + "\U0010ffff"]
        if after is not None:
            sql += " AND key < ?" if descending else " AND key > ?"
            args.append(after)
        sql += f" ORDER BY key {'DESC' if descending else 'ASC'} LIMIT ?"
        args.append(limit)
        rows = self._conn().execute(sql, args).fetchall()
        return [Doc(collection, r[0], jsonutil.loads(r[2]), r[1]) for r in rows]

    def write_docs(self, writes: Sequence[DocWrite]) -> None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._apply(conn, writes)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _apply(conn: sqlite3.Connection, writes: Sequence[DocWrite]) -> None:
        for w in writes:
            row = conn.execute(
                "SELECT rev FROM docs WHERE workspace = ? AND collection = ? AND key = ?",
                (w.workspace, w.collection, w.key),
            ).fetchone()
            rev = row[0] if row else 0
            if w.expect_rev is not None and w.expect_rev != rev:
                state = f"at revision {rev}" if rev else "absent"
                raise ConflictError(
                    f"{w.collection}/{w.key} is {state}, expected "
                    f"{'absent' if w.expect_rev == 0 else f'revision {w.expect_rev}'}",
                    collection=w.collection,
                    key=w.key,
                )
            if w.value is None:
                conn.execute(
                    "DELETE FROM docs WHERE workspace = ? AND collection = ? AND key = ?",
                    (w.workspace, w.collection, w.key),
                )
            else:
                conn.execute(
                    "INSERT INTO docs VALUES (?, ?, ?, ?, ?) ON CONFLICT"
                    " (workspace, collection, key) DO UPDATE SET rev = excluded.rev,"
                    " body = excluded.body",
                    (w.workspace, w.collection, w.key, rev + 1, jsonutil.dumps(dict(w.value))),
                )
