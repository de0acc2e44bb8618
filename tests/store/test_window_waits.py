"""A window's answer times (issue 13, item 7: pages as fast at 1M entries as at 10k), on
SQLite and moto DynamoDB: counted by bin with their exact ms as text per bin, the counts
added through a window's sum and the texts gathered, and the median, approvals and
too-fast counts (which split only the bin or two holding the rank or the threshold) are
exactly what feeding every record of the window to the counters gives; a row written
before the bins (every wait in a list) reads the same, and an append converts it."""

from __future__ import annotations

import random
import statistics

import pytest

from claros.aggregates import DAY_MS, HOUR_MS, add_wait, upgrade, wait_bin
from claros.evidence import span_cache
from claros.evidence.activity import load_versions
from claros.evidence.windowed import (
    _ints,
    merge,
    scan_counters,
    window_bucket,
    window_counters,
)
from claros.store.base import Store

MANY = 288  # answers over three days: many to a bin, as a busy quarter has

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


@pytest.mark.slow  # runs first among the tests spread one by one (tests/conftest.py)
def test_many_answer_times_over_days_and_edges_give_the_exact_median(store: Store) -> None:
    rng = random.Random(7)
    i = 0
    # Three whole days with many answers, ties, waits under a second, on a bin's edge and
    # negative ones (a clock behind), then an edge hour with a few. Stamps rise along the
    # chain, as writers' clocks make them.
    stamps = sorted(BASE + rng.randrange(3 * DAY_MS) for _ in range(MANY))
    for ts in stamps:
        i += 1
        waited = rng.choice((500, 4_000, 4_000, 8_192, 0, rng.randrange(-2_000, 120_000)))
        _approval(store, i, ts, waited, rng.choice(("approve", "deny")), rng.choice(PEOPLE))
    for k in range(5):
        i += 1
        _approval(store, i, BASE + 3 * DAY_MS + k * 60_000 + 30, 9_000 + k, "approve", PEOPLE[0])
    start, end = BASE + 5 * HOUR_MS + 1234, BASE + 3 * DAY_MS + 10 * 60_000
    for fast in (0, 1, 4, 5, 8, 30, 200):  # 4 and 8: thresholds on a bin's edge
        mine, theirs = _answers(store, start, end, fast)
        assert mine == theirs
    # A window's counts are bounded by the bins, however many answers; every wait is kept.
    got = window_bucket(store, WS, start, end)
    bins = [b for decisions in got["ov_n"].values() for c in decisions.values() for b in c]
    assert len(bins) < 4 * 40
    answers = sum(n for decisions in got["ov_n"].values() for c in decisions.values()
                  for n in c.values())  # fmt: skip
    assert answers == sum(n for _, n in mine[2].values())  # type: ignore[attr-defined]
    # The look that finds the sum kept says the same.
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


def test_bins_rise_with_the_wait_and_hold_few_widths() -> None:
    waits = [-(10**9), -5, -1, 0, 1, 2, 3, *range(4, 5000), 65_535, 65_536, 10**9, 10**12]
    bins = [wait_bin(ms) for ms in waits]
    assert bins == sorted(bins)
    assert {wait_bin(ms) for ms in range(-3, 0)} == {-1}
    # Two bins per power of two: 1 s to 90 s, a busy quarter's waits, in a dozen or so.
    assert len({wait_bin(ms) for ms in range(1_000, 90_000)}) <= 14


def test_an_old_row_of_waits_in_a_list_reads_and_folds_as_today(store: Store) -> None:
    old = {"ov_waits": {"dana": {"approve": [4_000, 300, 4_000], "deny": [-20]}}}
    new: dict[str, object] = {}
    for decision, waits in (("approve", (4_000, 300, 4_000)), ("deny", (-20,))):
        for ms in waits:
            add_wait(new, "dana", decision, ms)
    assert upgrade(dict(old)) == new
    # Summing buckets (a day from its hours) joins the texts by bin: the same waits.
    day: dict[str, object] = {}
    merge(day, upgrade(dict(old)))
    merge(day, upgrade(dict(old)))
    texts = day["ov_ms"]["dana"]["approve"]  # type: ignore[index]
    assert sorted(int(ms) for t in texts.values() for ms in t.split(",")) == sorted(
        [4_000, 300, 4_000] * 2
    )
    assert day["ov_n"]["dana"]["approve"] == {  # type: ignore[index]
        str(wait_bin(4_000)): 4,
        str(wait_bin(300)): 2,
    }


def test_a_row_written_before_the_bins_gives_the_same_answers(store: Store) -> None:
    for k, waited in enumerate((3_000, 700, 12_000, 5_000)):
        _approval(store, k, BASE + HOUR_MS + k * 60_000, waited, "approve", PEOPLE[0])
    start, end = BASE, BASE + 2 * DAY_MS
    before = _answers(store, start, end, 5)
    assert before[0] == before[1]
    # The same rows as an older server wrote them: every wait in a list.
    for span, first, last in (("hour", 0, 10**7), ("day", 0, 10**6)):
        for n, bucket in store.aggregate_buckets(WS, first, last, span=span):
            waits: dict[str, dict[str, list[int]]] = {}
            for person, decisions in bucket.pop("ov_ms").items():
                for decision, texts in decisions.items():
                    waits.setdefault(person, {})[decision] = [
                        int(ms) for t in texts.values() for ms in t.split(",")
                    ]
            bucket.pop("ov_n")
            bucket["ov_waits"] = waits
            _put_bucket(store, span, n, bucket)
    assert "ov_waits" in store.aggregate_buckets(WS, 0, 10**7)[0][1]
    assert _answers(store, start, end, 5) == before
    # An append into the old hour converts it.
    _approval(store, 9, BASE + HOUR_MS + 30 * 60_000, 1_500, "deny", PEOPLE[0])
    hour = dict(store.aggregate_buckets(WS, 0, 10**7))[(BASE + HOUR_MS) // HOUR_MS]
    assert "ov_waits" not in hour and hour["ov_n"][PEOPLE[0]]["deny"] == {str(wait_bin(1_500)): 1}
    mine, theirs = _answers(store, start, end, 5)
    assert mine == theirs


def _put_bucket(store: Store, span: str, n: int, bucket: dict[str, object]) -> None:
    """Overwrite one aggregate row as an older server would have written it."""
    _, version = store.aggregate_version(WS, span, n)
    assert store.put_aggregate(WS, span, n, bucket, expect=version)


def test_a_bins_text_reads_as_its_integers_whatever_their_size() -> None:
    assert _ints("4000,4210,-7,0") == [4000, 4210, -7, 0]
    # orjson reads integers beyond 64 bits as floats: such a text is read by int().
    huge = [2**64, -(2**63) - 1, 2**70 + 1, 5]
    for text in (",".join(map(str, huge)), f"{2**64}", f"-{2**63 + 1},3"):
        got = _ints(text)
        assert got == [int(x) for x in text.split(",")]
        assert all(type(x) is int for x in got)
    assert _ints(str(2**64 - 1)) == [2**64 - 1]
    with pytest.raises(ValueError):
        _ints("4000,,1")  # not a bin's text: refused as int() refuses it
