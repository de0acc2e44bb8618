"""What the SQLite append no longer does per check (issue 14, a check that costs little),
and that the shortcuts change nothing that is stored.

- The aggregate buckets are kept parsed between appends (claros.store.buckets): the rows
  must hold byte for byte the text a store that parses every bucket again writes, also when
  another store (another process) wrote the bucket in between, or a transaction of ours
  rolled back after folding.
- Checks are indexed by the append itself rather than by a trigger that parsed the record's
  JSON once per column: every index row must be what that SQL reads from the record.
"""

from __future__ import annotations

import sqlite3
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from claros import jsonutil
from claros.aggregates import HOUR_MS
from claros.store.base import ConflictError, DocWrite, NewRecord
from claros.store.buckets import BucketCache
from claros.store.sqlite import _CHECK_COLUMNS, SqliteStore

WS = "acme"


def _check(i: int) -> dict[str, Any]:
    """Check rows of the shapes record_check writes: results, amounts as Decimal and as
    text, rule references, people and agents that vary."""
    result = ("allow", "stop", "ask", "nudge")[i % 4]
    row: dict[str, Any] = {
        "check_id": f"chk_{i:04d}",
        "ts": 1_000 + i,
        "app": "shop",
        "tool": "refund_create",
        "arguments": {"amount": Decimal("12.50") + i, "note": "é ☃ 𝄞"},
        "agent": {"name": f"agent-{i % 3}", "via": {"guard": "claros-guard"}},
        "on_behalf_of": f"p{i % 2}@example.com",
        "obo_source": "agent_key",
        "result": result,
        "rules": [
            {
                "id": f"r{j}",
                "version": 1,
                "hash": "ab" * 32,
                "matched": j == i % 5,
                "confirm": {"made_by": "manual", "confirmed_by": "dana@example.com"},
            }
            for j in range(5)
        ],  # fmt: skip
    }
    if result != "allow":
        row.update(severity="high", amount=Decimal("12.5") + i, currency="EUR")
    return row


def _buckets(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT * FROM aggregates ORDER BY workspace, span, start"))


def _appends(store: SqliteStore, n: int, *, first: int = 0) -> None:
    for i in range(first, first + n):
        hour = (i // 7) * HOUR_MS  # a few appends per hour, several hours
        store.append(WS, "check", f"c{i}", _check(i), ts=500 * HOUR_MS + hour + i)


def test_kept_buckets_write_the_text_a_store_that_parses_every_time_writes(
    tmp_path: Path,
) -> None:
    kept = SqliteStore(tmp_path / "kept.db")
    parsed = SqliteStore(tmp_path / "parsed.db")
    parsed._buckets = BucketCache(size=0)  # keeps nothing: parses every bucket, as before
    try:
        _appends(kept, 40)
        _appends(parsed, 40)
        assert len(kept._buckets) > 0 and len(parsed._buckets) == 0
        assert _buckets(tmp_path / "kept.db") == _buckets(tmp_path / "parsed.db")
    finally:
        kept.close()
        parsed.close()


def test_a_bucket_another_store_wrote_meanwhile_is_read_from_the_row(tmp_path: Path) -> None:
    path = tmp_path / "one.db"
    ours, theirs = SqliteStore(path), SqliteStore(path)  # two processes on one file
    reference = SqliteStore(tmp_path / "reference.db")
    reference._buckets = BucketCache(size=0)
    try:
        for i in range(12):
            writer = theirs if i % 3 == 2 else ours
            ts = 500 * HOUR_MS + i
            writer.append(WS, "check", f"c{i}", _check(i), ts=ts)
            reference.append(WS, "check", f"c{i}", _check(i), ts=ts)
        assert _buckets(path) == _buckets(tmp_path / "reference.db")
        [(_, hour)] = ours.aggregate_buckets(WS, 500, 501)
        assert hour["entries"] == 12
    finally:
        for store in (ours, theirs, reference):
            store.close()


def test_a_rolled_back_append_leaves_nothing_folded_behind(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db", group_commit=False)
    reference = SqliteStore(tmp_path / "b.db", group_commit=False)
    reference._buckets = BucketCache(size=0)
    try:
        for s in (store, reference):
            s.append(WS, "check", "c0", _check(0), ts=500 * HOUR_MS)
            # Folded, then refused by its doc condition: the transaction rolls back.
            with pytest.raises(ConflictError):
                s.append(
                    WS, "check", "c1", _check(1), ts=500 * HOUR_MS + 1,
                    writes=[DocWrite(WS, "call", "k", {"x": 1}, expect_rev=7)],
                )  # fmt: skip
            s.append(WS, "check", "c2", _check(2), ts=500 * HOUR_MS + 2)
        assert _buckets(tmp_path / "a.db") == _buckets(tmp_path / "b.db")
        [(_, hour)] = store.aggregate_buckets(WS, 500, 501)
        assert hour["entries"] == 2
    finally:
        store.close()
        reference.close()


def test_a_group_whose_one_append_is_refused_folds_the_others_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    reference = SqliteStore(tmp_path / "b.db", group_commit=False)
    reference._buckets = BucketCache(size=0)
    try:
        reference.append(WS, "check", "c0", _check(0), ts=500 * HOUR_MS)
        reference.append(WS, "check", "c2", _check(2), ts=500 * HOUR_MS)
        store.append(WS, "check", "c0", _check(0), ts=500 * HOUR_MS)
        # Three appends in one group transaction; the middle one's record exists already.
        batch = [
            store._prepare(WS, [NewRecord("check", ref, _check(i))], (), 500 * HOUR_MS)
            for i, ref in ((1, "c0"), (2, "c2"), (3, "c0"))
        ]
        answers = store._commit_group(batch[1:2] + batch[0:1] + batch[2:])
        assert [type(a).__name__ for a in answers] == ["list", "ConflictError", "ConflictError"]
        assert _buckets(tmp_path / "a.db") == _buckets(tmp_path / "b.db")
    finally:
        store.close()
        reference.close()


def test_concurrent_appends_fold_every_record_once(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    try:
        threads = [
            threading.Thread(target=_appends, args=(store, 25), kwargs={"first": 100 * t})
            for t in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        hours = [b for _, b in store.aggregate_buckets(WS, 0, 10**6)]
        days = [b for _, b in store.aggregate_buckets(WS, 0, 10**6, span="day")]
        for span in (hours, days):
            assert sum(b["entries"] for b in span) == 150
            assert min(b["seq_min"] for b in span) == 1
            assert max(b["seq_max"] for b in span) == 150
    finally:
        store.close()


def _other_kinds(i: int) -> list[NewRecord]:
    """Records of every kind the aggregates count, beside the checks."""
    return [
        NewRecord("approval", f"q{i}", {"ask_id": f"q{i}", "check_id": f"c{i}",
                  "decision": ("approve", "deny")[i % 2], "authority": "owner",
                  "decided_by": "dana@example.com", "opened_at": 1, "decided_at": 5 + i}),
        NewRecord("override", f"o{i}", {"override_id": f"o{i}", "check_id": f"c{i}",
                  "verdict": ("wrong_stop", "missed")[i % 2], "rule_id": "r1",
                  "check_result": "stop", "check_rules": _check(i)["rules"]}),
        NewRecord("outcome", f"out{i}", {"agent": "cc", "key_id": "k1",
                  "check_result": ("stop", "allow")[i % 2]}),
        NewRecord("unchecked", f"u{i}", {"agent": {"name": "cc", "via": {"guard": "g"}},
                  "key_id": "k1"}),
    ]  # fmt: skip


def test_a_bucket_is_written_as_jsonutil_writes_it(tmp_path: Path) -> None:
    """The bucket's text is exactly the whole bucket written at once, and the dict kept
    beside it is that bucket, for every kind of record."""
    store = SqliteStore(tmp_path / "a.db")
    try:
        for i in range(30):
            records = [NewRecord("check", f"c{i}", _check(i)), *_other_kinds(i)]
            store.append_many(WS, records, ts=500 * HOUR_MS + (i // 10) * HOUR_MS)
            for key, kept in store._buckets._kept.items():
                assert kept.text == jsonutil.dumps(kept.bucket), key
        assert len(store._buckets) == 4  # three hours and their day
        for *_, text in _buckets(tmp_path / "a.db"):
            assert text == jsonutil.dumps(jsonutil.loads(text))
    finally:
        store.close()


def test_a_checks_rule_references_are_not_copied_into_its_buckets(tmp_path: Path) -> None:
    """The hour's and the day's bucket of a check keep its rules sample as the record's
    seq (claros.aggregates.RECORD_SAMPLES), not a copy of its rule references: each row
    stays a few hundred bytes, and is still exactly its bucket written whole."""
    store = SqliteStore(tmp_path / "a.db")
    try:
        for i in range(5):
            store.append(WS, "check", f"c{i}", {**_check(i), "result": "stop"}, ts=500 * HOUR_MS)
        rows = _buckets(tmp_path / "a.db")
        assert {span for _, span, _, _ in rows} == {"hour", "day"}
        for *_, text in rows:
            bucket = jsonutil.loads(text)
            assert bucket["s_with_rules"] == [{"seq": 3}, {"seq": 4}, {"seq": 5}]
            assert bucket["s_stops"] == [{"seq": 3}, {"seq": 4}, {"seq": 5}]
            assert "ab" * 32 not in text and "confirmed_by" not in text  # no rule copied
        for kept in store._buckets._kept.values():
            assert kept.text == jsonutil.dumps(kept.bucket)
    finally:
        store.close()


def _index(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(the index as written, the index its SQL definition builds from the records, as
    the trigger and the first indexing of an old database build it)."""
    query = "SELECT * FROM check_index ORDER BY workspace, check_id"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        written = list(conn.execute(query))
        conn.execute("BEGIN")
        conn.execute("DELETE FROM check_index")
        conn.execute(
            f"INSERT INTO check_index SELECT {_CHECK_COLUMNS} FROM records WHERE kind = 'check'"
        )
        read = list(conn.execute(query))
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    return written, read


ODD_CHECKS: list[dict[str, Any]] = [
    {},  # nothing at all: ts 0, every column null
    {"ts": Decimal("12.5"), "app": 7, "tool": True, "result": {"a": 1}},
    {"agent": {"name": ["cc"]}, "on_behalf_of": ["x"]},
    {"agent": {"model": "m"}, "rules": [{"version": 1}, {}]},
    {"agent": {"name": 5}, "rules": [{"id": 3}, {"id": "a"}]},
    {"rules": [{"id": "r2", "matched": True}], "ts": 2**40},
    {"rules": [{"id": "é 𝄞"}], "agent": {"name": 'a"b\\c\nd'}, "app": ""},
]


def test_the_check_index_holds_what_its_sql_reads_from_each_record(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    try:
        for i in range(12):
            store.append(WS, "check", f"c{i:02d}", _check(i))
        for i, odd in enumerate(ODD_CHECKS):
            store.append(WS, "check", f"odd{i}", odd)
        store.append(WS, "approval", "a1", {"ts": 5, "app": "shop"})  # not a check
        written, read = _index(tmp_path / "a.db")
        assert len(written) == 12 + len(ODD_CHECKS)
        assert written == read
    finally:
        store.close()


def test_a_database_made_with_the_index_trigger_drops_it_and_indexes_each_check_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:  # the trigger as databases made before had it
        conn.execute(
            "CREATE TRIGGER check_index_add AFTER INSERT ON records WHEN NEW.kind = 'check'"
            f" BEGIN INSERT OR REPLACE INTO check_index SELECT {_CHECK_COLUMNS} FROM"
            " (SELECT NEW.workspace AS workspace, NEW.ref_id AS ref_id, NEW.body AS body); END"
        )
    store = SqliteStore(path)
    try:
        with sqlite3.connect(path) as conn:
            triggers = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
        assert "check_index_add" not in triggers and "check_index_drop" in triggers
        store.append(WS, "check", "c1", _check(1))
        written, read = _index(path)
        assert written == read and len(written) == 1
    finally:
        store.close()
