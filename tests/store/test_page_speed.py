"""Pages that stay fast as the ledger grows (issue 13, item 7), on SQLite and moto
DynamoDB: ``checkpoint_before`` (one keyed read instead of listing every checkpoint), and
the sums of past days kept per ledger head (``claros.evidence.span_cache``), which must
always say what a fresh read says."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from claros.aggregates import DAY_MS, HOUR_MS
from claros.evidence import span_cache, windowed
from claros.evidence.activity import load_versions
from claros.evidence.windowed import EVIDENCE_PARTS, scan_counters, window_bucket, window_counters
from claros.ledger import Checkpoint
from claros.store.base import Store
from claros.store.sqlite import SqliteStore
from tests.store.pruning import prune_through

WS = "acme"
BASE = 20_000 * DAY_MS  # a fixed instant: tests never depend on today's date


def _cp(seq: int) -> Checkpoint:
    return Checkpoint(WS, seq, f"{seq:064x}", 1000 + seq, "ed25519:k", "c2ln")


def test_checkpoint_before_is_the_latest_below(store: Store) -> None:
    assert store.checkpoint_before(WS, 10) is None
    for seq in (100, 5, 20):
        assert store.add_checkpoint(_cp(seq)) is True
    assert store.checkpoint_before(WS, 1) is None
    assert store.checkpoint_before(WS, 5) is None  # strictly below
    assert store.checkpoint_before(WS, 6) == _cp(5)
    assert store.checkpoint_before(WS, 20) == _cp(5)
    assert store.checkpoint_before(WS, 21) == _cp(20)
    assert store.checkpoint_before(WS, 100) == _cp(20)
    assert store.checkpoint_before(WS, 10**9) == _cp(100)
    assert store.checkpoint_before(WS, 0) is None and store.checkpoint_before(WS, -3) is None
    assert store.checkpoint_before("other", 50) is None


def _fresh(
    store: Store, start: int, end: int, only: frozenset[str] | None = None
) -> dict[str, Any]:
    span_cache.clear()
    return window_bucket(store, WS, start, end, only=only)


def _check(store: Store, ref: str, ts: int, result: str = "allow") -> None:
    store.append(WS, "check", ref, {"check_id": ref, "result": result, "ts": ts}, ts=ts)


def _approval(store: Store, ref: str, ts: int, waited: int) -> None:
    store.append(
        WS,
        "approval",
        ref,
        {"ask_id": ref, "decision": "approve", "decided_by": "dana@example.com",
         "opened_at": ts - waited, "decided_at": ts},
        ts=ts,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _nothing_kept() -> Any:
    span_cache.clear()
    yield
    span_cache.clear()


def test_kept_sums_say_what_a_fresh_read_says(store: Store) -> None:
    for day in range(5):
        _check(store, f"d{day}", BASE + day * DAY_MS + 5 * HOUR_MS, "stop" if day % 2 else "allow")
        _approval(store, f"a{day}", BASE + day * DAY_MS + 6 * HOUR_MS, 1000 * (5 - day))
    start, end = BASE + 7 * 60_000, BASE + 4 * DAY_MS + 9 * HOUR_MS + 1
    first = window_bucket(store, WS, start, end, only=EVIDENCE_PARTS)
    assert first["checks"] == {"allow": 3, "stop": 2}
    # Read again with nothing new: what was kept.
    assert window_bucket(store, WS, start, end, only=EVIDENCE_PARTS) == first
    # Entries stamped after the whole days (now, as every writer stamps them) keep the
    # sums of the days; the window's last hours still see them.
    _check(store, "late", BASE + 4 * DAY_MS + 8 * HOUR_MS, "ask")
    again = window_bucket(store, WS, start, end, only=EVIDENCE_PARTS)
    assert again["checks"] == {"allow": 3, "stop": 2, "ask": 1}
    assert again == _fresh(store, start, end, EVIDENCE_PARTS)


def test_an_entry_stamped_inside_kept_days_reads_them_again(store: Store) -> None:
    for day in range(4):
        _check(store, f"d{day}", BASE + day * DAY_MS + HOUR_MS)
    start, end = BASE, BASE + 4 * DAY_MS
    assert window_bucket(store, WS, start, end)["checks"] == {"allow": 4}
    # A writer whose clock lags stamps an entry inside the days already summed.
    _check(store, "lagging", BASE + 2 * DAY_MS + 3 * HOUR_MS, "stop")
    _approval(store, "slow", BASE + DAY_MS + 2 * HOUR_MS, 4000)
    got = window_bucket(store, WS, start, end)
    assert got["checks"] == {"allow": 4, "stop": 1}
    assert got["ov_n"] == {"dana@example.com": {"approve": {"25": 1}}}
    assert got == _fresh(store, start, end)


def test_more_new_entries_than_are_checked_read_the_days_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(span_cache, "MAX_NEW", 2)
    for day in range(3):
        _check(store, f"d{day}", BASE + day * DAY_MS)
    start, end = BASE, BASE + 3 * DAY_MS
    assert window_bucket(store, WS, start, end)["checks"] == {"allow": 3}
    reads: list[tuple[int, int, str]] = []
    real = store.aggregate_buckets

    def counted(workspace: str, first: int, last: int, *, span: str = "hour") -> Any:
        reads.append((first, last, span))
        return real(workspace, first, last, span=span)

    monkeypatch.setattr(store, "aggregate_buckets", counted)
    for i in range(2):  # after the days: checked one by one, the sums stay
        _check(store, f"after{i}", BASE + 10 * DAY_MS + i)
    assert window_bucket(store, WS, start, end)["checks"] == {"allow": 3}
    assert reads == []
    for i in range(3):  # more than MAX_NEW since: the days are read again
        _check(store, f"later{i}", BASE + 11 * DAY_MS + i)
    assert window_bucket(store, WS, start, end)["checks"] == {"allow": 3}
    assert reads and {span for _, _, span in reads} == {"day"}


def test_kept_sums_are_per_store(store: Store, tmp_path: Path) -> None:
    _check(store, "mine", BASE + HOUR_MS)
    assert window_bucket(store, WS, BASE, BASE + DAY_MS)["checks"] == {"allow": 1}
    other = SqliteStore(tmp_path / "other.db")
    try:
        assert window_bucket(other, WS, BASE, BASE + DAY_MS) == {}
    finally:
        other.close()


def test_what_is_kept_is_not_changed_by_its_readers(store: Store) -> None:
    _check(store, "c", BASE + HOUR_MS, "stop")
    got = window_bucket(store, WS, BASE, BASE + DAY_MS)
    got["checks"]["stop"] = 99
    got.clear()
    assert window_bucket(store, WS, BASE, BASE + DAY_MS)["checks"] == {"stop": 1}


def test_the_minutes_at_a_windows_edges_say_what_a_fresh_read_says(store: Store) -> None:
    hour = BASE + 3 * HOUR_MS
    results = ("allow", "stop", "ask", "nudge")
    for i in range(30):  # one every 90 s, over 45 minutes of the hour
        _check(store, f"m{i}", hour + i * 90_000 + 7, results[i % 4])
    start, end = hour + 10 * 60_000 + 500, hour + 40 * 60_000 + 30_000
    got = window_bucket(store, WS, start, end)
    assert sum(got["checks"].values()) == 20  # m7 .. m26
    assert got == _fresh(store, start, end)
    assert window_bucket(store, WS, start, end) == got  # the minutes kept
    # One in the minute the window's end cuts, one (a lagging clock) in a kept minute.
    _check(store, "cut", end - 1000, "stop")
    _check(store, "lagging", hour + 20 * 60_000, "stop")
    again = window_bucket(store, WS, start, end)
    assert sum(again["checks"].values()) == 22
    assert again == _fresh(store, start, end)


def test_a_prune_reads_the_kept_days_again(store: Store, tmp_path: Path) -> None:
    for day in range(4):
        _check(store, f"d{day}", BASE + day * DAY_MS + HOUR_MS, "stop")
    start, end = BASE, BASE + 5 * DAY_MS
    assert window_bucket(store, WS, start, end)["checks"] == {"stop": 4}
    # The prune entry is stamped after the window: only the log's new start tells.
    prune_through(store, tmp_path / "keys", WS, 2, ts=BASE + 10 * DAY_MS)
    got = window_bucket(store, WS, start, end)
    assert got["checks"] == {"stop": 2}
    assert got == _fresh(store, start, end)


def _mixed_hour(store: Store, hour: int, minutes: range, tag: str = "") -> None:
    """Checks (with rules), approvals, outcomes and unchecked writes, one a minute."""
    for m in minutes:
        ts = hour + m * 60_000 + 11
        if m % 4 == 3:
            _approval(store, f"a{tag}{m}", ts, 1_000 * m)
        elif m % 4 == 2:
            outcome = {"check_id": f"h{tag}{m - 1}", "status": "ok", "agent": "cursor",
                       "check_result": "stop", "key_id": "k1"}  # fmt: skip
            store.append(WS, "outcome", f"o{tag}{m}", outcome, ts=ts)
        elif m % 8 == 1:
            store.append(WS, "unchecked", f"u{tag}{m}", {"agent": {"name": "cursor", "via": {
                "guard": "claros-guard"}}, "key_id": "k1"}, ts=ts)  # fmt: skip
        else:
            store.append(WS, "check", f"h{tag}{m}", {
                "check_id": f"h{tag}{m}", "result": ("stop", "ask", "allow")[m % 3], "ts": ts,
                "agent": {"name": "cursor", "via": {"guard": "claros-guard"}},
                "rules": [{"id": "r", "version": 1, "matched": True}], "severity": "high",
                "amount": "12.50", "currency": "EUR"}, ts=ts)  # fmt: skip


def _scan_bucket(store: Store, start: int, end: int) -> dict[str, Any]:
    """Every record of [start, end) folded (the reference), but the waits' exact ms (a
    window gathers them in parts; the counters below compare the medians they give)."""
    versions = load_versions(store, WS)
    bucket = scan_counters(store, WS, versions, start=start, end=end, fast_seconds=5).bucket
    return {k: v for k, v in bucket.items() if k != "ov_ms"}


def _window(store: Store, start: int, end: int) -> dict[str, Any]:
    """A first look at [start, end) (nothing kept), but the waits' exact ms."""
    return {k: v for k, v in _fresh(store, start, end).items() if k != "ov_ms"}


def _read_ranges(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The [start, end) ranges a window reads records of from the ledger."""
    read: list[tuple[int, int]] = []
    real = windowed.records_between

    def spy(store: Store, workspace: str, start: int, end: int) -> Any:
        read.append((start, end))
        return real(store, workspace, start, end)

    monkeypatch.setattr(windowed, "records_between", spy)
    return read


def test_a_windows_end_hour_is_its_row_when_nothing_is_stamped_after(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    hour = BASE + 2 * DAY_MS + 5 * HOUR_MS
    _mixed_hour(store, BASE + DAY_MS + 20 * HOUR_MS, range(0, 60, 7), "d")  # days before
    _mixed_hour(store, hour, range(0, 41))
    start, end = BASE + DAY_MS + 20 * HOUR_MS + 30 * 60_000 + 5, hour + 45 * 60_000 + 1
    want = _scan_bucket(store, start, end)
    read = _read_ranges(monkeypatch)
    got = _window(store, start, end)
    assert got == want
    assert sum(got["checks"].values()) > 10
    # The start edge's minutes were read from the ledger; nothing of the end hour was.
    assert read and all(b <= hour for _a, b in read)
    # The evidence's counters say what a scan says (medians from the row's waits).
    versions = load_versions(store, WS)
    mine = window_counters(store, WS, versions, start=start, end=end, fast_seconds=5)
    theirs = scan_counters(store, WS, versions, start=start, end=end, fast_seconds=5)
    assert mine.oversight.medians and mine.oversight.medians == {
        p: (statistics.median(s), len(s)) for p, s in theirs.oversight.seconds.items() if s
    }
    assert mine.oversight.too_fast == theirs.oversight.too_fast
    assert mine.coverage.agents() == theirs.coverage.agents()


def test_an_entry_stamped_after_the_windows_end_reads_the_end_hour_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    hour = BASE + 5 * HOUR_MS
    _mixed_hour(store, hour, range(0, 30))
    end = hour + 35 * 60_000
    # A writer whose clock runs ahead stamps its entry after the window's end, in its hour.
    _check(store, "ahead", end + 60_000, "stop")
    want = _scan_bucket(store, BASE, end)
    read = _read_ranges(monkeypatch)
    got = _window(store, BASE, end)
    assert got == want
    assert "ahead" not in str(got)
    assert (hour, end) in read or any(a <= hour + 60_000 and b == end for a, b in read)


def test_an_old_row_of_the_end_hour_reads_as_its_records(store: Store) -> None:
    hour = BASE + 5 * HOUR_MS
    for k, waited in enumerate((3_000, 700, 12_000)):
        _approval(store, f"a{k}", hour + k * 60_000, waited)
    end = hour + 10 * 60_000
    want = _scan_bucket(store, BASE, end)
    # The hour as a server before the bins wrote it: every wait in a list.
    ((n, bucket),) = store.aggregate_buckets(WS, hour // HOUR_MS, hour // HOUR_MS + 1)
    bucket.pop("ov_n")
    bucket.pop("ov_ms")
    bucket["ov_waits"] = {"dana@example.com": {"approve": [3_000, 700, 12_000]}}
    _, version = store.aggregate_version(WS, "hour", n)
    assert store.put_aggregate(WS, "hour", n, bucket, expect=version)
    got = _window(store, BASE, end)
    assert got == want and got["ov_n"] == want["ov_n"]
    versions = load_versions(store, WS)
    mine = window_counters(store, WS, versions, start=BASE, end=end, fast_seconds=5)
    assert mine.oversight.medians == {"dana@example.com": (3.0, 3)}


def test_a_pruned_end_hour_is_read_from_the_ledger(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hour = BASE + 5 * HOUR_MS
    for m in range(6):
        _check(store, f"p{m}", hour + m * 60_000, "stop")
    prune_through(store, tmp_path / "keys", WS, 3, ts=hour + 3 * HOUR_MS)
    end = hour + 30 * 60_000
    read = _read_ranges(monkeypatch)
    got = _window(store, BASE, end)
    assert got["checks"] == {"stop": 3}  # the hour's row still counts the six
    assert got == _scan_bucket(store, BASE, end)
    assert any(a <= hour + 60_000 and b == end for a, b in read)
