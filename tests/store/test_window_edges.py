"""A window's edges read as few rows and records as they may (issue 13, item 7: a first
look as fast at a million entries as at 10k), on SQLite and moto DynamoDB. The end edge,
from the last midnight to the window's end, is its day's row. Every way gives what
feeding every record of the window to the counters gives (``scan_counters``)."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from typing import Any

import pytest

from claros.aggregates import DAY_MS, HOUR_MS
from claros.evidence import span_cache, windowed
from claros.evidence.activity import load_versions
from claros.evidence.windowed import (
    EVIDENCE_PARTS,
    HOME_PARTS,
    scan_counters,
    window_bucket,
    window_counters,
)
from claros.store.base import Store

WS = "acme"
BASE = 20_000 * DAY_MS  # a fixed instant (a UTC midnight): tests never depend on today
MINUTE = 60_000
END = BASE + 2 * DAY_MS + 7 * HOUR_MS + 13 * MINUTE + 1  # the windows' end, inside day 2
AGENTS = (
    {"name": "cursor", "via": {"guard": "claros-guard"}},
    {"name": "claude-code", "via": {"guard": "claros-hooks"}},
    {"name": "codex"},
    {},
)
PEOPLE = ("dana@acme.test", "erin@acme.test", None)


@pytest.fixture(autouse=True)
def _nothing_kept() -> Iterator[None]:
    span_cache.clear()
    yield
    span_cache.clear()


def _record(i: int, ts: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A check of any result (approved repeats, near-misses with amounts of several
    exponents and currencies, guards), an answer with its wait, an override, an outcome
    or a write the guard let through unchecked."""
    kind = rng.choice(["check"] * 6 + ["approval"] * 2 + ["override", "outcome", "unchecked"])
    agent = rng.choice(AGENTS)
    result = rng.choice(["allow", "nudge", "ask", "stop"])
    refs = [{"id": rng.choice(["r1", "r2"]), "version": 1, "matched": rng.random() < 0.7}]
    if kind == "check":
        rec: dict[str, Any] = {
            "check_id": f"c{i}", "ts": ts, "app": "shop", "tool": rng.choice(["refund", "pay"]),
            "result": result, "agent": agent, "rules": refs,
            "on_behalf_of": rng.choice(PEOPLE), "obo_source": rng.choice(["key", None]),
        }  # fmt: skip
        if result != "allow" and rng.random() < 0.8:
            rec["severity"] = {"stop": "high", "ask": "medium", "nudge": "low"}[result]
            rec["amount"] = rng.choice(["12.50", 7, "3.1", "1e3", "nonsense"])
            rec["currency"] = rng.choice(["EUR", "USD"])
        if rng.random() < 0.1:
            rec["approval"] = {"ask_id": f"q{i}"}  # an approved repeat: counts nothing
        return kind, rec
    if kind == "approval":
        return kind, {
            "ask_id": f"q{i}", "decision": rng.choice(["approve", "deny", "expired"]),
            "decided_by": rng.choice(PEOPLE[:2]), "authority": "owner",
            "opened_at": ts - rng.choice([800, 4_000, 4_000, rng.randrange(-2_000, 90_000)]),
            "decided_at": ts,
        }  # fmt: skip
    if kind == "override":
        return kind, {
            "override_id": f"o{i}", "check_id": f"c{i - 1}", "rule_id": "r1",
            "verdict": rng.choice(["wrong_stop", "missed", "right_stop"]),
            "check_result": rng.choice(["stop", "ask"]), "check_rules": refs,
        }  # fmt: skip
    if kind == "outcome":
        return kind, {"check_id": f"c{i - 1}", "status": "ok", "key_id": "k1",
                      "agent": agent.get("name"), "check_result": result}  # fmt: skip
    return kind, {"agent": agent, "key_id": "k1"}


def _workload(store: Store, rng: random.Random, start: int, end: int, every: int) -> None:
    """One record every ``every`` ms or so over [start, end), stamped a little out of
    order as writers with skewed clocks stamp them (within the scan's CLOCK_SKEW_MS)."""
    for i, ts in enumerate(range(start, end, every)):
        kind, rec = _record(i, ts, rng)
        stamp = ts + rng.randrange(-90_000, 90_000)
        store.append(WS, kind, f"{kind}-{i}", rec, ts=stamp)


def _without_ms(bucket: dict[str, Any], only: frozenset[str]) -> dict[str, Any]:
    """The parts asked for, but the waits' exact ms (compared through the medians)."""
    return {k: v for k, v in bucket.items() if k in only and k != "ov_ms"}


def _scan(store: Store, start: int, end: int) -> Any:
    return scan_counters(store, WS, load_versions(store, WS), start=start, end=end,
                         fast_seconds=5)  # fmt: skip


def _same(store: Store, start: int, end: int, *, home: bool = True, evidence: bool = True) -> None:
    """A first look at [start, end) says what a scan of every record of it says: Home's
    parts, the evidence's parts and the counters read from them."""
    want = _scan(store, start, end)
    if home:
        span_cache.clear()
        got_home = window_bucket(store, WS, start, end, only=HOME_PARTS)
        assert _without_ms(got_home, HOME_PARTS) == _without_ms(want.bucket, HOME_PARTS), start
    if not evidence:
        return
    span_cache.clear()
    got = window_counters(store, WS, load_versions(store, WS), start=start, end=end,
                          fast_seconds=5)  # fmt: skip
    assert _without_ms(dict(got.bucket), EVIDENCE_PARTS) == _without_ms(
        want.bucket, EVIDENCE_PARTS
    ), start
    mine, theirs = got.oversight, want.oversight
    assert mine.medians == {
        p: (statistics.median(s), len(s)) for p, s in theirs.seconds.items() if s
    }, start
    assert (mine.approvals, mine.too_fast) == (theirs.approvals, theirs.too_fast), start
    assert got.coverage.agents() == want.coverage.agents(), start
    a, b = got.activity, want.activity
    assert (a.checks, a.repeats, a.severity, a.amounts, a.decisions, a.verdicts) == (
        b.checks, b.repeats, b.severity, b.amounts, b.decisions, b.verdicts), start  # fmt: skip


class _Spy:
    """The aggregate rows and the ledger's ranges a look reads, and how its start edges
    went (subtracted and settled, or read forward)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows: list[tuple[str, int, int]] = []
        self.ranges: list[tuple[int, int]] = []
        self.settled: list[bool] = []
        real_rows, real_read = store.aggregate_buckets, windowed.records_between
        real_settled = getattr(windowed, "settled", None)  # (code before it had none)

        def rows(workspace: str, first: int, last: int, *, span: str = "hour") -> Any:
            self.rows.append((span, first, last))
            return real_rows(workspace, first, last, span=span)

        def read(store: Store, workspace: str, start: int, end: int) -> Any:
            self.ranges.append((start, end))
            return real_read(store, workspace, start, end)

        def settles(doubts: Any, rest: Any) -> bool:
            assert real_settled is not None
            self.settled.append(real_settled(doubts, rest))
            return self.settled[-1]

        monkeypatch.setattr(store, "aggregate_buckets", rows)
        monkeypatch.setattr(windowed, "records_between", read)
        monkeypatch.setattr(windowed, "settled", settles, raising=False)

    def hours(self) -> list[tuple[int, int]]:
        return [(a, b) for span, a, b in self.rows if span == "hour"]

    def hours_of(self, day: int) -> list[tuple[int, int]]:
        """The hour rows read of the day starting at ``day`` (ms)."""
        first, last = day // HOUR_MS, (day + DAY_MS) // HOUR_MS
        return [(a, b) for a, b in self.hours() if a < last and b > first]


def _dana_checks(store: Store, stamps: list[tuple[str, int, dict[str, Any]]]) -> None:
    for ref, ts, extra in stamps:
        rec = {"check_id": ref, "result": "allow", "agent": {"name": "cursor"}, **extra}
        store.append(WS, "check", ref, rec, ts=ts)


START = BASE + 30 * MINUTE + 7  # early in day 0
WINDOW_END = BASE + 2 * DAY_MS + 5 * HOUR_MS


def _rest(store: Store) -> None:
    """The rest of the window (after the start's day, appended after it): checks in day 1
    by the same agent, no guard, no amount."""
    _dana_checks(store, [(f"r{i}", BASE + DAY_MS + i * HOUR_MS, {}) for i in range(4)])


def test_an_end_day_a_fast_clock_stamped_after_the_end_is_read_by_hours(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dana_checks(store, [("b1", BASE + 10 * MINUTE, {}), ("e1", BASE + 40 * MINUTE, {})])
    _rest(store)
    end = BASE + 2 * DAY_MS + 2 * HOUR_MS + 30 * MINUTE
    _dana_checks(store, [("d1", end - 2 * HOUR_MS, {}), ("d2", end - 10 * MINUTE, {}),
                         ("ahead", end + 2 * MINUTE, {"result": "stop"})])  # fmt: skip
    spy = _Spy(store, monkeypatch)
    _same(store, START, end)
    # The day's row holds the entry stamped after the end: its hours are read instead.
    day = (BASE + 2 * DAY_MS) // HOUR_MS
    assert (day, day + 2) in spy.hours()
    span_cache.clear()
    assert window_bucket(store, WS, START, end, only=HOME_PARTS)["checks"] == {"allow": 7}
    # Without it, the day's row: one row, no hour of that day.
    other = BASE + 2 * DAY_MS + 20 * HOUR_MS
    spy.rows.clear()
    _same(store, START, other)
    assert not [h for h in spy.hours() if h[0] >= day]


def test_a_window_ending_late_in_a_day_reads_that_days_row(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forward, the end edge would read 21 hour rows and 40 minutes of records.
    end = BASE + 2 * DAY_MS + 21 * HOUR_MS + 40 * MINUTE
    # Up to the end (now, for a page): nothing of the end's day is stamped after it.
    _workload(store, random.Random(5), BASE - HOUR_MS, end - 5 * MINUTE, 10 * MINUTE)
    spy = _Spy(store, monkeypatch)
    start, midnight = BASE + 23 * HOUR_MS + 10 * MINUTE, end // DAY_MS * DAY_MS
    _same(store, start, end)
    assert ("day", end // DAY_MS, end // DAY_MS + 1) in spy.rows
    assert spy.hours_of(midnight) == []
    # No record of that day read, but by the scan the look is compared with.
    assert {(a, b) for a, b in spy.ranges if b > midnight} == {(start, end)}
