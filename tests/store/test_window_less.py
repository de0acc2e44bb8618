"""A row less what lies before a window's start (``claros.evidence.window_less``, issue 13
item 7): what subtracts exactly, what leaves a doubt for the rest of the window to settle,
and what does not subtract at all. Pure: buckets as ``claros.aggregates.fold`` makes them.
The same on real stores, against a scan of every record: test_window_edges.py."""

from __future__ import annotations

from typing import Any

import pytest

from claros.aggregates import fold
from claros.evidence.window_less import Less, keep, minus, settled
from claros.evidence.windowed import _waits, merge


def _check(seq: int, **rec: Any) -> tuple[int, str, dict[str, Any]]:
    return seq, "check", {"check_id": f"c{seq}", "result": "allow", **rec}


def _bucket(*records: tuple[int, str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for seq, kind, rec in records:
        fold(out, seq, kind, rec)
    out.pop("seq_min")
    out.pop("seq_max")
    return out


def _stop(seq: int, agent: str = "cursor") -> tuple[int, str, dict[str, Any]]:
    return _check(seq, result="stop", agent={"name": agent})


def test_counts_subtract_and_a_count_left_at_zero_is_absent() -> None:
    before = [_check(1), _check(2, result="stop")]  # the same agent as the edge's
    edge = [_check(3), _check(4, result="ask")]
    got = minus(_bucket(*before, *edge), _bucket(*before))
    assert got is not None
    bucket, doubts = got
    want = _bucket(*edge)
    assert bucket["checks"] == want["checks"] == {"allow": 1, "ask": 1}
    assert bucket["entries"] == 2 and bucket["ov_decided"] == want["ov_decided"]
    assert "stop" not in bucket["checks"]
    assert doubts == []  # nothing the edge may or may not hold


def test_what_does_not_subtract_is_refused() -> None:
    a = _bucket(_check(1), _check(2))
    assert minus(a, _bucket(_stop(3))) is None  # b holds a count a has not
    more = _bucket(_check(1), _check(2), _check(3))
    assert minus(a, more) is None  # more of it than a holds
    with_seqs = _bucket(_check(1))
    fold(with_seqs, 2, "check", {"result": "allow"})
    assert minus(with_seqs, {}) is None  # seq_min and seq_max are never subtracted
    assert minus({"checks": {"allow": 1}}, {"checks": 1}) is None  # not the same shape
    assert minus({"checks": 1}, {"checks": {"allow": 1}}) is None
    assert minus({"checks": "1"}, {"checks": "1"}) is None  # no count


def test_answer_times_are_taken_away_by_value_and_their_bins_by_count() -> None:
    def answer(seq: int, waited: int) -> tuple[int, str, dict[str, Any]]:
        return seq, "approval", {"decision": "approve", "decided_by": "dana",
                                 "opened_at": 0, "decided_at": waited}  # fmt: skip

    before = [answer(1, 4_000), answer(2, 4_100)]
    edge = [answer(3, 4_000), answer(4, 9_000)]
    got = minus(_bucket(*before, *edge), _bucket(*before))
    assert got is not None
    bucket, _ = got
    assert bucket["ov_n"] == _bucket(*edge)["ov_n"]
    assert isinstance(bucket["ov_ms"][-1], Less)
    # The waits of the bin 4,000 and 4,100 share: one 4,000 taken away, one left.
    b = next(iter(_bucket(answer(9, 4_000))["ov_n"]["dana"]["approve"]))
    assert _waits(bucket["ov_ms"], "dana", int(b)) == [4_000]
    gathered: dict[str, Any] = {}
    merge(gathered, bucket, gather=True)  # a window's sum keeps the part to take away
    assert _waits(gathered["ov_ms"], "dana", int(b)) == [4_000]
    # Every answer before the start: no bin left, nothing in ov_n.
    only_before = minus(_bucket(*before), _bucket(*before))
    assert only_before is not None and "ov_n" not in only_before[0]


def test_a_guard_both_sides_have_is_a_doubt_one_only_the_row_has_is_the_edges() -> None:
    def via(seq: int, guard: str) -> tuple[int, str, dict[str, Any]]:
        return _check(seq, agent={"name": "cursor", "via": {"guard": guard}})

    got = minus(_bucket(via(1, "g1"), via(2, "g2")), _bucket(via(1, "g1")))
    assert got is not None
    bucket, doubts = got
    assert bucket["cov"]["cursor"]["guards"] == ["g2"]
    assert ("guard", ("cov", "cursor"), "g1") in doubts
    assert settled(doubts, {"cov": {"cursor": {"guards": ["g1"]}}, "people": {
        "": {"cursor": {"guards": ["g1"]}}}})  # fmt: skip
    assert not settled(doubts, {"cov": {"cursor": {"checked": 4}}})
    assert minus(_bucket(via(1, "g1")), _bucket(via(2, "g9"))) is None  # not a part of it


def test_a_node_left_empty_is_a_doubt() -> None:
    repeat = _check(2, approval={"ask_id": "q"}, agent={"name": "rp"})  # counts nothing
    got = minus(_bucket(_check(1, agent={"name": "rp"}), repeat),
                _bucket(_check(1, agent={"name": "rp"})))  # fmt: skip
    assert got is not None
    bucket, doubts = got
    assert "rp" not in bucket.get("cov", {}) and ("node", ("cov", "rp")) in doubts
    # Settled by a rest that has the node (as any other check of the agent makes it).
    rest = _bucket(_check(7, agent={"name": "rp"}))
    assert settled(doubts, rest)
    assert not settled(doubts, _bucket(_check(7, agent={"name": "other"})))


def test_a_full_sample_list_that_lost_items_needs_newer_ones_in_the_rest() -> None:
    before = [_stop(1), _stop(2), _stop(3)]
    got = minus(_bucket(*before, _stop(4)), _bucket(*before))
    assert got is not None
    bucket, doubts = got
    assert [s["seq"] for s in bucket["s_stops"]] == [4]
    # The row kept 2, 3, 4: an edge stop older than 2 would be unknown.
    assert ("tail", ("s_stops",), keep("s_stops"), 2, 1) in doubts
    newer = {"s_stops": [{"seq": 7}, {"seq": 9}, {"seq": 1}]}
    assert settled([d for d in doubts if d[0] == "tail" and d[1] == ("s_stops",)], newer)
    assert not settled(doubts, {"s_stops": [{"seq": 9}, {"seq": 1}]})
    # Not full: every item of the edge is in the row, nothing unknown.
    small = minus(_bucket(_stop(1), _stop(4)), _bucket(_stop(1)))
    assert small is not None and not [d for d in small[1] if d[0] == "tail"]
    # Flagged items per agent keep five.
    assert keep("items") == 5 and keep("s_near") == 3


@pytest.mark.parametrize(
    ("row", "before", "left", "doubt"),
    [
        (["12.50", "7"], ["7"], "12.50", False),  # the finest amount is the edge's
        (["12.50", "7"], ["12.50"], "7.00", True),  # the row's exponent may be the part's
        (["3", "4"], ["3"], "4", True),
        (["3", "-3", "2"], ["2"], None, True),  # the edge adds up to 0: maybe none at all
        (["1.5", "-1.50", "2"], ["2"], "0.00", False),
    ],
)
def test_decimal_sums_subtract_and_an_exponent_the_part_may_have_set_is_a_doubt(
    row: list[str], before: list[str], left: str | None, doubt: bool
) -> None:
    def near(seq: int, amount: str) -> tuple[int, str, dict[str, Any]]:
        return _check(seq, result="stop", severity="high", amount=amount, currency="EUR")

    a = _bucket(*(near(i, x) for i, x in enumerate(row)))
    b = _bucket(*(near(i, x) for i, x in enumerate(before)))
    got = minus(a, b)
    assert got is not None
    bucket, doubts = got
    assert bucket.get("amounts", {}).get("EUR") == left
    decs = [d for d in doubts if d[0] == "dec" and d[1] == ("amounts", "EUR")]
    assert bool(decs) is doubt
    if doubt:
        finest = decs[0][2]
        assert settled(decs, {"amounts": {"EUR": "1" + ("." + "0" * -finest if finest else "")}})
        assert not settled(decs, {"amounts": {"EUR": "1E+1"}})
        assert not settled(decs, {"amounts": {"USD": "1.000"}})
        assert not settled(decs, {"amounts": {"EUR": "NaN"}})


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "1" * 25, "pear"])
def test_a_sum_that_is_not_exact_is_not_subtracted(bad: str) -> None:
    a = {"amounts": {"EUR": bad}}
    assert minus(a, {"amounts": {"EUR": "1"}}) is None
    assert minus({"amounts": {"EUR": "1"}}, {"amounts": {"EUR": bad}}) is None
    assert minus(a, {}) == (a, [])  # nothing before in that currency: the row's sum


def test_what_the_part_before_does_not_touch_is_the_rows_as_it_is() -> None:
    a = _bucket(_check(1, agent={"name": "cursor"}), _stop(2, "codex"))
    got = minus(a, {})
    assert got == (a, [])
    assert got is not None and got[0]["cov"] is a["cov"]  # shared, not copied
