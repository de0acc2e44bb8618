"""SQLite store: the embedded default. One file in the data directory, WAL mode.

The ledger and its records refuse UPDATE, and DELETE except inside a prune (triggers), so
even a bug in Claros, or someone with the sqlite3 shell who does not also drop the
triggers, cannot quietly rewrite history. A prune writes a row in ``prune_marks`` in its
own transaction, which the deletes require and which is refused unless a signed
checkpoint sits at the prune's last entry and a ``prune`` entry names it; the prune
removes the row before it commits. (Whoever drops the triggers can delete anyway: every
verifier then names the missing entries, docs/ledger.md "Trust".)

Threads: one connection per thread; an append takes the write lock first
(``BEGIN IMMEDIATE``) so two writers never read the same chain head. Appends made
together by this process's threads share one transaction (group commit,
``claros.store.group``): the thread that finds none in progress writes the queued
appends, each in a savepoint, and commits once; the others wait for their answer.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from claros import jsonutil
from claros.aggregates import SPANS, fold
from claros.ledger import NEVER_PRUNED, ZERO_HASH, Checkpoint, Entry, PublicKey
from claros.store.base import (
    SEARCH_CHARS,
    CheckCounts,
    CheckPage,
    CheckQuery,
    ConflictError,
    Doc,
    DocWrite,
    KeptRecord,
    NewRecord,
    PruneError,
    PruneResult,
    StorageUnavailableError,
    StoreError,
    ascii_lower,
    check_batch,
    check_key_range,
    docs_asked,
    record_bytes,
)
from claros.store.buckets import BucketCache, BucketKey, Kept
from claros.store.group import GroupCommit

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

-- Checks are indexed by the append itself (_index_check), no longer by a trigger.
DROP TRIGGER IF EXISTS check_index_add;
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

# Activity (issue 13): the fields a listing filters on, one row per check record, written
# by the append in its transaction (_index_check) and dropped by a trigger when a prune
# deletes the record: reading plain columns in key order instead of parsing each record's
# JSON makes a page of 5,000 and a count of 10,000 checks cheap. Derived data, not evidence: the
# record stays the truth (a listing returns the record's body). ``rules`` holds the rule
# ids as " a b " so one instr() finds an id.
_CHECK_INDEX = """
CREATE TABLE IF NOT EXISTS check_index (
    workspace TEXT NOT NULL, check_id TEXT NOT NULL, ts INTEGER NOT NULL, app TEXT,
    tool TEXT, agent TEXT, person TEXT, result TEXT, rules TEXT,
    PRIMARY KEY (workspace, check_id)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS check_index_drop AFTER DELETE ON records WHEN OLD.kind = 'check'
BEGIN DELETE FROM check_index WHERE workspace = OLD.workspace AND check_id = OLD.ref_id; END;
"""
_CHECK_COLUMNS = (
    "workspace, ref_id, coalesce(json_extract(body, '$.ts'), 0), json_extract(body, '$.app'),"
    " json_extract(body, '$.tool'), json_extract(body, '$.agent.name'),"
    " json_extract(body, '$.on_behalf_of'), json_extract(body, '$.result'),"
    " (SELECT ' ' || group_concat(json_extract(e.value, '$.id'), ' ') || ' '"
    " FROM json_each(body, '$.rules') e)"
)
# A check's index row in SQL, from its record's text: what _index_check writes when the
# record's shape is not the usual one, and what the index was built from before (a trigger
# that parsed the record's JSON once per column, on every check).
_CHECK_INDEX_ROW = (
    f"INSERT OR REPLACE INTO check_index SELECT {_CHECK_COLUMNS} FROM (SELECT ? AS workspace,"
    " ? AS ref_id, ? AS body)"
)


def _index_check(
    conn: sqlite3.Connection, workspace: str, ref_id: str, body: str, record: Any
) -> None:
    """The check's row in the check index, inside its append's transaction. ``record`` is
    ``body`` parsed; a check as ``record_check`` writes it (text fields, an integer ts, rule
    references with text ids) is indexed from it directly; any other shape is read from
    ``body`` by SQLite, so both give the row _CHECK_COLUMNS defines."""
    row = _check_index_row(workspace, ref_id, record)
    if row is None:
        conn.execute(_CHECK_INDEX_ROW, (workspace, ref_id, body))
    else:
        conn.execute("INSERT OR REPLACE INTO check_index VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)


def _check_index_row(workspace: str, ref_id: str, record: Any) -> tuple[Any, ...] | None:
    if type(record) is not dict:
        return None
    fields: list[str | None] = []
    for name in ("app", "tool", "agent", "on_behalf_of", "result"):
        value = record.get(name)
        if name == "agent" and value is not None:
            if type(value) is not dict:
                return None
            value = value.get("name")
        if value is not None and type(value) is not str:
            return None
        fields.append(value)
    ts = record.get("ts", 0)
    rules = record.get("rules")
    ids = _rule_ids(rules) if rules is not None else ""
    if type(ts) is not int or ids is None:
        return None
    app, tool, agent, person, result = fields
    return (workspace, ref_id, ts, app, tool, agent, person, result, ids or None)


def _rule_ids(rules: Any) -> str | None:
    """The index's ``rules`` column (" a b ", or "" for none), None for another shape."""
    if type(rules) is not list:
        return None
    named = []
    for ref in rules:
        if type(ref) is not dict:
            return None
        rule_id = ref.get("id")
        if rule_id is not None:
            if type(rule_id) is not str:
                return None
            named.append(rule_id)
    return f" {' '.join(named)} " if named else ""


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


# The database and the files SQLite keeps beside it (it gives them the database's mode).
_SIDE_FILES = ("", "-wal", "-shm", "-journal")


def _private_files(path: str) -> None:
    """Make the database file readable by its owner only, before SQLite opens it.

    SQLite creates its files 0644 whatever the umask allows (and -wal/-shm with the
    database's mode): every record and the ask webhook's secret would be readable by
    every local user who can reach the data directory (THREATS.md §2). So the file is
    made 0600 first, and a database left wider by an older version is narrowed, with
    its -wal and -shm. In-memory and URI databases are left alone."""
    if path == ":memory:" or path.startswith("file:") or not path:
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.EISDIR):
            return  # SQLite opens it read-only, or says what is wrong, as before
        why = exc.strerror or str(exc)
        raise StoreError(f"cannot open the Claros database {path}: {why}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path} is not a file, not a Claros database")
        if stat.S_IMODE(info.st_mode) & 0o077 and info.st_uid == os.geteuid():
            os.fchmod(fd, 0o600)  # another user's database is theirs to keep as they chose
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise StoreError(f"cannot make {path} readable by its owner only: {why}") from exc
    finally:
        os.close(fd)
    for suffix in _SIDE_FILES[1:]:
        side = Path(path + suffix)
        try:
            info = side.lstat()
            mine = info.st_uid == os.geteuid()
            if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077 and mine:
                side.chmod(0o600)
        except FileNotFoundError:
            continue
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise StoreError(f"cannot make {side} readable by its owner only: {why}") from exc


@dataclass(frozen=True, slots=True, eq=False)
class _Append:
    """One caller's append: (record, its canonical JSON, its sha256) each, and docs."""

    workspace: str
    prepared: list[tuple[NewRecord, str, str]]
    writes: Sequence[DocWrite]
    ts: int | None


# One group transaction takes at most this many appends: the others' wait for the
# transaction stays short, and a big batch's savepoints stay cheap.
_GROUP_MAX = 64


def _fits(batch: list[_Append], item: _Append) -> bool:
    """Whether ``item`` joins ``batch``'s transaction: a record id or doc two appends of
    one batch both write would make the second's conflict depend on the batch's order
    alone; it waits for the next transaction instead (the same answer, in order)."""
    if len(batch) >= _GROUP_MAX:
        return False
    mine = {(item.workspace, n.kind, n.ref_id) for n, _, _ in item.prepared}
    docs = {(w.workspace, w.collection, w.key) for w in item.writes}
    for other in batch:
        if mine & {(other.workspace, n.kind, n.ref_id) for n, _, _ in other.prepared}:
            return False
        if docs & {(w.workspace, w.collection, w.key) for w in other.writes}:
            return False
    return True


@dataclass(frozen=True, slots=True, eq=False)
class _Written:
    """One append as written in a transaction, to fold into the aggregates."""

    workspace: str
    ts: int
    entries: list[Entry]
    records: list[Any]  # each record parsed back from its canonical JSON


def _doc_conflict(conn: sqlite3.Connection, w: DocWrite) -> None:
    """Raise the ConflictError of a doc write whose expected revision is not the doc's."""
    row = conn.execute(
        "SELECT rev FROM docs WHERE workspace = ? AND collection = ? AND key = ?",
        (w.workspace, w.collection, w.key),
    ).fetchone()
    rev = row[0] if row else 0
    state = f"at revision {rev}" if rev else "absent"
    raise ConflictError(
        f"{w.collection}/{w.key} is {state}, expected "
        f"{'absent' if w.expect_rev == 0 else f'revision {w.expect_rev}'}",
        collection=w.collection,
        key=w.key,
    )


def _entry(row: Sequence[Any]) -> Entry:
    return Entry(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])


class SqliteStore:
    """A Store on one SQLite file (or ``:memory:``-like temp paths in tests)."""

    def __init__(
        self,
        path: str | Path,
        *,
        group_commit: bool = True,
        group_wait_s: float = 30.0,
        sync: Literal["full", "normal"] = "full",
    ) -> None:
        self.path = str(path)
        self.sync = sync
        # Appends that arrive together share one transaction (claros.store.group); False:
        # one transaction each, as before (bench/append_sqlite.py measures both).
        self.group_commit = group_commit
        self._group: GroupCommit[_Append, list[Entry]] = GroupCommit(
            self._commit_group,
            _fits,
            busy=lambda: StorageUnavailableError(
                f"appends waited over {group_wait_s:g}s for the database; nothing was written",
                retry_after_s=1,
            ),
            wait_s=group_wait_s,
        )
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._buckets = BucketCache()
        _private_files(self.path)
        try:
            self._conn().executescript(_SCHEMA)
            self._index_checks()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise _unusable(self.path, exc) from exc
        except StoreError:
            self.close()
            raise

    def _index_checks(self) -> None:
        """Create Activity's check index; a database made before it gets its checks
        indexed once, here."""
        conn = self._conn()
        existed = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'check_index'"
        ).fetchone()
        if existed:
            return
        # One transaction: the table, its triggers and the checks already there, or none.
        try:
            conn.executescript(
                f"BEGIN IMMEDIATE;{_CHECK_INDEX}INSERT OR REPLACE INTO check_index"
                f" SELECT {_CHECK_COLUMNS} FROM records WHERE kind = 'check'; COMMIT;"
            )
        except BaseException:
            conn.execute("ROLLBACK")
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
                # FULL syncs the WAL at every commit: an answer goes out only once its
                # entry is on disk, through a power cut too (THREATS.md §6). NORMAL syncs
                # at WAL checkpoints only: safe against the process crashing, but a power
                # cut or system crash may lose the last commits (never the chain's order).
                conn.execute("PRAGMA synchronous=" + ("FULL" if self.sync == "full" else "NORMAL"))
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
        item = self._prepare(workspace, records, writes, ts)
        if self.group_commit:
            return self._group.submit("", item)
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            written = self._write(conn, item, self._head_of(conn, workspace))
            buckets = self._fold(conn, [written])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._buckets.keep(buckets)
        return written.entries

    @staticmethod
    def _prepare(
        workspace: str, records: Sequence[NewRecord], writes: Sequence[DocWrite], ts: int | None
    ) -> _Append:
        """An append checked and canonicalized, before it waits for a transaction."""
        check_batch(records, writes)
        prepared = []
        for new in records:
            raw, payload = record_bytes(new.record)
            prepared.append((new, raw.decode("utf-8"), payload))
        return _Append(workspace, prepared, writes, ts)

    @staticmethod
    def _head_of(conn: sqlite3.Connection, workspace: str) -> tuple[int, str]:
        head = conn.execute("SELECT seq, hash FROM heads WHERE workspace = ?", (workspace,))
        row = head.fetchone()
        return (row[0], row[1]) if row else (0, ZERO_HASH)

    def _commit_group(self, batch: list[_Append]) -> list[list[Entry] | BaseException]:
        """One transaction (one commit, one WAL sync when it syncs) for the appends that
        arrived together (claros.store.group), of any workspace: the file has one write
        lock. Each append is a savepoint: one whose record exists or whose doc condition
        fails gets its ConflictError and is rolled back alone; any other failure (a full
        disk) fails them all and nothing is written."""
        conn = self._conn()
        answers: list[list[Entry] | BaseException] = []
        heads: dict[str, tuple[int, str]] = {}
        done: list[_Written] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            if len(batch) == 1:  # alone: its failure is the transaction's, no savepoint
                item = batch[0]
                done.append(self._write(conn, item, self._head_of(conn, item.workspace)))
                answers.append(done[0].entries)
                batch = []
            for item in batch:
                head = heads.get(item.workspace) or self._head_of(conn, item.workspace)
                conn.execute("SAVEPOINT one_append")
                try:
                    written = self._write(conn, item, head)
                except ConflictError as exc:
                    conn.execute("ROLLBACK TO one_append")
                    answers.append(exc)
                else:
                    entries = written.entries
                    heads[item.workspace] = (entries[-1].seq, entries[-1].hash)
                    answers.append(entries)
                    done.append(written)
                conn.execute("RELEASE one_append")
            # The aggregates once for the whole transaction, every append folded in.
            buckets = self._fold(conn, done)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._buckets.keep(buckets)
        return answers

    def _write(self, conn: sqlite3.Connection, item: _Append, head: tuple[int, str]) -> _Written:
        """Write one append's entries, records, head and docs after ``head`` (seq, hash),
        inside the caller's transaction; the caller folds them into the aggregates."""
        workspace = item.workspace
        seq, prev = head
        when = item.ts if item.ts is not None else _now_ms()
        entries = []
        # Each record as the ledger keeps it, read back from its canonical JSON: what the
        # aggregates and the check index see is exactly what a scan of the ledger would.
        records = [jsonutil.loads(body) for _new, body, _payload in item.prepared]
        for (new, body, payload), record in zip(item.prepared, records, strict=True):
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
            if new.kind == "check":
                _index_check(conn, workspace, new.ref_id, body, record)
            entries.append(entry)
            prev = entry.hash
        last = entries[-1]
        conn.execute(
            "INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (workspace, last.seq, last.kind, last.ref_id, last.ts, last.payload_sha256,
             last.prev_hash, last.hash),
        )  # fmt: skip
        self._apply(conn, item.writes)
        return _Written(workspace, when, entries, records)

    def _fold(self, conn: sqlite3.Connection, appends: Sequence[_Written]) -> dict[BucketKey, Kept]:
        """The appends' records into their hour's and day's aggregates, inside their
        transaction: each bucket read, folded and written once, however many appends it
        takes (in seq order). Returns what was written, for the cache once committed."""
        folds: dict[BucketKey, list[tuple[Entry, Any]]] = {}
        for written in appends:
            for span, size in SPANS.items():
                key = (written.workspace, span, written.ts // size)
                folds.setdefault(key, []).extend(zip(written.entries, written.records, strict=True))
        out: dict[BucketKey, Kept] = {}
        for key, items in folds.items():
            row = conn.execute(
                "SELECT body FROM aggregates WHERE workspace = ? AND span = ? AND start = ?", key
            ).fetchone()
            bucket = self._buckets.take(key, row[0] if row else None)
            for entry, record in items:
                fold(bucket, entry.seq, entry.kind, record)
            text = jsonutil.dumps(bucket)
            conn.execute("INSERT OR REPLACE INTO aggregates VALUES (?, ?, ?, ?)", (*key, text))
            out[key] = Kept(text, bucket)
        return out

    def aggregate_buckets(
        self, workspace: str, first: int, last: int, *, span: str = "hour"
    ) -> list[tuple[int, dict[str, Any]]]:
        rows = self._conn().execute(
            "SELECT start, body FROM aggregates WHERE workspace = ? AND span = ?"
            " AND start >= ? AND start < ? ORDER BY start",
            (workspace, span, first, last),
        )
        return [(int(start), jsonutil.loads(body)) for start, body in rows]

    def aggregate_version(
        self, workspace: str, span: str, start: int
    ) -> tuple[dict[str, Any] | None, str]:
        row = (
            self._conn()
            .execute(
                "SELECT body FROM aggregates WHERE workspace = ? AND span = ? AND start = ?",
                (workspace, span, start),
            )
            .fetchone()
        )
        if row is None:
            return None, "absent"
        return jsonutil.loads(row[0]), hashlib.sha256(str(row[0]).encode()).hexdigest()

    def put_aggregate(
        self, workspace: str, span: str, start: int, bucket: Mapping[str, Any], *, expect: str
    ) -> bool:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")  # appends fold in their own IMMEDIATE transaction
        try:
            row = conn.execute(
                "SELECT body FROM aggregates WHERE workspace = ? AND span = ? AND start = ?",
                (workspace, span, start),
            ).fetchone()
            now = "absent" if row is None else hashlib.sha256(str(row[0]).encode()).hexdigest()
            if now != expect:
                conn.execute("ROLLBACK")
                return False
            conn.execute(
                "INSERT OR REPLACE INTO aggregates VALUES (?, ?, ?, ?)",
                (workspace, span, start, jsonutil.dumps(dict(bucket))),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return True

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
        body = self._record_text(workspace, kind, ref_id)
        return jsonutil.loads(body) if body is not None else None

    def get_raw_record(self, workspace: str, kind: str, ref_id: str) -> bytes | None:
        body = self._record_text(workspace, kind, ref_id)
        return body.encode("utf-8") if body is not None else None  # the bytes it was from

    def _record_text(self, workspace: str, kind: str, ref_id: str) -> str | None:
        row = (
            self._conn()
            .execute(
                "SELECT body FROM records WHERE workspace = ? AND kind = ? AND ref_id = ?",
                (workspace, kind, ref_id),
            )
            .fetchone()
        )
        return str(row[0]) if row else None

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

    def get_docs(self, workspace: str, wanted: Sequence[tuple[str, str]]) -> list[Doc | None]:
        # No round trip to save here: each pair read by its primary key as get_doc reads
        # it (one statement with an OR term per pair measured slower for two docs).
        found = {pair: self.get_doc(workspace, *pair) for pair in docs_asked(wanted)}
        return [found[pair] for pair in wanted]

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
        """Each write one statement whose condition is in its SQL (an append writes two or
        three docs per check); the revision is read only to say why a condition failed."""
        for w in writes:
            where = (w.workspace, w.collection, w.key)
            if w.value is None:
                match = "workspace = ? AND collection = ? AND key = ?"
                if w.expect_rev is None:
                    conn.execute(f"DELETE FROM docs WHERE {match}", where)
                elif w.expect_rev == 0:  # "absent": nothing to delete, unless it is there
                    if conn.execute(f"SELECT 1 FROM docs WHERE {match}", where).fetchone():
                        _doc_conflict(conn, w)
                elif not conn.execute(
                    f"DELETE FROM docs WHERE {match} AND rev = ?", (*where, w.expect_rev)
                ).rowcount:
                    _doc_conflict(conn, w)
                continue
            body = jsonutil.dumps(dict(w.value))
            if w.expect_rev is None:
                conn.execute(
                    "INSERT INTO docs VALUES (?, ?, ?, 1, ?) ON CONFLICT (workspace, collection,"
                    " key) DO UPDATE SET rev = rev + 1, body = excluded.body",
                    (*where, body),
                )
            elif w.expect_rev == 0:
                try:
                    conn.execute("INSERT INTO docs VALUES (?, ?, ?, 1, ?)", (*where, body))
                except sqlite3.IntegrityError:  # the statement alone is undone
                    _doc_conflict(conn, w)
            elif not conn.execute(
                "UPDATE docs SET rev = rev + 1, body = ? WHERE workspace = ? AND collection = ?"
                " AND key = ? AND rev = ?",
                (body, *where, w.expect_rev),
            ).rowcount:
                _doc_conflict(conn, w)

    # --- activity (issue 13) ----------------------------------------------------------
    # Checks are read in key order on the check index's primary key (workspace, check id):
    # a check id range is an index range, newest first; filters are on its columns, then
    # (only for rows that passed those) the arguments' text and the outcome, each one
    # primary-key lookup in records. No offset, no scan of the workspace.
    @staticmethod
    def _check_scan(
        workspace: str, query: CheckQuery, before: str | None, scan_limit: int
    ) -> tuple[str, list[Any]]:
        """SQL for (check_id, result, hit) of the newest ``scan_limit`` checks in the
        range, newest first; ``hit`` is ``claros.store.base.check_matches`` in SQL."""
        low, high = check_key_range(query, before)
        conds: list[str] = []
        args: list[Any] = []
        for value, column in (
            (query.app, "app"),
            (query.tool, "tool"),
            (query.agent, "agent"),
            (query.person, "person"),
            (query.result, "result"),
        ):
            if value is not None:
                conds.append(f"r.{column} IS ?")
                args.append(value)
        if query.since is not None:
            conds.append("r.ts >= ?")
            args.append(query.since)
        if query.until is not None:
            conds.append("r.ts < ?")
            args.append(query.until)
        if query.rule_id is not None:
            conds.append("instr(r.rules, ?) > 0")
            args.append(f" {query.rule_id} ")
        # The lookups last: SQLite evaluates AND left to right, so only rows that passed
        # the columns' filters are looked up.
        if query.text is not None:
            conds.append(
                "(SELECT instr(lower(substr(json_extract(b.body, '$.arguments'), 1, ?)), ?)"
                " FROM records b WHERE b.workspace = r.workspace AND b.kind = 'check'"
                " AND b.ref_id = r.check_id) > 0"
            )
            args += [SEARCH_CHARS, ascii_lower(query.text)]
        if query.outcome is not None:
            conds.append(
                "coalesce((SELECT json_extract(o.body, '$.status') FROM records o"
                " WHERE o.workspace = r.workspace AND o.kind = 'outcome'"
                " AND o.ref_id = r.check_id), 'none') IS ?"
            )
            args.append(query.outcome)
        window = "SELECT * FROM check_index WHERE workspace = ? AND check_id >= ?"
        wargs: list[Any] = [workspace, low]
        if high is not None:
            window += " AND check_id < ?"
            wargs.append(high)
        window += " ORDER BY check_id DESC LIMIT ?"
        wargs.append(scan_limit)
        hit = " AND ".join(conds) or "1"
        sql = f"SELECT r.check_id, r.result, ({hit}) AS hit FROM ({window}) r"
        return sql, [*args, *wargs]

    def list_checks(
        self,
        workspace: str,
        query: CheckQuery,
        *,
        before: str | None = None,
        limit: int = 50,
        scan_limit: int = 2_000,
    ) -> CheckPage:
        scan, args = self._check_scan(workspace, query, before, scan_limit)
        sql = (
            "SELECT s.check_id, CASE WHEN s.hit THEN (SELECT body FROM records b"
            " WHERE b.workspace = ? AND b.kind = 'check' AND b.ref_id = s.check_id) END,"
            " CASE WHEN s.hit THEN (SELECT body FROM records o WHERE o.workspace = ?"
            " AND o.kind = 'outcome' AND o.ref_id = s.check_id) END"
            f" FROM ({scan}) s ORDER BY s.check_id DESC"
        )
        rows: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        scanned = 0
        last: str | None = None
        for check_id, body, outcome in self._conn().execute(sql, [workspace, workspace, *args]):
            scanned += 1
            last = check_id
            if body is None:
                continue
            rows.append((jsonutil.loads(body), jsonutil.loads(outcome) if outcome else None))
            if len(rows) == limit:
                # Whether anything older lies in the range is not known without reading on;
                # the next page answers that (it may be empty, with no next).
                return CheckPage(rows, scanned, check_id)
        return CheckPage(rows, scanned, last if scanned == scan_limit else None)

    def count_checks(
        self, workspace: str, query: CheckQuery, *, scan_limit: int = 10_000
    ) -> CheckCounts:
        scan, args = self._check_scan(workspace, query, None, scan_limit)
        sql = (
            "SELECT CASE WHEN s.hit THEN s.result END AS res, count(*), min(s.check_id)"
            f" FROM ({scan}) s GROUP BY res"
        )
        by_result: dict[str, int] = {}
        scanned = 0
        oldest: str | None = None
        for result, n, first in self._conn().execute(sql, args):
            scanned += n
            oldest = first if oldest is None or first < oldest else oldest
            if result is not None:
                by_result[str(result)] = n
        complete = True
        if scanned == scan_limit and oldest is not None:
            low, _ = check_key_range(query, None)
            older = self._conn().execute(
                "SELECT 1 FROM check_index WHERE workspace = ? AND check_id >= ?"
                " AND check_id < ? LIMIT 1",
                (workspace, low, oldest),
            )
            complete = older.fetchone() is None
        return CheckCounts(by_result, scanned, complete)

    def record_entry(self, workspace: str, kind: str, ref_id: str) -> Entry | None:
        row = (
            self._conn()
            .execute(
                "SELECT l.workspace, l.seq, l.kind, l.ref_id, l.ts, l.payload_sha256,"
                " l.prev_hash, l.hash FROM records r JOIN ledger l"
                " ON l.workspace = r.workspace AND l.seq = r.seq"
                " AND l.kind = r.kind AND l.ref_id = r.ref_id"
                " WHERE r.workspace = ? AND r.kind = ? AND r.ref_id = ?",
                (workspace, kind, ref_id),
            )
            .fetchone()
        )
        return _entry(row) if row else None

    # --- a page that stays fast (issue 13, item 7) ------------------------------------
    def checkpoint_before(self, workspace: str, seq: int) -> Checkpoint | None:
        row = (
            self._conn()
            .execute(
                "SELECT workspace, seq, hash, ts, key_id, signature FROM checkpoints"
                " WHERE workspace = ? AND seq < ? ORDER BY seq DESC LIMIT 1",
                (workspace, seq),
            )
            .fetchone()
        )
        return Checkpoint(*row) if row else None
