"""The guard's pure parts, alone: classification, records and rows, needs (and their
cache), the check policy against a fake Claros, identity, forwarded params."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from claros_guard.api import Report, is_need
from claros_guard.classify import Classifier, by_name, words, write_worded
from claros_guard.errors import (
    ClarosRefusedError,
    ClarosUnavailableError,
    NotAReadError,
    ReadFailedError,
)
from claros_guard.identity import agent_name
from claros_guard.keepalive import encoded
from claros_guard.needs import (
    LookupCache,
    NeedResolver,
    canonical_arguments,
    fresh_for,
    with_fresh_for,
)
from claros_guard.policy import Call, Policy, outcome_of
from claros_guard.queries import filter_rows, reduce_rows
from claros_guard.records import error_report, record_of, rows_of
from claros_guard.transport import UpstreamSpec
from claros_guard.upstream import Upstream, forward_params, without_tasks

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("get_order", True),
        ("listInvoices", True),
        ("search-files", True),
        ("read", True),
        ("invoice_read", True),
        ("order.list", True),
        ("customer_info", True),
        ("cancel_order_list", False),
        ("invoice_submit", False),
        ("refund_create", False),
        ("orders", False),
        ("", False),
        ("set_status", False),
        ("getOrder", True),
        ("get_or_delete_user", False),
        ("get_or_create_customer", False),
        ("refund_list", True),
    ],
)
def test_read_by_name(name: str, read: bool) -> None:
    assert by_name(name) is read


def test_the_command_line_decides_first_then_the_hint_then_the_name() -> None:
    # The operator's word beats the server's annotation (it used to be the other way).
    classify = Classifier.of(reads=["sync_orders", "delete_x"], writes=["get_token"])
    assert classify.is_read("delete_x", {"readOnlyHint": False}) is True
    assert classify.is_read("get_token", {"readOnlyHint": True}) is False
    assert classify.is_read("sync_orders") is True and classify.is_read("get_token") is False
    assert classify.is_read("list_things") is True and classify.is_read("frobnicate") is False
    assert classify.is_read("frobnicate", {"readOnlyHint": True}) is True
    assert classify.is_read("get_things", {"readOnlyHint": False}) is False
    assert classify.why("get_token") == "--write"
    assert classify.why("frobnicate", {"readOnlyHint": True}) == "readOnlyHint is true"
    assert "write word" in classify.why("get_or_delete_x", {"readOnlyHint": True})
    assert words("getOrderHTTP-v2.final") == ["get", "order", "http", "v2", "final"]


@pytest.mark.parametrize(
    ("name", "worded"),
    [
        ("refund_list", False),  # one read of refunds
        ("get_refund", False),
        ("order_read", False),
        ("get_commit", False),
        ("refund_order", True),  # refund as the verb
        ("issue_refund", True),
        ("get_or_refund_order", True),
        ("refund_and_list", True),
        ("get_or_delete_user", True),
        ("mark_as_read", True),
        ("run_query", True),
        ("echo", False),
    ],
)
def test_write_words(name: str, worded: bool) -> None:
    assert write_worded(name) is worded


def test_a_tool_listed_as_both_a_read_and_a_write_is_refused() -> None:
    with pytest.raises(ValueError, match="refund_list is listed both"):
        Classifier.of(reads=["refund_list"], writes=["refund_list"])


def result(
    value: Any = None, *, text: list[str] | None = None, error: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": t} for t in text or []]}
    if value is not None:
        out["structuredContent"] = value
    if error:
        out["isError"] = True
    return out


def test_records_and_rows_come_from_structured_content_or_json_text() -> None:
    assert record_of(result({"id": 1}), "t") == {"id": 1}
    assert record_of(result({"result": {"id": 1}}), "t") == {"id": 1}  # the SDK's wrapping
    assert record_of(result(text=['{"id": 2}']), "t") == {"id": 2}
    assert record_of(result(text=['[{"id": 3}]']), "t") == {"id": 3}
    assert rows_of(result({"result": [1, 2]}), "t") == [1, 2]
    assert rows_of(result({"total": 2, "items": [1, 2]}), "t") == [1, 2]
    assert rows_of(result({"page": 1, "hits": [5]}), "t") == [5]
    assert rows_of(result(text=['{"a": 1}', '{"a": 2}']), "t") == [{"a": 1}, {"a": 2}]
    with pytest.raises(ReadFailedError, match="t failed: no such order"):
        record_of(result(text=["no such order"], error=True), "t")
    with pytest.raises(ReadFailedError, match="text that is not JSON"):
        record_of(result(text=["Order 7: 20 EUR"]), "t")
    with pytest.raises(ReadFailedError, match="did not return a record"):
        record_of(result([1, 2]), "t")
    assert record_of(result({"result": [{"id": 4}]}), "t") == {"id": 4}
    # The SDK's wrapping of plain text, a number, a list or null is no record.
    for wrapped, what in (("Order 7: 20 EUR", "plain text ('Order 7: 20 EUR')"),
                          (3, "int 3"), ([1, 2], "a list of 2"), (None, "null")):  # fmt: skip
        with pytest.raises(ReadFailedError, match=re.escape(f"but {what}; an answer that is")):
            record_of(result({"result": wrapped}), "t")
    with pytest.raises(ReadFailedError, match="did not return rows"):
        rows_of(result({"a": 1}), "t")
    with pytest.raises(ReadFailedError, match="neither structuredContent nor text"):
        rows_of(result(), "t")
    # One text block: a wrapper of the rows is read as one (its other members say only
    # something of pages, totals or errors) ...
    wrapped = '{"refunds": [{"id": 1}], "next_cursor": null, "Total_Count": 1, "page": 1}'
    assert rows_of(result(text=[wrapped]), "t") == [{"id": 1}]
    # ... but an object with fields of its own may be one row, whose own list it holds.
    row = '{"id": "r1", "customer": "C-7", "lines": [{"sku": "A"}]}'
    with pytest.raises(ReadFailedError, match="only list is 'lines': one row"):
        rows_of(result(text=[row]), "t")
    # The same object as structured content, or in two blocks, is read as before.
    assert rows_of(result({"page": 1, "hits": [5], "shop": "x"}), "t") == [5]
    assert rows_of(result(text=[row, row]), "t") == [json.loads(row)] * 2


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"error": "no invoice inv-9"}, 'error: "no invoice inv-9"'),
        ({"Detail": "Not found."}, 'Detail: "Not found."'),
        ({"found": False}, "found: false"),
        ({"success": False, "message": "nope"}, "success: false"),
        ({"errors": ["x"], "code": "E1"}, 'errors: ["x"]'),
        ({"status": "404", "title": "Not Found", "type": "about:blank"}, "status: 404"),
        ({"status_code": 500, "message": "boom"}, "status_code: 500"),
        ({"data": None, "errors": [{"message": "x"}]}, 'errors: [{"message": "x"}]'),
    ],
)
def test_a_body_that_reports_an_error_is_no_record(body: dict[str, Any], said: str) -> None:
    assert error_report(body) == said


@pytest.mark.parametrize(
    "body",
    [
        {"name": "INV-9", "error": "none", "grand_total": 5},  # a field no report has
        {"code": "W-1", "status": "active", "title": "Widget", "type": "goods"},
        {"ok": True, "message": "done"},
        {"error": None, "status": 200},
        {"found": True, "detail": ""},
        {"data": {"id": 1}, "errors": ["partial"]},  # data: a record, not only a report
        {},
    ],
)
def test_a_record_is_no_error_report(body: dict[str, Any]) -> None:
    assert error_report(body) is None


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"items": [1, 2], "next_cursor": "c2"}, 'next_cursor: "c2"'),
        ({"data": [1], "nextPageToken": "t"}, 'nextPageToken: "t"'),
        ({"results": [1], "next": "https://app/x?page=2"}, "next: "),
        ({"rows": [1], "has_more": True}, "has_more: true"),
        ({"refunds": [1, 2], "total_count": 3}, "total_count: 3"),
        ({"items": [1], "count": 9}, "count: 9"),
        ({"items": [1], "pagination": {"Has-More": True}}, "pagination.Has-More: true"),
        ({"edges": [1], "pageInfo": {"hasNextPage": True}}, "pageInfo.hasNextPage: true"),
    ],
)
def test_a_page_of_rows_is_not_the_rows(answer: dict[str, Any], said: str) -> None:
    with pytest.raises(
        ReadFailedError, match=r"a page of rows .*more rows follow \(" + re.escape(said)
    ):
        rows_of(result(answer), "t")


@pytest.mark.parametrize(
    "answer",
    [
        {"items": [1, 2], "next_cursor": None, "has_more": False, "count": 2},
        {"invoices": [1, 2], "total": 90000},  # a sum of money, not a number of rows
        {"items": [], "next": "", "pageInfo": {"hasNextPage": False}},
        {"items": [1], "meta": {"total_count": 1}},
    ],
)
def test_every_row_in_one_answer_is_the_rows(answer: dict[str, Any]) -> None:
    rows = next(v for v in answer.values() if isinstance(v, list))
    assert rows_of(result(answer), "t") == rows


class Reader:
    def __init__(self, answers: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
        self.answers = answers
        self.reads: list[tuple[str | None, str, dict[str, Any]]] = []
        self.kinds: list[str] = []

    async def read(
        self, app: str | None, tool: str, arguments: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        self.reads.append((app, tool, arguments))
        self.kinds.append(kind)
        if tool not in self.answers:
            raise NotAReadError(f"{tool} is not a read")
        return self.answers[tool](arguments)


async def test_needs_reduce_rows_here_and_cache_lookups_per_value_for_60_s() -> None:
    now = [1000.0]
    reader = Reader(
        {
            "item_read": lambda a: result({"code": a["code"], "group": "Raw"}),
            "refund_list": lambda a: result(
                {
                    "result": [
                        {"c": "C-7", "amount": 5},
                        {"c": "C-9", "amount": 50},
                        {"c": "C-7", "amount": 20},
                    ]
                }
            ),
        }
    )
    resolver = NeedResolver(reader, clock=lambda: now[0])
    needs = [
        {
            "key": 'lookups[0]:"A"',
            "kind": "lookup",
            "tool": "item_read",
            "arguments": {"code": "A"},
        },
        {
            "key": "queries[0]",
            "kind": "query",
            "tool": "refund_list",
            "arguments": {},
            "where": {"c": "C-7"},
            "op": "max",
            "field": "amount",
        },
        {
            "key": "queries[1]",
            "kind": "query",
            "tool": "refund_list",
            "arguments": {},
            "app": "shop",
            "where": {"amount": {"gt": 10}},
            "op": "count",
        },
    ]
    answers = await resolver.resolve(needs)
    assert answers == {
        'lookups[0]:"A"': {"code": "A", "group": "Raw"},
        "queries[0]": 20,
        "queries[1]": 2,
    }
    assert reader.reads[-1][0] == "shop"
    await resolver.resolve(needs[:1])
    now[0] += 59
    await resolver.resolve(needs[:1])
    assert [r[1] for r in reader.reads].count("item_read") == 1  # cached
    now[0] += 2
    await resolver.resolve(needs[:1])
    assert [r[1] for r in reader.reads].count("item_read") == 2  # expired after 60 s
    with pytest.raises(NotAReadError, match="order_delete is not a read"):
        await resolver.resolve(
            [{"key": "fetch", "kind": "fetch", "tool": "order_delete", "arguments": {}}]
        )
    with pytest.raises(ReadFailedError, match="'sql' read"):
        await resolver.resolve([{"key": "x", "kind": "sql", "tool": "t", "arguments": {}}])


ROWS: list[Any] = [
    {"id": 1, "amount": "120.50", "on": "2026-01-03"},
    {"id": 2},  # missing the field
    {"id": 3, "amount": 7, "on": "2026-02-01"},
    {"id": 4, "amount": "n/a", "on": None},  # not a number
    {"id": 5, "amount": {"value": 1}},  # an object: neither min nor max
    "not a row",
]


@pytest.mark.parametrize(
    ("op", "field", "rows", "expected"),
    [
        ("count", None, ROWS, 6),
        ("count", "amount", [], 0),
        ("first", "amount", ROWS, "120.50"),
        ("first", "amount", [{"id": 0}, *ROWS], "120.50"),  # rows missing it are skipped
        ("last", "amount", ROWS, {"value": 1}),
        ("last", "on", ROWS, "2026-02-01"),
        ("min", "amount", ROWS, 7),  # "120.50" is a number; "n/a" and objects are not
        ("max", "amount", ROWS, "n/a"),  # text comes after every number
        ("max", "amount", ROWS[:4], "n/a"),
        ("max", "amount", [{"amount": "120.50"}, {"amount": 7}], "120.50"),
        ("min", "on", ROWS, "2026-01-03"),  # ISO dates compare as text
        ("max", "on", ROWS, "2026-02-01"),
        ("min", "amount", [{"amount": True}, {"amount": 3}], 3),  # a bool is not a number
        ("max", "amount", [{"amount": "NaN"}, {"amount": 5}], "NaN"),  # NaN is text here
        ("min", "amount", [{"amount": float("nan")}, {"amount": 5}], 5),
        ("max", "amount", [{"amount": "-Infinity"}, {"amount": -5}], "-Infinity"),
        ("min", "a.b", [{"a": {"b": 2}}, {"a": {"b": 1}}, {"a": 3}], 1),
        ("min", "amount", [{"amount": {"x": 1}}, {"amount": [1]}], None),
        ("first", "amount", [], None),
        ("last", "amount", [{"id": 1}], None),
        ("min", "amount", [], None),
        ("max", "amount", [{"id": 1}, "x"], None),
    ],
)
def test_reductions(op: str, field: str | None, rows: list[Any], expected: Any) -> None:
    assert reduce_rows(rows, op, field) == expected


def test_reductions_refuse_an_unknown_op_or_a_missing_field() -> None:
    with pytest.raises(ValueError, match="unknown op 'avg'"):
        reduce_rows([], "avg", "amount")  # refused even when there is nothing to reduce
    for op in ("first", "last", "min", "max"):
        with pytest.raises(ValueError, match=f"op {op} needs a field"):
            reduce_rows(ROWS, op, None)


def test_where_with_nan_does_not_raise() -> None:
    rows = [{"a": "NaN"}, {"a": 2}, {"a": float("nan")}]
    assert filter_rows(rows, {"a": {"gt": 1}}) == [{"a": 2}]
    assert filter_rows(rows, {"a": "NaN"}) == [{"a": "NaN"}]


async def test_a_query_reduces_rows_missing_the_field_to_null() -> None:
    reader = Reader({"refund_list": lambda a: result({"result": [{"c": "C-7"}]})})
    need = {
        "key": "queries[0]",
        "kind": "query",
        "tool": "refund_list",
        "arguments": {},
        "op": "min",
        "field": "amount",
    }
    assert await NeedResolver(reader).resolve([need]) == {"queries[0]": None}


def test_the_lookup_cache_expires_and_stays_bounded() -> None:
    now = [0.0]
    cache = LookupCache(ttl=60, limit=3, clock=lambda: now[0])
    cache.put(("a",), 1)
    now[0] = 59.9
    assert cache.get(("a",)) == 1
    now[0] = 60.0
    assert cache.get(("a",)) is None and len(cache) == 0  # dropped once expired
    cache.put(("b",), 2)  # until 120
    now[0] = 130.0
    cache.put(("c",), 3)
    cache.put(("d",), 4)
    cache.put(("e",), 5)  # full: the expired b goes first
    assert cache.get(("b",)) is None and cache.get(("c",)) == 3 and len(cache) == 3
    cache.put(("f",), 6)  # full of fresh values: all go, memory stays bounded
    assert len(cache) == 1 and cache.get(("f",)) == 6
    assert canonical_arguments({"b": 1, "a": [2]}) == canonical_arguments({"a": [2], "b": 1})


async def test_the_reader_is_told_each_needs_kind() -> None:
    reader = Reader(
        {
            "order_read": lambda a: result({"id": a["id"]}),
            "refund_list": lambda a: result([]),
        }
    )
    await NeedResolver(reader).resolve(
        [
            {"key": "fetch", "kind": "fetch", "tool": "order_read", "arguments": {"id": 1}},
            {"key": "l", "kind": "lookup", "tool": "order_read", "arguments": {"id": 2}},
            {"key": "q", "kind": "query", "tool": "refund_list", "arguments": {}, "op": "count"},
        ]
    )
    kinds = {(r[1], r[2].get("id"), k) for r, k in zip(reader.reads, reader.kinds, strict=True)}
    assert kinds == {
        ("order_read", 1, "fetch"),
        ("order_read", 2, "lookup"),
        ("refund_list", None, "query"),
    }


async def test_a_need_for_a_non_read_wins_over_an_earlier_failed_read() -> None:
    def down(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ReadFailedError("order_read timed out")

    resolver = NeedResolver(Reader({"order_read": down}))
    needs = [
        {"key": "fetch", "kind": "fetch", "tool": "order_read", "arguments": {}},
        {"key": "l", "kind": "lookup", "tool": "order_delete", "arguments": {}},
    ]
    with pytest.raises(NotAReadError, match="order_delete is not a read"):
        await resolver.resolve(needs)
    with pytest.raises(ReadFailedError, match="timed out"):
        await resolver.resolve(needs[:1])


class FakeClaros:
    """Answers checks from a script; records what the guard sent."""

    def __init__(self, answers: list[dict[str, Any] | Exception]) -> None:
        self.answers = answers
        self.checks: list[dict[str, Any]] = []
        self.asks: dict[str, list[str]] = {}
        self.reports: list[Report] = []

    async def check(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.checks.append(dict(body))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def ask(self, ask_id: str) -> dict[str, Any]:
        statuses = self.asks[ask_id]
        return {
            "ask_id": ask_id,
            "status": statuses.pop(0) if len(statuses) > 1 else statuses[0],
            "decided_by": "admin@example.com",
        }

    async def send_report(self, report: Report) -> None:
        self.reports.append(report)

    async def register_tools(self, app: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
        return {}


CALL = Call("shop", "refund_create", {"order": "1187", "amount": 150}, {"name": "claude-code"})
ASK = {
    "result": "ask",
    "check_id": "chk_1",
    "messages": [{"rule_id": "half", "message": "Half."}],
    "ask": {"ask_id": "ask_1", "routed_to": ["dana@example.com"], "expires_at": 9e12},
}


def policy(claros: FakeClaros, **kw: Any) -> Policy:
    reader = Reader({"order_read": lambda a: result({"id": a["id"], "total": 200})})
    return Policy(claros, NeedResolver(reader), poll_interval=0.01, **kw)


async def test_a_check_answers_its_needs_and_decides() -> None:
    claros = FakeClaros(
        [
            {
                "allowed": False,
                "result": "need",
                "need": [
                    {
                        "key": "fetch",
                        "kind": "fetch",
                        "tool": "order_read",
                        "arguments": {"id": "1187"},
                    }
                ],
            },
            {
                "result": "nudge",
                "check_id": "chk_2",
                "messages": [{"rule_id": "n", "message": "Note."}],
            },
        ]
    )
    verdict = await policy(claros).decide(CALL)
    assert verdict.forward and verdict.result == "nudge" and verdict.notes == ["Claros (n): Note."]
    assert claros.checks[1]["fetched"] == {"fetch": {"id": "1187", "total": 200}}


class EncodingClaros(FakeClaros):
    """Encodes each check as the guard sends it (no NaN), as the real client does."""

    async def check(self, body: Mapping[str, Any]) -> dict[str, Any]:
        encoded(body)
        return await super().check(body)


async def test_a_query_value_json_cannot_carry_is_a_failed_read() -> None:
    need = {"key": "queries[0]", "kind": "query", "tool": "refund_list", "arguments": {},
            "where": {}, "op": "max", "field": "amount"}  # fmt: skip
    reader = Reader({"refund_list": lambda a: result({"result": [{"amount": float("nan")}]})})
    for fail_open in (False, True):
        claros = EncodingClaros([{"allowed": False, "need": [need]}])
        resolver = NeedResolver(reader)
        verdict = await Policy(claros, resolver, fail_open=fail_open).decide(CALL)
        assert verdict.forward is fail_open
        said = str(verdict.unchecked if fail_open else verdict.message)
        assert "queries[0] is nan, which is no number JSON can carry" in said, said


async def test_a_spec_shaped_need_without_result_is_a_need() -> None:
    need = [{"key": "fetch", "kind": "fetch", "tool": "order_read", "arguments": {"id": "1187"}}]
    claros = FakeClaros(
        [{"allowed": False, "need": need}, {"result": "allow", "check_id": "chk_7"}]
    )
    verdict = await policy(claros).decide(CALL)
    assert verdict.forward and verdict.check_id == "chk_7"
    assert claros.checks[1]["fetched"] == {"fetch": {"id": "1187", "total": 200}}
    assert is_need({"allowed": False, "need": need})
    assert is_need({"result": "need", "need": need})
    assert not is_need({"allowed": False, "need": []})
    assert not is_need({"allowed": True, "need": need})
    assert not is_need({"allowed": False, "need": "fetch"})
    assert not is_need({"result": "stop", "allowed": False})


async def test_a_need_naming_a_non_read_blocks_even_with_fail_open() -> None:
    need = [{"key": "fetch", "kind": "fetch", "tool": "order_delete", "arguments": {}}]
    for fail_open in (False, True):
        claros = FakeClaros([{"allowed": False, "need": need}])
        verdict = await policy(claros, fail_open=fail_open).decide(CALL)
        assert not verdict.forward and verdict.result == "error"
        assert verdict.unchecked is None and "order_delete is not a read" in str(verdict.message)
        assert claros.reports == []


async def test_stop_blocks_and_failures_block_unless_fail_open() -> None:
    stop = {"result": "stop", "check_id": "chk_3", "messages": [{"rule_id": "s", "message": "No."}]}
    verdict = await policy(FakeClaros([stop])).decide(CALL)
    assert not verdict.forward and verdict.message is not None
    assert verdict.message.startswith("Blocked by Claros rule s: No. The call was not run")
    down = ClarosUnavailableError("cannot reach Claros")
    assert not (await policy(FakeClaros([down])).decide(CALL)).forward
    opened = await policy(FakeClaros([down]), fail_open=True).decide(CALL)
    assert opened.forward and opened.unchecked == "cannot reach Claros"
    refused = ClarosRefusedError(401, "bad key")
    closed = await policy(FakeClaros([refused]), fail_open=True).decide(CALL)
    assert not closed.forward and "(401): bad key" in str(closed.message)


async def test_an_ask_waits_reports_progress_and_uses_the_approval() -> None:
    claros = FakeClaros([ASK, {"result": "allow", "check_id": "chk_4"}])
    claros.asks["ask_1"] = ["open", "open", "approved"]
    progress: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    verdict = await policy(claros, ask_wait=5).decide(CALL, on_progress)
    assert verdict.forward and verdict.check_id == "chk_4"
    assert claros.checks[1]["approval"] == "ask_1"
    assert progress[0] == "Waiting for dana@example.com to approve (Claros ask ask_1)"


async def test_an_open_ask_is_remembered_and_a_denial_explained() -> None:
    claros = FakeClaros([ASK])
    claros.asks["ask_1"] = ["open"]
    guard = policy(claros, ask_wait=0.05)
    first = await guard.decide(CALL)
    assert not first.forward and "Claros asked dana@example.com to approve" in str(first.message)
    claros.asks["ask_1"] = ["denied"]
    second = await guard.decide(CALL)  # no second check: the same question
    assert len(claros.checks) == 1
    assert "Not approved: admin@example.com denied this call (rule half: Half)" in str(
        second.message
    )
    assert guard.export_asks() == {}


async def test_reports_after_a_call() -> None:
    claros = FakeClaros([{"result": "allow", "check_id": "chk_5"}])
    guard = policy(claros)
    verdict = await guard.decide(CALL)
    report = guard.report_for(CALL, verdict, *outcome_of(result(text=["Refund R-9 created"])))
    assert report == Report(
        "/v1/check/chk_5/outcome",
        {"status": "ok", "summary": "Refund R-9 created"},
        "outcome-chk_5",
    )
    assert outcome_of(None, "cancelled") == ("error", "cancelled")
    assert outcome_of(result(text=["boom"], error=True)) == ("error", "boom")
    # A write let through unchecked: a fresh Idempotency-Key, kept for every resend; a
    # status not known yet is left out of the body.
    down = ClarosUnavailableError("cannot reach Claros")
    opened = await policy(FakeClaros([down]), fail_open=True).decide(CALL)
    later = guard.report_for(CALL, opened, None, "allowed unchecked")
    assert later is not None and later.route == "/v1/unchecked" and len(later.key) == 32
    assert "status" not in later.body and later.body["reason"] == "cannot reach Claros"
    ended = later.with_outcome("error", "exit 1")
    assert (ended.key, ended.body["status"], ended.body["summary"]) == (
        later.key,
        "error",
        "exit 1",
    )
    assert guard.report_for(CALL, await policy(FakeClaros([down])).decide(CALL), "ok", "") is None


@pytest.mark.parametrize(
    ("client_name", "recorded"),
    [
        # The spec's fixed names, from what these clients send as clientInfo.name.
        ("claude-code", "claude-code"),
        ("Claude Code", "claude-code"),
        ("claude_code", "claude-code"),
        ("cursor-vscode", "cursor"),
        ("Cursor", "cursor"),
        ("codex-mcp-client", "codex"),
        ("Codex", "codex"),
        ("playwright-mcp", "playwright"),
        ("browser-use", "browser-use"),
        ("BrowserUse", "browser-use"),
        # Every other client: its own name, exactly as given.
        ("claude-ai", "claude-ai"),
        ("Visual Studio Code", "Visual Studio Code"),
        ("windsurf-client", "windsurf-client"),
        ("continue-dev", "continue-dev"),
        ("my-continue-bot", "my-continue-bot"),
        ("my-cursor-tool", "my-cursor-tool"),
        ("codexify", "codexify"),
        ("My Agent <3>", "My Agent <3>"),
        ("  spaced  ", "  spaced  "),
    ],
)
def test_agent_names_are_the_specs_or_the_clients_own(client_name: str, recorded: str) -> None:
    assert agent_name({"name": client_name, "version": "1.0"}) == recorded


def test_agent_names_without_a_usable_name_and_forwarded_params() -> None:
    assert agent_name(None) == "unknown-mcp-client"
    assert agent_name({"name": ""}) == "unknown-mcp-client"
    assert agent_name({"name": "   "}) == "unknown-mcp-client"
    assert agent_name({"name": 7}) == "unknown-mcp-client"
    # Claros refuses an agent.name over 128 characters (and so every write): cut, not lost.
    assert agent_name({"name": "x" * 300}) == "x" * 128
    params = {
        "name": "t",
        "_meta": {"progressToken": 7, "io.modelcontextprotocol/clientInfo": {}, "vendor/x": 1},
    }
    assert forward_params(params) == {"name": "t", "_meta": {"vendor/x": 1}}
    assert forward_params({"_meta": {"progressToken": 1}}) == {}


def test_initialize_loses_the_tasks_capability_and_nothing_else() -> None:
    hello = {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {}, "roots": {}}}
    assert without_tasks(hello) == {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}}}
    assert hello["capabilities"] == {"tasks": {}, "roots": {}}  # a copy: the caller's is kept
    assert without_tasks({"capabilities": None}) == {"capabilities": None}
    assert without_tasks({}) == {}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "params", "words"),
    [
        ("tasks/result", {"taskId": "t-1"}, "tasks/result refused: the guard relays only"),
        ("tasks/get", {"taskId": "t-1"}, "tasks/get refused"),
        ("Elicitation/Create", {}, "Elicitation/Create refused"),
        ("elicitation/create", {"message": "m", "task": {}}, "asked as a task"),
        ("sampling/createMessage", {"task": {"ttl": 1}}, "asked as a task"),
    ],
)
async def test_the_server_asks_the_agent_only_what_mcp_lets_it(
    method: str, params: dict[str, Any], words: str
) -> None:
    asked: list[str] = []

    async def agent(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        asked.append(method)
        return {}

    upstream = Upstream("shop", UpstreamSpec(command="unused"))
    upstream.request_agent = agent
    with pytest.raises(MCPError) as refused:
        await upstream._on_request(None, method, params)  # type: ignore[arg-type]
    assert words in refused.value.message
    assert asked == []
    assert await upstream._on_request(None, "roots/list", {}) == {}  # type: ignore[arg-type]
    assert asked == ["roots/list"]


Progress = Callable[[float, float | None, str | None], Awaitable[None]]


def test_a_lookup_says_how_long_it_stays_fresh_and_is_kept_no_longer() -> None:
    now = [0.0]
    cache = LookupCache(ttl=60, clock=lambda: now[0])
    cache.put(("a",), 1, 10)
    cache.put(("b",), 2, 600)  # never more than the cache's own ttl
    cache.put(("c",), 3, 0)  # stale already: not kept
    assert cache.entry(("a",)) == (1, 10) and cache.entry(("b",)) == (2, 60)
    assert cache.get(("c",)) is None
    now[0] = 10
    assert cache.get(("a",)) is None and cache.get(("b",)) == 2
    said = with_fresh_for({"content": [], "_meta": {"other": 1}}, 12.5)
    assert said["_meta"] == {"other": 1, "claros/fresh_for": 12.5}
    assert fresh_for(said, 60) == 12.5
    for meta in (None, {}, {"claros/fresh_for": True}, {"claros/fresh_for": "5"},
                 {"claros/fresh_for": float("nan")}):  # fmt: skip
        assert fresh_for({"_meta": meta}, 60) == 60
    assert fresh_for({"_meta": {"claros/fresh_for": 999}}, 60) == 60
    assert fresh_for({"_meta": {"claros/fresh_for": -3}}, 60) == 0
