"""Store methods for Activity (list_checks, count_checks): on SQLite and DynamoDB (moto).

Every query is compared with ``check_matches`` over all rows, the one definition both
stores implement; pages are walked by their cursor, and a page never reads more check
records than its scan limit.
"""

from __future__ import annotations

from typing import Any

import pytest

from claros.store.base import CheckQuery, NewRecord, Store, check_matches
from claros.store.dynamo import RECORD_SPREAD, DynamoStore

WS = "acme"
T0 = 1_780_000_000_000  # a fixed instant: tests never depend on today's date
APPS = ("shop", "books")
TOOLS = ("refund_create", "invoice_submit", "order_cancel")
AGENTS = ("claude-code", "cursor")
PEOPLE = ("dana@example.com", "eli@example.com", None)
RESULTS = ("allow", "stop", "ask", "nudge")


def _id(ms: int, n: int) -> str:
    return f"chk_{ms:012x}{n:04x}{n:012x}"


def _row(n: int) -> dict[str, Any]:
    ts = T0 + n * 60_000
    row: dict[str, Any] = {
        "check_id": _id(ts, n),
        "workspace": WS,
        "ts": ts,
        "app": APPS[n % 2],
        "tool": TOOLS[n % 3],
        "arguments": {"order": f"ORD-{n:03d}", "note": "Refund for Dana" if n % 5 == 0 else ""},
        "agent": {"name": AGENTS[n % 2], "model": "m1"},
        "on_behalf_of": PEOPLE[n % 3],
        "result": RESULTS[n % 4],
        "rules": [{"id": "refund-half", "version": 1}] if n % 4 else [],
    }
    if n % 7 == 0:
        row["rules"] = [*row["rules"], {"id": "big-order", "version": 2}]
    return row


N = 40
ROWS = [_row(n) for n in range(N)]
# Outcomes for some checks: ok for n % 3 == 0, error for n % 3 == 1 (and n even).
OUTCOMES = {
    r["check_id"]: {"check_id": r["check_id"], "status": "ok" if n % 3 == 0 else "error"}
    for n, r in enumerate(ROWS)
    if n % 3 == 0 or n % 2 == 0
}


@pytest.fixture
def filled(store: Store) -> Store:
    # Interleave other kinds, and another workspace, which listings never return.
    for n, row in enumerate(ROWS):
        records = [NewRecord("check", row["check_id"], row)]
        if row["check_id"] in OUTCOMES:
            records.append(NewRecord("outcome", row["check_id"], OUTCOMES[row["check_id"]]))
        store.append_many(WS, records, ts=row["ts"])
        if n % 10 == 0:
            store.append(WS, "approval", f"ask_{n}", {"n": n})
            store.append("other", "check", row["check_id"], {**row, "workspace": "other"})
    return store


def _slack(store: Store) -> int:
    """DynamoDB spreads a workspace's checks over partitions and reads at least one item
    of each in a round, so a call may read one more check per partition than its limit."""
    return RECORD_SPREAD + 1 if isinstance(store, DynamoStore) else 0


def _expected(query: CheckQuery, before: str | None = None) -> list[str]:
    ids = [
        r["check_id"]
        for r in ROWS
        if check_matches(query, r, OUTCOMES.get(r["check_id"]))
        and (before is None or r["check_id"] < before)
    ]
    return sorted(ids, reverse=True)


def _walk(store: Store, query: CheckQuery, *, limit: int, scan_limit: int) -> list[str]:
    got: list[str] = []
    before = None
    for _ in range(200):
        page = store.list_checks(WS, query, before=before, limit=limit, scan_limit=scan_limit)
        assert len(page.rows) <= limit
        assert page.scanned <= scan_limit + _slack(store)
        got += [row["check_id"] for row, _ in page.rows]
        if page.next is None:
            return got
        before = page.next
    raise AssertionError("the cursor never ended")


QUERIES = [
    CheckQuery(),
    CheckQuery(app="shop"),
    CheckQuery(tool="refund_create", result="stop"),
    CheckQuery(agent="cursor"),
    CheckQuery(person="dana@example.com"),
    CheckQuery(result="ask"),
    CheckQuery(rule_id="big-order"),
    CheckQuery(outcome="ok"),
    CheckQuery(outcome="error"),
    CheckQuery(outcome="none"),
    CheckQuery(since=T0 + 10 * 60_000, until=T0 + 20 * 60_000),
    CheckQuery(text="refund for dana"),
    CheckQuery(text="ORD-01"),
    CheckQuery(app="books", outcome="ok", rule_id="refund-half"),
    CheckQuery(app="nowhere"),
]


@pytest.mark.parametrize("query", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_listing_is_newest_first_and_matches_the_filter(filled: Store, query: CheckQuery) -> None:
    assert _walk(filled, query, limit=7, scan_limit=1000) == _expected(query)


def test_a_page_reads_no_more_than_its_scan_limit_and_the_cursor_goes_on(filled: Store) -> None:
    query = CheckQuery(rule_id="big-order")  # 6 of 40 rows
    page = filled.list_checks(WS, query, limit=50, scan_limit=10)
    # DynamoDB spreads a workspace's checks over partitions and reads each in a round.
    assert page.scanned <= 10 + _slack(filled)
    assert page.next is not None  # older checks remain: the caller continues below next
    assert _walk(filled, query, limit=50, scan_limit=10) == _expected(query)


def test_rows_come_with_their_outcome(filled: Store) -> None:
    page = filled.list_checks(WS, CheckQuery(), limit=N)
    for row, outcome in page.rows:
        assert outcome == OUTCOMES.get(row["check_id"])
    assert page.next is None or page.rows  # 40 rows, limit 40


def test_before_continues_strictly_below_the_cursor(filled: Store) -> None:
    middle = ROWS[20]["check_id"]
    page = filled.list_checks(WS, CheckQuery(), before=middle, limit=5)
    assert [r["check_id"] for r, _ in page.rows] == _expected(CheckQuery(), middle)[:5]


def test_other_workspaces_and_kinds_never_show(filled: Store) -> None:
    rows = filled.list_checks(WS, CheckQuery(), limit=100).rows
    assert len(rows) == N
    assert {r["workspace"] for r, _ in rows} == {WS}
    assert filled.list_checks("nobody", CheckQuery(), limit=10).rows == []


def test_counts_per_result(filled: Store) -> None:
    query = CheckQuery(app="shop")
    counts = filled.count_checks(WS, query)
    want: dict[str, int] = {}
    for r in ROWS:
        if check_matches(query, r, OUTCOMES.get(r["check_id"])):
            want[r["result"]] = want.get(r["result"], 0) + 1
    assert counts.by_result == want
    assert counts.complete is True
    assert counts.scanned == N


def test_counts_with_the_outcome_filter(filled: Store) -> None:
    query = CheckQuery(outcome="none")
    counts = filled.count_checks(WS, query)
    assert sum(counts.by_result.values()) == len(_expected(query))


def test_counts_stop_at_their_limit_and_say_so(filled: Store) -> None:
    counts = filled.count_checks(WS, CheckQuery(), scan_limit=25)
    assert counts.complete is False
    counted = sum(counts.by_result.values())
    if isinstance(filled, DynamoStore):
        # A round's reads below the partitions' common point are left for the next call:
        # what is counted is exactly the newest checks, fewer than were read.
        assert 0 < counted <= counts.scanned <= 25 + _slack(filled)
    else:
        assert counts.scanned == counted == 25
    newest = sorted(ROWS, key=lambda r: r["check_id"], reverse=True)[:counted]
    want: dict[str, int] = {}
    for r in newest:
        want[r["result"]] = want.get(r["result"], 0) + 1
    assert counts.by_result == want
    # Exactly all of them: complete.
    # (DynamoDB: a limit that lets one round read every partition to its end.)
    enough = 10 * N if isinstance(filled, DynamoStore) else N
    exact = filled.count_checks(WS, CheckQuery(), scan_limit=enough)
    assert exact.complete is True and sum(exact.by_result.values()) == N


def test_a_time_range_is_a_key_range(filled: Store) -> None:
    # Only the checks of the range are read, however many lie outside it.
    query = CheckQuery(since=T0 + 30 * 60_000)
    page = filled.list_checks(WS, query, limit=100)
    assert [r["check_id"] for r, _ in page.rows] == _expected(query)
    assert page.scanned == 10
    counts = filled.count_checks(WS, CheckQuery(until=T0 + 5 * 60_000))
    assert counts.scanned <= 5 + 1 and sum(counts.by_result.values()) == 5


def test_an_empty_workspace(store: Store) -> None:
    page = store.list_checks(WS, CheckQuery(), limit=10)
    assert page.rows == [] and page.next is None and page.scanned == 0
    counts = store.count_checks(WS, CheckQuery())
    assert counts.by_result == {} and counts.complete is True


def test_record_entry_is_the_entry_that_wrote_the_record(filled: Store) -> None:
    row = ROWS[3]
    entry = filled.record_entry(WS, "check", row["check_id"])
    assert entry is not None
    assert (entry.kind, entry.ref_id, entry.ts) == ("check", row["check_id"], row["ts"])
    assert list(filled.entries(WS, since=entry.seq - 1, limit=1)) == [entry]
    outcome = filled.record_entry(WS, "outcome", row["check_id"])
    assert outcome is not None and outcome.seq == entry.seq + 1
    assert filled.record_entry(WS, "check", "chk_nope") is None
    assert filled.record_entry("other", "check", ROWS[1]["check_id"]) is None
