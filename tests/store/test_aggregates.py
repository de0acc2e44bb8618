"""The hourly aggregates and the verified-through state (issue 13), on SQLite and moto
DynamoDB: what the store keeps with each append, and that a window counted from it is
exactly what feeding every record of the window to the counters gives."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from claros import jsonutil
from claros.aggregates import HOUR_MS, RECORD_SAMPLES, is_reference, sample_of
from claros.config import Settings
from claros.evidence.aiuc1 import aiuc1_pack
from claros.evidence.oversight import oversight
from claros.evidence.verified import advance, verified_report, verify_now
from claros.evidence.verify import verify_workspace
from claros.evidence.windowed import window_bucket
from claros.signing import FileSigner
from claros.store.base import NewRecord, Store
from claros.wiring import Services
from tests.api.seed import NOV_1, WS, install_clock, seed_october

DAY = 86_400_000


def _normal(value: Any) -> Any:
    """As the API answers it (JSON), so Decimal and float spellings compare alike."""
    return jsonutil.loads(jsonutil.dumps(value))


def test_append_folds_records_into_their_hour(store: Store) -> None:
    base = 500 * HOUR_MS
    store.append(
        WS,
        "check",
        "a",
        {
            "result": "stop",
            "severity": "high",
            "amount": "12.50",
            "currency": "EUR",
            "agent": {"name": "cc"},
        },
        ts=base + 5,
    )
    store.append_many(
        WS,
        [
            NewRecord("check", "b", {"result": "allow", "agent": {"name": "cc"}}),
            NewRecord(
                "check", "c", {"result": "stop", "severity": "high", "amount": 7, "currency": "EUR"}
            ),
        ],
        ts=base + 10,
    )
    store.append(
        WS,
        "approval",
        "q",
        {"decision": "approve", "decided_by": "dana", "opened_at": 1, "decided_at": 4001},
        ts=base + HOUR_MS,
    )
    days = store.aggregate_buckets(WS, 0, 10**6, span="day")
    assert [d for d, _ in days] == [500 // 24] and days[0][1]["entries"] == 4
    buckets = store.aggregate_buckets(WS, 500, 502)
    assert [h for h, _ in buckets] == [500, 501]
    first = buckets[0][1]
    assert first["checks"] == {"stop": 2, "allow": 1}
    assert first["amounts"] == {"EUR": "19.50"}
    assert (first["seq_min"], first["seq_max"], first["entries"]) == (1, 3, 3)
    # The wait counted under its bin (two per power of two), its exact ms kept as text.
    assert buckets[1][1]["ov_n"] == {"dana": {"approve": {"25": 1}}}
    assert buckets[1][1]["ov_ms"] == {"dana": {"approve": {"25": "4000"}}}
    assert store.aggregate_buckets(WS, 501, 501) == []
    assert store.aggregate_buckets("other", 0, 10**9) == []


def test_verified_state_is_saved_on_condition(store: Store) -> None:
    assert store.verified_state(WS) is None
    assert store.save_verified_state(WS, {"seq": 3, "hash": "h"}, expect_seq=1) is False
    assert store.save_verified_state(WS, {"seq": 3, "hash": "h"}, expect_seq=None) is True
    assert store.save_verified_state(WS, {"seq": 4}, expect_seq=None) is False
    assert store.save_verified_state(WS, {"seq": 9, "x": [1]}, expect_seq=3) is True
    assert store.verified_state(WS) == {"seq": 9, "x": [1]}
    assert store.verified_state("other") is None


def _mixed(store: Store, rng: random.Random, start: int, n: int) -> None:
    """Checks of every result (repeats, near-misses in several currencies, rule refs),
    approvals, overrides, outcomes and unchecked writes, over 40 days, a little out of
    order as writers with skewed clocks stamp them (within the scan's CLOCK_SKEW_MS)."""
    agents = [
        {"name": "claude-code", "via": {"guard": "claros-guard"}},
        {"name": "cursor"},
        {"name": None},
        {},
    ]
    for i in range(n):
        ts = start + i * (40 * DAY // n) + rng.randrange(-120_000, 120_000)
        kind = rng.choice(["check"] * 6 + ["approval", "override", "outcome", "unchecked"])
        result = rng.choice(["allow", "nudge", "ask", "stop"])
        refs = [
            {
                "id": rng.choice(["refund-half", "refund-huge", "payout-stop"]),
                "version": 1,
                "matched": rng.random() < 0.7,
                **({"answered": "ask"} if rng.random() < 0.2 else {}),
            }
        ]
        if kind == "check":
            rec: dict[str, Any] = {
                "check_id": f"x{i}",
                "ts": ts,
                "app": rng.choice(["shop", "bank"]),
                "tool": rng.choice(["refund_create", "payout"]),
                "result": result,
                "agent": rng.choice(agents),
                "rules": refs,
                "on_behalf_of": rng.choice(["dana@acme.test", None]),
                "obo_source": rng.choice(["key", None]),
            }
            if result != "allow" and rng.random() < 0.8:
                rec["severity"] = {"stop": "high", "ask": "medium", "nudge": "low"}[result]
                rec["amount"] = rng.choice(["12.30", 5, "1e3", "nonsense", None])
                rec["currency"] = rng.choice(["EUR", "USD", None])
            if rng.random() < 0.1:
                rec["approval"] = {"ask_id": f"q{i}"}
        elif kind == "approval":
            opened = ts - rng.randrange(0, 60_000)
            rec = {
                "ask_id": f"q{i}",
                "decision": rng.choice(["approve", "deny", "expired"]),
                "decided_by": rng.choice(["dana@acme.test", "erin@acme.test", None]),
                "authority": "owner",
                "opened_at": opened,
                "decided_at": ts,
            }
        elif kind == "override":
            rec = {
                "override_id": f"o{i}",
                "check_id": f"x{i}",
                "verdict": rng.choice(["wrong_stop", "missed", "right_stop"]),
                "rule_id": "payout-stop",
                "check_result": rng.choice(["stop", "ask"]),
                "check_rules": refs,
            }
        elif kind == "outcome":
            rec = {
                "check_id": f"x{i}",
                "status": "ok",
                "agent": rng.choice(["cursor", None]),
                "check_result": result,
                "key_id": "k1",
            }
        else:
            rec = {"agent": rng.choice(agents), "key_id": "k1"}
        store.append(WS, kind, f"{kind}-{i}", rec, ts=ts)


@pytest.mark.slow  # runs first among the tests spread one by one (tests/conftest.py)
@pytest.mark.parametrize("days", [1, 31, 90])
def test_aggregates_say_what_a_full_scan_says(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days: int
) -> None:
    clock = install_clock(monkeypatch)
    services = Services(
        Settings(data_dir=tmp_path / "data", checkpoint_every=7),
        store,
        FileSigner(tmp_path / "data"),
    )
    seed_october(services, clock)
    # After the seeded October (and its check of Nov 5): the ledger's stamps keep rising.
    _mixed(store, random.Random(days), NOV_1 + 5 * DAY, 220)
    # A window that starts and ends inside hours (partial hours at both edges).
    now = NOV_1 + 45 * DAY + 17 * 60_000 + 123
    for fast in (10, 30):
        got = aiuc1_pack(store, WS, days=days, fast_seconds=fast, now=now)
        want = aiuc1_pack(store, WS, days=days, fast_seconds=fast, now=now, scan=True)
        assert _normal(got) == _normal(want)
        got_o = oversight(store, WS, days=days, fast_seconds=fast, now=now)
        want_o = oversight(store, WS, days=days, fast_seconds=fast, now=now, scan=True)
        assert _normal(got_o) == _normal(want_o)
    # October as tests/api/test_evidence_reports.py computes it by hand: c1..c10.
    pack = _normal(aiuc1_pack(store, WS, days=31, fast_seconds=10, now=NOV_1))
    assert pack["controls"]["D003"]["holds"]["checks_by_result"] == {
        "allow": 3,
        "nudge": 1,
        "ask": 3,
        "stop": 3,
    }


def _as_written_before(store: Store, span: str, start: int) -> dict[str, Any]:
    """Rewrite a bucket as rows were written before the record samples were kept by seq:
    each reference replaced by the full sample, built from its record as fold built it."""
    bucket, version = store.aggregate_version(WS, span, start)
    assert bucket is not None
    records = {e.seq: r for e, r in store.entries_with_records(WS) if r is not None}
    for key in RECORD_SAMPLES:
        if key in bucket:
            assert all(is_reference(s) for s in bucket[key])
            bucket[key] = [sample_of(key, s["seq"], records[s["seq"]]) for s in bucket[key]]
    assert store.put_aggregate(WS, span, start, bucket, expect=version)
    return bucket


def test_rows_with_full_samples_of_before_are_read_and_converted(store: Store) -> None:
    """Buckets written before the samples of checks with rules (and of stops) were kept as
    references hold the samples themselves: a window reads them (the pack equals a full
    scan), and an append into such a row keeps references from then on."""
    base = 600 * HOUR_MS
    rules = [{"id": "r1", "version": 2, "hash": "cd" * 32, "matched": True,
              "confirm": {"made_by": "manual", "confirmed_by": "dana@acme.test"}}]  # fmt: skip
    for i in range(8):
        rec = {"check_id": f"c{i}", "ts": base + i, "app": "shop", "tool": "refund_create",
               "result": ("stop", "allow")[i % 2], "agent": {"name": "cc"}, "rules": rules,
               "on_behalf_of": "dana@acme.test"}  # fmt: skip
        store.append(WS, "check", f"c{i}", rec, ts=base + i * 60_000)
    old_hour = _as_written_before(store, "hour", base // HOUR_MS)
    _as_written_before(store, "day", base // DAY)
    assert len(old_hour["s_with_rules"]) == 3 and old_hour["s_with_rules"][0]["rules"] == rules
    now = base + 3 * DAY  # the hour and its day wholly inside the window
    got = aiuc1_pack(store, WS, days=5, fast_seconds=10, now=now)
    want = aiuc1_pack(store, WS, days=5, fast_seconds=10, now=now, scan=True)
    assert _normal(got) == _normal(want)
    assert [s["check_id"] for s in got["controls"]["E004"]["samples"]["checks_with_rules"]] == [
        "c5", "c6", "c7"
    ]  # fmt: skip
    assert window_bucket(store, WS, base, now)["s_stops"] == [{"seq": 3}, {"seq": 5}, {"seq": 7}]
    # An append into the old row: references only, from the row's samples on.
    store.append(WS, "check", "c8", {"result": "stop", "rules": rules}, ts=base + 30 * 60_000)
    for span, n in (("hour", base // HOUR_MS), ("day", base // DAY)):
        bucket, _ = store.aggregate_version(WS, span, n)
        assert bucket is not None
        assert bucket["s_with_rules"] == [{"seq": 7}, {"seq": 8}, {"seq": 9}]
        assert bucket["s_stops"] == [{"seq": 5}, {"seq": 7}, {"seq": 9}]


def test_a_sample_whose_record_is_gone_is_left_out(store: Store) -> None:
    """A reference whose record is not in the ledger (removed behind Claros's back: verify
    names it) gives no sample rather than a wrong one."""
    from claros.evidence.aiuc1 import _built

    store.append(WS, "check", "c0", {"check_id": "c0", "result": "stop", "rules": [{"id": "r"}]})
    store.append(WS, "outcome", "c0", {"check_id": "c0", "status": "ok"})
    kept = [{"seq": 1}, {"seq": 2}, {"seq": 7}, {"seq": 1, "check_id": "old", "rules": []}]
    got = _built(store, WS, "s_stops", kept)
    assert [s.get("check_id") for s in got] == ["c0", "old"]
    assert got[0]["rules"] == [{"id": "r"}]


def test_a_window_inside_one_hour_and_an_empty_one(store: Store) -> None:
    base = 900 * HOUR_MS
    for i in range(5):
        store.append(WS, "check", f"c{i}", {"result": "allow"}, ts=base + i * 1000)
    assert window_bucket(store, WS, base + 1500, base + 3500)["checks"] == {"allow": 2}
    assert window_bucket(store, WS, base - 10 * HOUR_MS, base - HOUR_MS) == {}
    assert window_bucket(store, WS, base - HOUR_MS, base + 2 * HOUR_MS)["checks"] == {"allow": 5}


def _sign_head(services: Services) -> None:
    from claros.checkpoints import sign_checkpoint

    head = services.store.head(WS)
    assert head is not None
    sign_checkpoint(services.store, services.signer, head)


def test_verified_state_advances_a_segment_at_a_time(store: Store, tmp_path: Path) -> None:
    services = Services(Settings(data_dir=tmp_path / "data"), store, FileSigner(tmp_path / "d"))
    assert advance(store, WS) is None  # nothing written yet
    for i in range(12):
        store.append(WS, "check", f"c{i}", {"result": "allow", "n": i})
    first = advance(store, WS)
    assert first is not None and first["seq"] == 12 and first["full_at"] is not None
    assert first["failures"] == [] and first["segments"] == 1
    for i in range(12, 20):
        store.append(WS, "check", f"c{i}", {"result": "allow", "n": i})
    _sign_head(services)  # signing a checkpoint verifies the new segment
    state = store.verified_state(WS)
    assert state is not None and state["seq"] == 20 and state["segments"] == 2
    assert state["full_at"] == first["full_at"]  # no full verify in between
    assert _normal(verified_report(store, WS).to_json()) == _normal(
        verify_workspace(store, WS).to_json()
    )
    again = verify_now(store, WS)
    assert again["seq"] == 20 and again["segments"] == 1 and again["entries"] == 20


def test_a_segment_whose_anchor_changed_is_verified_in_full(store: Store) -> None:
    for i in range(4):
        store.append(WS, "check", f"c{i}", {"result": "allow"})
    state = advance(store, WS)
    assert state is not None
    # The state names a hash the entry at its seq does not have (as if rewritten).
    assert store.save_verified_state(WS, {**state, "hash": "0" * 64}, expect_seq=4)
    store.append(WS, "check", "c9", {"result": "allow"})
    after = advance(store, WS)
    assert after is not None and after["seq"] == 5 and after["entries"] == 5
    assert after["segments"] == 1  # started afresh from a full verify


def test_a_broken_segment_is_a_failure_that_stays(tmp_path: Path) -> None:
    import sqlite3

    from claros.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "c.db")
    for i in range(3):
        store.append(WS, "check", f"c{i}", {"result": "allow"})
    advance(store, WS)
    store.append(WS, "check", "c3", {"result": "stop"})
    conn = sqlite3.connect(tmp_path / "c.db")
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute("UPDATE records SET body = '{\"result\":\"allow\"}' WHERE ref_id = 'c3'")
    conn.commit()
    conn.close()
    report = verified_report(store, WS)
    assert not report.ok and "c3 edited" in report.failures[0].problem
    store.append(WS, "check", "c4", {"result": "allow"})
    assert not verified_report(store, WS).ok  # until the whole chain verifies again
    assert not verify_now(store, WS)["failures"] == []
    store.close()
