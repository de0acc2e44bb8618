"""The agent tries to get a write past the guard by the shape of its messages: a
``tools/call`` whose name is not a string or is missing, arguments that are not an
object, batches, a request id still in flight, a method in another case, requests without
a usable id (so they read as notifications), unknown methods, params that are not an
object, lines too long to read. Each is answered with a JSON-RPC error naming what was
refused and why, never reaches the wrapped server, and the guard keeps serving.

The wrapped server (``servers/raw_upstream.py``) takes anything, whatever its case or
shape, and logs every line it receives; Claros notes every check (``CheckLog``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.guard import conftest as guard_fixtures
from tests.guard.conftest import Workspace
from tests.security.raw_guard import CheckLog, RawGuard

REFUSED = "Refused by the Claros guard"
INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, PARSE_ERROR = -32600, -32601, -32602, -32700
# Every method and notification name an MCP client may send, spelled as the spec does.
MCP_METHODS = frozenset(
    """
    initialize ping tools/list tools/call resources/list resources/templates/list
    resources/read resources/subscribe resources/unsubscribe prompts/list prompts/get
    completion/complete logging/setLevel server/discover subscriptions/listen
    notifications/initialized notifications/cancelled notifications/progress
    notifications/roots/list_changed
    """.split()
)
claros = guard_fixtures.claros  # the guard tests' fixtures: one Claros, a workspace
workspace = guard_fixtures.workspace
READ = "order_read"  # readOnlyHint: true at the wrapped server: the one classified read


@pytest.fixture
def check_log(workspace: Workspace) -> Iterator[CheckLog]:
    with CheckLog(workspace.claros.url) as log:
        yield log


@pytest.fixture
def guard(workspace: Workspace, check_log: CheckLog, tmp_path: Path) -> Iterator[RawGuard]:
    with RawGuard(workspace, check_log.url, tmp_path) as raw:
        raw.initialize()
        yield raw


def refusal(answer: dict[str, Any], code: int, *words: str) -> str:
    """The answer is a JSON-RPC error from the guard with ``code``, naming ``words``."""
    assert "error" in answer, f"not refused: {answer}"
    error = answer["error"]
    message = str(error.get("message"))
    assert error.get("code") == code, error
    assert message.startswith(REFUSED), message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


def call(id: Any, params: Any, method: str = "tools/call") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def test_non_string_tool_name_is_not_forwarded_unchecked(
    guard: RawGuard, check_log: CheckLog
) -> None:
    for n, name in enumerate([["refund_create"], {"name": "refund_create"}, 7, None, True]):
        guard.send(call(n, {"name": name, "arguments": {"marker": f"nonstr-{n}"}}))
        refusal(guard.answer(n), INVALID_PARAMS, "tools/call", "name", "string")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("nonstr-") == []
    assert check_log.checked()[:-1] == []  # only the write of still_serves was checked


def test_missing_tool_name_is_not_forwarded_unchecked(guard: RawGuard, check_log: CheckLog) -> None:
    guard.send(call(1, {"arguments": {"marker": "noname"}}))
    refusal(guard.answer(1), INVALID_PARAMS, "tools/call", "name", "missing")
    guard.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call"})  # no params at all
    refusal(guard.answer(2), INVALID_PARAMS, "tools/call", "params")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("noname") == []


def test_non_object_arguments_are_not_forwarded_unchecked(
    guard: RawGuard, check_log: CheckLog
) -> None:
    shapes: list[Any] = [["nonobj"], "nonobj", 5, None, [{"marker": "nonobj"}]]
    for n, arguments in enumerate(shapes):
        for tool in (READ, "refund_create"):
            id = f"{tool}-{n}"
            guard.send(call(id, {"name": tool, "arguments": arguments}))
            refusal(guard.answer(id), INVALID_PARAMS, "tools/call", "arguments", "object")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("nonobj") == []


def test_batch_is_not_forwarded(guard: RawGuard, check_log: CheckLog) -> None:
    batch = [
        call(1, {"name": "refund_create", "arguments": {"marker": "batched"}}),
        call(2, {"name": READ, "arguments": {"marker": "batched"}}),
    ]
    guard.send(batch)
    refusal(guard.answer(None), INVALID_REQUEST, "batch")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("batched") == []
    assert guard.answers(1) == [] and guard.answers(2) == []


def test_duplicate_in_flight_id_is_refused(guard: RawGuard, check_log: CheckLog) -> None:
    check_log.hold = True  # the first call waits at Claros, its id in flight
    guard.send(call(7, {"name": "refund_create", "arguments": {"marker": "first"}}))
    assert check_log.held.wait(20)
    guard.send(call(7, {"name": READ, "arguments": {"marker": "second"}}))
    refusal(guard.answer(7), INVALID_REQUEST, "7", "in flight")
    check_log.release.set()
    first = guard.answer(7, n=2)
    assert "ran" in json.dumps(first.get("result")), first
    check_log.hold = False
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("second") == []
    assert len(guard.upstream_saw("first")) == 1
    # Once answered, the id is free again.
    guard.send(call(7, {"name": READ, "arguments": {"marker": "again"}}))
    assert "result" in guard.answer(7, n=3)


def test_method_in_another_case_is_not_forwarded(guard: RawGuard, check_log: CheckLog) -> None:
    for n, method in enumerate(["Tools/Call", "TOOLS/CALL", "tools/Call", "Tools/List"]):
        guard.send(call(n, {"name": "refund_create", "arguments": {"marker": "cased"}}, method))
        refusal(guard.answer(n), METHOD_NOT_FOUND, method, "case")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("cased") == []


def test_unknown_method_is_not_forwarded(guard: RawGuard, check_log: CheckLog) -> None:
    for n, method in enumerate(["tools/execute", "x-shop/refund", "tools/call ", "tools.call"]):
        guard.send(call(n, {"name": "refund_create", "arguments": {"marker": "unknown"}}, method))
        refusal(guard.answer(n), METHOD_NOT_FOUND, repr(method))
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("unknown") == []


def test_tools_call_without_a_usable_id_is_not_forwarded(
    guard: RawGuard, check_log: CheckLog
) -> None:
    """Without an id (or with one that is null, an object, a fraction or a boolean) a
    tools/call reads as a notification; a lenient server may still run it."""
    params = {"name": "refund_create", "arguments": {"marker": "no-id"}}
    guard.send({"jsonrpc": "2.0", "method": "tools/call", "params": params})
    refusal(guard.answer(None), INVALID_REQUEST, "tools/call", "id")
    for n, id in enumerate([None, {"n": 1}, 1.5, True, [1]]):
        guard.send(call(id, params))
        refusal(guard.answer(None, n=n + 2), INVALID_REQUEST, "id")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("no-id") == []


def test_params_that_are_not_an_object_are_refused(guard: RawGuard, check_log: CheckLog) -> None:
    for n, params in enumerate([["refund_create", {"marker": "flat-params"}], "flat-params", 3]):
        guard.send(call(n, params))
        refusal(guard.answer(n), INVALID_PARAMS, "params", "object")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw("flat-params") == []


def test_lines_that_are_not_json_rpc_are_answered_and_the_guard_keeps_serving(
    guard: RawGuard, check_log: CheckLog
) -> None:
    guard.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name"')
    refusal(guard.answer(None), PARSE_ERROR, "JSON")
    guard.send_raw(b'"refund_create"')
    refusal(guard.answer(None, n=2), INVALID_REQUEST, "object")
    guard.still_serves(check_log, "after")


def test_a_line_too_long_to_read_is_refused_and_the_guard_keeps_serving(
    guard: RawGuard, check_log: CheckLog
) -> None:
    huge = {"name": "refund_create", "arguments": {"marker": "huge", "pad": "x" * (65 << 20)}}
    guard.send(call(1, huge))
    refusal(guard.answer(None), INVALID_REQUEST, "longer than")
    guard.still_serves(check_log, "after")
    assert guard.upstream_saw('"huge"') == []


# -- the fuzz -------------------------------------------------------------------------------

JSON_LEAVES = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=6)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
# Names the guard never counts as reads (every one has a write word), and the read.
WRITE_NAMES = st.sampled_from(
    ["refund_create", "Refund_Create", "REFUND_CREATE", "refund_create ", "", "refund/create"]
) | st.text(max_size=6).map(lambda s: "refund_create" + s)
NAMES = st.one_of(
    st.just(READ),
    WRITE_NAMES,
    st.lists(st.sampled_from([READ, "refund_create"]), max_size=2),
    st.integers(),
    st.none(),
    st.dictionaries(st.just("name"), WRITE_NAMES),
)
METHODS = st.one_of(
    st.sampled_from(
        ["tools/call"] * 4
        + ["Tools/Call", "TOOLS/CALL", "tools/call ", "tools.call", "tools/execute"]
        + ["tools/list", "resources/read", "prompts/get", "ping", "notifications/cancelled"]
    ),
    st.text(max_size=10),
    st.integers(),
    st.none(),
)
MISSING: Any = object()


def _ids(n: int) -> st.SearchStrategy[Any]:
    """Ids of every kind; the usable ones unique (``n``), so that only the duplicates the
    test means to send are duplicates."""
    usable = st.sampled_from([n, n, f"r{n}", str(n)])
    odd = st.sampled_from([None, 1.5, True, {"id": n}, [n]])
    return usable | odd | st.just(MISSING)


@st.composite
def messages(draw: st.DrawFn, ids: Iterator[int]) -> Any:
    """One JSON-RPC-ish message: anything a client could write, malformed or not."""
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0"
    else:
        message["jsonrpc"] = draw(st.sampled_from(["1.0", None, 2]))
    id = draw(_ids(next(ids)))
    if id is not MISSING:
        message["id"] = id
    method = draw(METHODS)
    if method is not MISSING:
        message["method"] = method
    shape = draw(st.sampled_from(["call", "call", "call", "none", "odd"]))
    if shape == "call":
        params: dict[str, Any] = {}
        name = draw(st.one_of(NAMES, st.just(MISSING)))
        if name is not MISSING:
            params["name"] = name
        arguments = draw(st.one_of(st.dictionaries(st.text(max_size=4), JSON_VALUES), JSON_VALUES))
        if draw(st.booleans()):
            params["arguments"] = arguments
        message["params"] = params
    elif shape == "odd":
        message["params"] = draw(JSON_VALUES)
    if draw(st.integers(0, 7)) == 0:
        message["result"] = {}
    return message


@st.composite
def lines(draw: st.DrawFn, ids: Iterator[int]) -> list[tuple[bytes, list[Any]]]:
    """A few lines, each with the ids the guard must answer for it."""
    out: list[tuple[bytes, list[Any]]] = []
    for _ in range(draw(st.integers(1, 3))):
        form = draw(st.sampled_from(["one"] * 6 + ["batch", "duplicate", "text"]))
        if form == "text":
            out.append((draw(st.text(max_size=20)).encode("utf-8", "surrogatepass"), []))
            continue
        first = draw(messages(ids))
        if form == "batch":
            batch = [first, *draw(st.lists(messages(ids), max_size=2))]
            out.append((json.dumps(batch).encode(), []))
            continue
        out.append((json.dumps(first).encode(), _expects(first)))
        if form == "duplicate" and "id" in first:
            again = {**draw(messages(ids)), "id": first["id"]}
            out.append((json.dumps(again).encode(), _expects(again)))
    return out


def _expects(message: dict[str, Any]) -> list[Any]:
    """A request with an id the guard can answer to must be answered."""
    id = message.get("id")
    usable = isinstance(id, str) or (isinstance(id, int) and not isinstance(id, bool))
    return [id] if usable and "method" in message else []


def _count(
    answered: dict[tuple[type, Any], int], id: Any
) -> int:  # "7" and 7 are different ids on the wire
    key = (type(id), id)
    answered[key] = answered.get(key, 0) + 1
    return answered[key]


def unchecked(
    upstream: list[tuple[int, str]], checks: list[tuple[int, dict[str, Any]]]
) -> list[str]:
    """Lines the wrapped server received that are neither MCP as the spec spells it nor
    a read, nor a tools/call Claros checked first (each check covers one call)."""
    left = list(checks)
    bad: list[str] = []
    for ns, line in upstream:
        try:
            message = json.loads(line)
        except ValueError:
            bad.append(line)
            continue
        if not isinstance(message, dict):
            bad.append(line)
            continue
        method = message.get("method")
        if method not in MCP_METHODS:
            bad.append(line)
            continue
        if method != "tools/call":
            continue
        params = message.get("params")
        if "id" not in message or not isinstance(params, dict):
            bad.append(line)
            continue
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str) or not isinstance(arguments, dict):
            bad.append(line)
            continue
        if name == READ:
            continue
        match = next(
            (
                c
                for c in left
                if c[0] < ns and (c[1].get("tool"), c[1].get("arguments")) == (name, arguments)
            ),
            None,
        )
        if match is None:
            bad.append(line)
        else:
            left.remove(match)
    return bad


def test_fuzzed_calls_never_reach_upstream_unchecked(guard: RawGuard, check_log: CheckLog) -> None:
    ids = iter(range(10**9))
    answered: dict[tuple[type, Any], int] = {}
    syncs = iter(range(10**9))

    @settings(
        max_examples=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
        report_multiple_bugs=False,
    )
    @given(st.data())
    def attempt(data: st.DataObject) -> None:
        sent = data.draw(lines(ids))
        for raw, _ in sent:
            guard.send_raw(raw)
        for _, expected in sent:
            for id in expected:
                guard.answer(id, n=_count(answered, id), timeout=5)
        sync = f"sync-{next(syncs)}"
        assert "result" in guard.call(sync, READ, {"sync": sync})
        bad = unchecked(guard.upstream_lines(), check_log.checked())
        assert bad == [], f"reached the wrapped server unchecked: {bad[:3]}"

    attempt()
    guard.still_serves(check_log, "after")
    assert unchecked(guard.upstream_lines(), check_log.checked()) == []
