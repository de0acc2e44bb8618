"""A window's edges read as few rows and records as they may (issue 13, item 7: a first
look as fast at a million entries as at 10k), on SQLite and moto DynamoDB. The end edge,
from the last midnight to the window's end, is its day's row; the start edge, from the
window's start to the next midnight, is read forward or as a row less what lies before
the start (``claros.evidence.window_less``), whichever reads less. Every way gives what
feeding every record of the window to the counters gives (``scan_counters``), with a
window starting at every hour of the day, and falls back to reading forward whenever the
rest of the window does not settle what a subtraction leaves in doubt."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from pathlib import Path
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
from claros.store.sqlite import SqliteStore
from tests.store.pruning import prune_through

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


MINUTES = (0, 1, 7, 13, 29, 31, 44, 59)  # the start's minute, one per hour in turn


@pytest.mark.slow  # runs first among the tests spread one by one (tests/conftest.py)
def test_a_window_starting_at_any_hour_says_what_a_scan_says(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite: a record every 10 minutes, each hour of the day at four minutes, both
    # looks. Moto (a query costs ~10 ms there, and a look makes dozens): one record every
    # 30 minutes, each hour at one minute in turn, Home's and the evidence's look in turn.
    local = isinstance(store, SqliteStore)
    every, minutes = (10, MINUTES[::2]) if local else (30, (None,))
    _workload(store, random.Random(13), BASE - 3 * HOUR_MS, END + HOUR_MS, every * MINUTE)
    starts = [
        BASE + h * HOUR_MS + (MINUTES[h % len(MINUTES)] if m is None else m) * MINUTE + h % 3
        for h in range(24)
        for m in minutes
    ]
    # Every way of reading the start edge is among them.
    plans = {windowed._plan(s, BASE + DAY_MS) for s in starts if s % HOUR_MS}
    assert plans == {(False, False), (False, True), (True, False), (True, True)}
    spy = _Spy(store, monkeypatch)
    went: set[tuple[tuple[bool, bool], bool]] = set()
    for n, start in enumerate(starts):
        spy.settled.clear()
        _same(store, start, END, home=local or n % 2 == 0, evidence=local or n % 2 == 1)
        went.update((windowed._plan(start, BASE + DAY_MS), ok) for ok in spy.settled)
    # Each way of subtracting was taken, its doubts settled by the rest of the window
    # (the others read forward: a sum in a currency the rest holds only coarser amounts
    # of, for one).
    assert {plan for plan, ok in went if ok} == {(False, True), (True, False), (True, True)}


def test_the_edges_read_a_row_less_what_lies_before_the_start(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Early in a day: forward, the start edge would read 23 hour rows and 50 minutes of
    # records; late in a day the end edge would read 21 hour rows and 40 minutes.
    start = BASE + 10 * MINUTE + 5
    end = BASE + 2 * DAY_MS + 21 * HOUR_MS + 40 * MINUTE
    # Up to the end (now, for a page): nothing of the end's day is stamped after it.
    _workload(store, random.Random(5), BASE - HOUR_MS, end - 5 * MINUTE, 10 * MINUTE)
    want = _scan(store, start, end)
    spy = _Spy(store, monkeypatch)
    span_cache.clear()
    got = window_bucket(store, WS, start, end, only=HOME_PARTS)
    assert _without_ms(got, HOME_PARTS) == _without_ms(want.bucket, HOME_PARTS)
    # Day rows only: the start's day (less its first ten minutes), the day in between and
    # the end's day; no hour row. Records only of the minutes before the start (folded to
    # the end of its five-minute block), none of the end's day.
    day = BASE // DAY_MS
    assert sorted(spy.rows) == [("day", day + n, day + n + 1) for n in (0, 1, 2)]
    assert spy.ranges and all(BASE <= a and b <= BASE + 15 * MINUTE for a, b in spy.ranges)
    assert spy.settled == [True]
    # A look 30 s later finds everything kept: it reads no row, only the records of what
    # is left of the start's minute.
    spy.rows.clear()
    spy.ranges.clear()
    later = window_bucket(store, WS, start + 30_000, end + 30_000, only=HOME_PARTS)
    assert spy.rows == []
    assert spy.ranges == [(start + 30_000, BASE + 11 * MINUTE)]
    span_cache.clear()
    assert later == window_bucket(store, WS, start + 30_000, end + 30_000, only=HOME_PARTS)
    # An append (stamped now, in the end's day) reads that day's row again, not the rest.
    window_bucket(store, WS, start + 30_000, end + 30_000, only=HOME_PARTS)
    _dana_checks(store, [("now", end, {"result": "stop"})])
    spy.rows.clear()
    again = window_bucket(store, WS, start + 40_000, end + 40_000, only=HOME_PARTS)
    assert spy.rows == [("day", day + 2, day + 3)]
    assert again["checks"]["stop"] == got["checks"].get("stop", 0) + 1
    span_cache.clear()
    assert again == window_bucket(store, WS, start + 40_000, end + 40_000, only=HOME_PARTS)


def test_a_late_start_reads_its_last_hours_less_the_minutes_before_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _workload(store, random.Random(6), BASE + 20 * HOUR_MS, BASE + 2 * DAY_MS + 3 * HOUR_MS,
              10 * MINUTE)  # fmt: skip
    start, end = BASE + 22 * HOUR_MS + 20 * MINUTE + 9, BASE + 2 * DAY_MS + 2 * HOUR_MS
    spy = _Spy(store, monkeypatch)
    _same(store, start, end)
    # The start's hour and the one to midnight as their rows less twenty minutes.
    assert spy.settled == [True, True]
    hour = BASE // HOUR_MS
    assert (hour + 22, hour + 24) in spy.hours()
    assert not [
        (a, b) for a, b in spy.hours() if a < hour + 24 and (a, b) != (hour + 22, hour + 24)
    ]


def _dana_checks(store: Store, stamps: list[tuple[str, int, dict[str, Any]]]) -> None:
    for ref, ts, extra in stamps:
        rec = {"check_id": ref, "result": "allow", "agent": {"name": "cursor"}, **extra}
        store.append(WS, "check", ref, rec, ts=ts)


START = BASE + 20 * MINUTE + 7  # early in day 0: read as day 0's row less 21 minutes
WINDOW_END = BASE + 2 * DAY_MS + 5 * HOUR_MS


def _rest(store: Store) -> None:
    """The rest of the window (after the start's day, appended after it): checks in day 1
    by the same agent, no guard, no amount."""
    _dana_checks(store, [(f"r{i}", BASE + DAY_MS + i * HOUR_MS, {}) for i in range(4)])


def _forward_and_right(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window equals a scan; its start edge was subtracted, its doubts left
    unsettled, so it was read forward (hour rows from 01:00 to midnight). With every doubt
    taken as settled, the answer would be wrong: the check matters."""
    spy = _Spy(store, monkeypatch)
    _same(store, START, WINDOW_END)
    assert spy.settled == [False, False]
    assert ((BASE + HOUR_MS) // HOUR_MS, (BASE + DAY_MS) // HOUR_MS) in spy.hours()
    want = _scan(store, START, WINDOW_END).bucket
    parts = HOME_PARTS | EVIDENCE_PARTS
    with monkeypatch.context() as careless:
        careless.setattr(windowed, "settled", lambda doubts, rest: True)
        span_cache.clear()
        got = window_bucket(store, WS, START, WINDOW_END, only=parts)
    assert _without_ms(got, parts) != _without_ms(want, parts)


def test_a_guard_on_both_sides_of_the_start_reads_the_edge_forward(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The guard is on both sides of the start, not in the rest: the edge's share of it is
    # unknown from the rows.
    guarded = {"agent": {"name": "cursor", "via": {"guard": "both-sides"}}}
    _dana_checks(store, [("b1", BASE + 10 * MINUTE, guarded),
                         ("e1", BASE + 40 * MINUTE, guarded),
                         ("e2", BASE + 3 * HOUR_MS, {})])  # fmt: skip
    _rest(store)
    _forward_and_right(store, monkeypatch)


def test_a_stop_a_fast_clock_stamped_after_the_start_reads_the_edge_forward(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Along the chain: b1, a0 (a writer whose clock runs ahead stamps it after the start),
    # b2, b3 (before the start), a1. The day's row keeps the latest three stops, b2 b3 a1:
    # less the part before, a1 alone, and a0 is the edge's too. The rest has one stop.
    stop = {"result": "stop"}
    _dana_checks(store, [("b1", START - 3 * MINUTE, stop), ("a0", START + 1 * MINUTE, stop),
                         ("b2", START - MINUTE, stop), ("b3", START - 30_000, stop),
                         ("a1", START + 10 * MINUTE, stop),
                         ("r0", BASE + DAY_MS + HOUR_MS, stop)])  # fmt: skip
    _forward_and_right(store, monkeypatch)


def test_an_amount_finer_than_the_rest_before_the_start_reads_the_edge_forward(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def near(amount: str) -> dict[str, Any]:
        return {"result": "stop", "severity": "high", "amount": amount, "currency": "EUR"}

    # Before the start 12.50; after it 7, and 5 in the rest: the window's sum is 12, not
    # 12.00 (the day's row, 19.50, has the finer exponent of the part before).
    _dana_checks(store, [("b1", BASE + 5 * MINUTE, near("12.50")),
                         ("e1", BASE + 45 * MINUTE, near("7")),
                         ("r1", BASE + DAY_MS + HOUR_MS, near("5"))])  # fmt: skip
    _forward_and_right(store, monkeypatch)
    span_cache.clear()
    got = window_bucket(store, WS, START, WINDOW_END, only=EVIDENCE_PARTS)
    assert got["amounts"] == {"EUR": "12"}


def test_an_agent_only_an_approved_repeat_shows_after_the_start_reads_the_edge_forward(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rp = {"agent": {"name": "rp"}}
    repeat = {**rp, "approval": {"ask_id": "q"}}
    _dana_checks(store, [("b1", BASE + 5 * MINUTE, rp), ("e1", BASE + 45 * MINUTE, repeat)])
    _rest(store)
    _forward_and_right(store, monkeypatch)
    span_cache.clear()
    got = window_bucket(store, WS, START, WINDOW_END, only=EVIDENCE_PARTS)
    assert got["cov"]["rp"] == {}  # the repeat makes its agent's node, counting nothing


def test_doubts_the_rest_settles_are_subtracted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    guarded = {"agent": {"name": "cursor", "via": {"guard": "g"}}}
    _dana_checks(store, [("b1", BASE + 10 * MINUTE, guarded), ("e1", BASE + 40 * MINUTE, {}),
                         ("r1", BASE + DAY_MS + HOUR_MS, guarded)])  # fmt: skip
    spy = _Spy(store, monkeypatch)
    _same(store, START, WINDOW_END)
    assert spy.settled == [True, True] and spy.hours_of(BASE) == []


def test_a_start_day_a_prune_cut_into_is_read_forward(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dana_checks(store, [(f"p{m}", BASE + m * 7 * MINUTE, {"result": "stop"}) for m in range(9)])
    _rest(store)
    prune_through(store, tmp_path / "keys", WS, 3, ts=BASE + 3 * DAY_MS)
    spy = _Spy(store, monkeypatch)
    _same(store, START, WINDOW_END)
    assert spy.settled == []  # the day's row counts entries gone: nothing subtracted
    assert any(a <= START < b for a, b in spy.ranges)  # the start's hour read forward


def test_an_old_row_of_the_start_day_subtracts_as_today(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, waited in enumerate((3_000, 700, 12_000, 5_000)):
        store.append(WS, "approval", f"a{k}", {
            "ask_id": f"q{k}", "decision": "approve", "decided_by": "dana@acme.test",
            "opened_at": BASE + k * 20 * MINUTE - waited, "decided_at": BASE + k * 20 * MINUTE,
        }, ts=BASE + k * 20 * MINUTE)  # fmt: skip
    _rest(store)
    # Another person's answer in the rest: newer than the samples the day's row lost.
    store.append(WS, "approval", "r", {"ask_id": "qr", "decision": "deny", "decided_by": "erin",
                                       "opened_at": BASE + DAY_MS, "decided_at": BASE + DAY_MS},
                 ts=BASE + DAY_MS + 30 * MINUTE)  # fmt: skip
    # Day 0's row as a server before the bins wrote it: every wait in a list.
    ((n, bucket),) = store.aggregate_buckets(WS, BASE // DAY_MS, BASE // DAY_MS + 1, span="day")
    bucket.pop("ov_n")
    bucket.pop("ov_ms")
    bucket["ov_waits"] = {"dana@acme.test": {"approve": [3_000, 700, 12_000, 5_000]}}
    _, version = store.aggregate_version(WS, "day", n)
    assert store.put_aggregate(WS, "day", n, bucket, expect=version)
    spy = _Spy(store, monkeypatch)
    _same(store, START, WINDOW_END)  # 12,000 and 5,000 in the window: median 8.5 s
    assert spy.settled == [True, True]
    span_cache.clear()
    got = window_counters(store, WS, load_versions(store, WS), start=START, end=WINDOW_END,
                          fast_seconds=5)  # fmt: skip
    assert got.oversight.medians["dana@acme.test"] == (8.5, 2)


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


def test_a_lagging_clock_inside_the_part_before_reads_the_kept_rows_again(
    store: Store,
) -> None:
    _workload(store, random.Random(8), BASE - HOUR_MS, BASE + DAY_MS + 6 * HOUR_MS, 15 * MINUTE)
    start, end = BASE + 20 * MINUTE + 3, BASE + DAY_MS + 5 * HOUR_MS
    parts = HOME_PARTS | EVIDENCE_PARTS
    window_bucket(store, WS, start, end, only=parts)
    # What the first look kept: a look a little later reads what a fresh one does.
    later = window_bucket(store, WS, start + 30_000, end, only=parts)
    span_cache.clear()
    assert later == window_bucket(store, WS, start + 30_000, end, only=parts)
    window_bucket(store, WS, start, end, only=parts)
    # Writers whose clocks lag stamp entries inside the part subtracted: in the minutes
    # before the start, and in the day's hours before them.
    _dana_checks(store, [("lag1", start - 2 * MINUTE, {"result": "stop"}),
                         ("lag2", BASE + 5 * MINUTE, {"result": "ask"})])  # fmt: skip
    again = window_bucket(store, WS, start, end, only=parts)
    span_cache.clear()
    assert again == window_bucket(store, WS, start, end, only=parts)
    _same(store, start, end)


def test_a_window_asked_for_every_part_reads_its_start_forward(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dana_checks(store, [("b1", BASE + 10 * MINUTE, {}), ("e1", BASE + 40 * MINUTE, {})])
    _rest(store)
    spy = _Spy(store, monkeypatch)
    got = window_bucket(store, WS, START, WINDOW_END)  # seq_min and seq_max do not subtract
    assert spy.settled == []
    assert got == _scan(store, START, WINDOW_END).bucket


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
