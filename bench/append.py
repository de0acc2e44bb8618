"""Append throughput for one workspace, 1/4/16 concurrent writers, on SQLite, as a ratio to
a plain insert of the same row without the ledger (DynamoDB: bench/append_dynamo.py).

The baseline is what a store without a ledger would do: insert the row as plain
``json.dumps``, one transaction a row, with the store's SQLite settings. The append adds the
canonical form, the entry (hash chain) and the head update, in one transaction.

Target (issue "Ledger core"): an append costs at most 1.5x a plain insert on SQLite.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import Result, report
from claros.store.sqlite import SqliteStore

WRITERS = (1, 4, 16)


def sample_row(i: int) -> dict[str, Any]:
    return {
        "check_id": f"chk_{i:016x}",
        "workspace": "bench",
        "ts": 1_796_000_000_000 + i,
        "app": "shop",
        "tool": "refund_create",
        "arguments": {"order": f"SO-{i}", "amount": "120.50", "currency": "EUR",
                      "reason": "damaged on arrival " * 8},
        "agent": {"name": "claude-code", "model": "claude", "session": "s-1",
                  "call_id": f"c-{i}", "via": {"guard": "claros-guard", "version": "0.1.0"}},
        "on_behalf_of": "dana@example.com",
        "obo_source": "agent_key",
        "result": "allow",
        "allowed": True,
        "reason": "no rule applied",
    }  # fmt: skip


def run_threads(writers: int, total: int, work: Callable[[int], None]) -> float:
    per = total // writers
    barrier = threading.Barrier(writers + 1)
    errors: list[BaseException] = []

    def body(w: int) -> None:
        barrier.wait()
        try:
            for i in range(per):
                work(w * per + i)
        except BaseException as exc:  # a writer that died would make the figure a lie
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} writer(s) failed") from errors[0]
    return time.perf_counter() - start


def sqlite_pair(writers: int, total: int, root: Path) -> tuple[Result, Result]:
    store = SqliteStore(root / f"append-{writers}.db")
    local = threading.local()

    def plain_conn() -> sqlite3.Connection:
        conn = getattr(local, "conn", None)
        if conn is None:
            # The same settings the store uses: WAL, the store's synchronous (FULL by
            # default: each commit syncs the WAL), one txn a row.
            conn = sqlite3.connect(root / f"plain-{writers}.db", isolation_level=None,
                                   check_same_thread=False, timeout=60)  # fmt: skip
            conn.execute("PRAGMA synchronous=" + store.sync.upper())
            local.conn = conn
        return conn

    # The file's settings once, before the writers start (WAL needs a moment alone).
    setup = sqlite3.connect(root / f"plain-{writers}.db", isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute(
        "CREATE TABLE IF NOT EXISTS records (workspace TEXT, kind TEXT, ref_id TEXT,"
        " seq INTEGER, body TEXT, PRIMARY KEY (workspace, kind, ref_id))"
    )
    setup.close()

    def plain(i: int) -> None:
        conn = plain_conn()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?)",
            ("bench", "check", f"chk_{i:016x}", i, json.dumps(sample_row(i))),
        )
        conn.execute("COMMIT")

    def append(i: int) -> None:
        store.append("bench", "check", f"chk_{i:016x}", sample_row(i))

    plain_s = run_threads(writers, total, plain)
    append_s = run_threads(writers, total, append)
    head = store.head("bench")
    assert head is not None and head.seq == total // writers * writers
    check = sqlite3.connect(root / f"plain-{writers}.db")
    assert check.execute("SELECT count(*) FROM records").fetchone()[0] == head.seq
    check.close()
    store.close()
    return (
        Result(f"sqlite plain insert, {writers} writers", plain_s, total),
        Result(f"sqlite ledger append, {writers} writers", append_s, total),
    )


def main(total: int = 3200) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for writers in WRITERS:
            plain, append = sqlite_pair(writers, total, Path(tmp))
            out.append(report(f"SQLite append, {writers} writers", [append], plain))
    # DynamoDB, and group commit against the append before it: ``python -m bench
    # append_group`` (bench/append_sqlite.py, bench/append_dynamo.py).
    return out


if __name__ == "__main__":
    main()
