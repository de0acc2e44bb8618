"""A window's answer times (issue 13, item 7: pages as fast at 1M entries as at 10k), on
SQLite and moto DynamoDB: they stay sorted through a window's sum, the few of its edges
put in at their place and the many of its days merged as runs, and the median, approvals
and too-fast counts found by bisection are exactly what feeding every record of the
window to the counters gives, whichever path each merge takes."""

from __future__ import annotations

import random
import statistics

import pytest

from claros.aggregates import DAY_MS, HOUR_MS
from claros.evidence import span_cache
from claros.evidence.activity import load_versions
from claros.evidence.windowed import (
    _INSERTS,
    _merge_waits,
    _nth,
    scan_counters,
    window_bucket,
    window_counters,
)
from claros.store.base import Store

WS = "acme"
BASE = 20_000 * DAY_MS  # a fixed instant: tests never depend on today's date
PEOPLE = ("dana@acme.test", "erin@acme.test")


def _approval(store: Store, i: int, ts: int, waited: int, decision: str, person: str) -> None:
    store.append(WS, "approval", f"a{i}", {
        "ask_id": f"q{i}", "decision": decision, "decided_by": person, "authority": "owner",
        "opened_at": ts - waited, "decided_at": ts,
    }, ts=ts)  # fmt: skip


def _answers(store: Store, start: int, end: int, fast: int) -> tuple[object, object]:
    versions = load_versions(store, WS)
    span_cache.clear()
    got = window_counters(store, WS, versions, start=start, end=end, fast_seconds=fast)
    want = scan_counters(store, WS, versions, start=start, end=end, fast_seconds=fast)
    mine = (got.oversight.approvals, got.oversight.too_fast, got.oversight.medians)
    seconds = want.oversight.seconds
    theirs = (
        want.oversight.approvals,
        want.oversight.too_fast,
        {p: (statistics.median(s), len(s)) for p, s in seconds.items() if s},
    )
    return mine, theirs


def test_many_answer_times_over_days_and_edges_give_the_exact_median(store: Store) -> None:
    rng = random.Random(7)
    i = 0
    # Three whole days with many answers (more than are put in one by one), ties, waits
    # under a second and a negative one (a clock behind), then an edge hour with a few.
    # Stamps rise along the chain, as writers' clocks make them.
    stamps = sorted(BASE + rng.randrange(3 * DAY_MS) for _ in range(9 * _INSERTS))
    for ts in stamps:
        i += 1
        waited = rng.choice((500, 4_000, 4_000, rng.randrange(-2_000, 120_000)))
        _approval(store, i, ts, waited, rng.choice(("approve", "deny")), rng.choice(PEOPLE))
    for k in range(5):
        i += 1
        _approval(store, i, BASE + 3 * DAY_MS + k * 60_000 + 30, 9_000 + k, "approve", PEOPLE[0])
    start, end = BASE + 5 * HOUR_MS + 1234, BASE + 3 * DAY_MS + 10 * 60_000
    for fast in (1, 5, 30):
        mine, theirs = _answers(store, start, end, fast)
        assert mine == theirs
    # The sum comes sorted, and the look that finds it kept says the same.
    waits = window_bucket(store, WS, start, end)["ov_waits"]
    for decisions in waits.values():
        for waited in decisions.values():
            assert waited == sorted(waited)
    assert _answers(store, start, end, 5) == _answers(store, start, end, 5)


def test_one_answer_and_an_even_count_of_them(store: Store) -> None:
    _approval(store, 1, BASE + 2 * HOUR_MS, 3_000, "approve", PEOPLE[0])
    start, end = BASE, BASE + DAY_MS
    mine, theirs = _answers(store, start, end, 5)
    assert mine == theirs
    _approval(store, 2, BASE + 3 * HOUR_MS, 6_000, "deny", PEOPLE[0])
    mine, theirs = _answers(store, start, end, 5)
    assert mine == theirs
    assert mine[2] == {PEOPLE[0]: (4.5, 2)}  # type: ignore[index]


@pytest.mark.parametrize("sizes", [(0, 5), (5, 0), (3, 200), (200, 3), (100, 100)])
def test_merging_sorted_waits_keeps_them_sorted_and_copies_what_is_kept(
    sizes: tuple[int, int],
) -> None:
    rng = random.Random(sum(sizes))
    have = sorted(rng.randrange(-50, 500) for _ in range(sizes[0]))
    more = sorted(rng.randrange(-50, 500) for _ in range(sizes[1]))
    into: dict[str, dict[str, list[int]]] = {"p": {"approve": list(have)}} if have else {}
    kept = list(more)
    _merge_waits(into, {"p": {"approve": more}})
    assert into["p"]["approve"] == sorted(have + more)
    assert more == kept  # the other side (maybe a kept sum) is never changed
    assert into["p"]["approve"] is not more


def test_the_nth_of_sorted_runs_is_the_nth_of_them_all() -> None:
    rng = random.Random(3)
    for _ in range(200):
        runs = [
            sorted(rng.randrange(-1_000, 1_000) for _ in range(rng.randrange(1, 40)))
            for _ in range(rng.randrange(1, 4))
        ]
        every = sorted(ms for run in runs for ms in run)
        for k in (0, len(every) // 2, len(every) - 1, rng.randrange(len(every))):
            assert _nth(runs, k) == every[k]
