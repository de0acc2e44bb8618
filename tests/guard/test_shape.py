"""``claros_guard.shape`` alone: what one line from the agent may be, each refusal's code,
id and reason; request ids in flight; the screen between a transport and a dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from claros_guard.app import AppSettings, GuardedApp, GuardSettings
from claros_guard.peers import PeerClient
from claros_guard.reporter import Reporter
from claros_guard.session import AgentSession
from claros_guard.shape import (
    CLIENT_NOTIFICATIONS,
    CLIENT_REQUESTS,
    InFlight,
    Refusal,
    parse_line,
    screened,
    too_long,
)
from claros_guard.transport import UpstreamSpec
from tests.guard.conftest import LAB, Workspace, lab
from tests.guard.test_policy import FakeClaros

INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, PARSE_ERROR = -32600, -32601, -32602, -32700


def refused(line: bytes | Any) -> Refusal:
    raw = line if isinstance(line, bytes) else json.dumps(line).encode()
    with pytest.raises(Refusal) as caught:
        parse_line(raw)
    assert caught.value.message.startswith("Refused by the Claros guard: ")
    assert caught.value.message.endswith("It was not sent to the server.")
    return caught.value


def request(id: Any, method: str, params: Any = None, **more: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": id, "method": method, **more}
    if params is not None:
        message["params"] = params
    return message


def test_the_methods_passed_on_are_mcps_own() -> None:
    assert {"initialize", "ping", "tools/call", "tools/list", "resources/read"} <= CLIENT_REQUESTS
    assert "notifications/cancelled" in CLIENT_NOTIFICATIONS
    assert not any(m != m.lower() and m != "logging/setLevel" for m in CLIENT_REQUESTS)


@pytest.mark.parametrize(
    ("line", "code", "words"),
    [
        (b"\xff\xfe{}", PARSE_ERROR, "not UTF-8"),
        (b'{"jsonrpc": "2.0", "id": 1', PARSE_ERROR, "not JSON"),
        (b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}', PARSE_ERROR, "NaN"),
        (b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}', INVALID_REQUEST, "'id' twice"),
        (b'{"params": {"arguments": {"a": 1, "a": 2}}}', INVALID_REQUEST, "'a' twice"),
        (b"[]", INVALID_REQUEST, "batch"),
        (b'"tools/call"', INVALID_REQUEST, "a line holding a string"),
        (b"null", INVALID_REQUEST, "a line holding null"),
    ],
)
def test_lines_that_are_not_one_json_object(line: bytes, code: int, words: str) -> None:
    refusal = refused(line)
    assert (refusal.id, refusal.code, refusal.answer) == (None, code, True)
    assert words in refusal.message


@pytest.mark.parametrize("id", [None, {"id": 1}, [1], 1.5, 1.0, True, False])
def test_ids_that_are_not_ids_are_refused_under_null(id: Any) -> None:
    refusal = refused(request(id, "tools/call", {"name": "refund_create"}))
    assert (refusal.id, refusal.code) == (None, INVALID_REQUEST)
    assert "id is" in refusal.message and "string or an integer" in refusal.message


def test_a_request_method_without_an_id_is_refused() -> None:
    for method in ("tools/call", "TOOLS/CALL", "ping"):
        refusal = refused({"jsonrpc": "2.0", "method": method, "params": {"name": "x"}})
        assert (refusal.id, refusal.code, refusal.answer) == (None, INVALID_REQUEST, True)
        assert f"{method} without an id" in refusal.message


def test_notifications_mcp_does_not_define_are_dropped_unanswered() -> None:
    for method in ("notifications/Initialized", "tools/changed", "x/anything"):
        refusal = refused({"jsonrpc": "2.0", "method": method})
        assert (refusal.code, refusal.answer) == (METHOD_NOT_FOUND, False)
    assert (
        "MCP spells it 'notifications/initialized'"
        in refused({"jsonrpc": "2.0", "method": "notifications/Initialized"}).message
    )
    bad_params = refused({"jsonrpc": "2.0", "method": "notifications/progress", "params": [1]})
    assert (bad_params.code, bad_params.answer) == (INVALID_PARAMS, False)


def test_methods_are_mcps_in_its_own_case() -> None:
    cased = refused(request(4, "Tools/Call", {"name": "x"}))
    assert (cased.id, cased.code) == (4, METHOD_NOT_FOUND)
    assert "'Tools/Call'" in cased.message and "case-sensitive" in cased.message
    unknown = refused(request("r", "tools/execute"))
    assert (unknown.id, unknown.code) == ("r", METHOD_NOT_FOUND)
    assert "not one" in unknown.message
    assert refused(request(5, 7)).code == INVALID_REQUEST  # a method that is a number
    both = refused(request(6, "tools/list", result={}))
    assert (both.id, both.code) == (6, INVALID_REQUEST) and "request or a response" in both.message


@pytest.mark.parametrize(
    ("params", "words"),
    [
        (["refund_create"], "params of tools/call that are an array"),
        ("x", "params of tools/call that are a string"),
        (None, "without params"),
        ({"arguments": {}}, "params.name is missing"),
        ({"name": ["refund_create"]}, "name is an array"),
        ({"name": None}, "name is null"),
        ({"name": 3}, "name is a number"),
        ({"name": "refund_create", "arguments": None}, "arguments are null"),
        ({"name": "refund_create", "arguments": ["a"]}, "arguments are an array"),
        ({"name": "order_read", "arguments": "{}"}, "arguments are a string"),
        ({"name": "refund_create", "task": {"ttl": 60000}}, "asking to run as a task"),
        ({"name": "order_read", "task": None}, "asking to run as a task"),
        ({"name": "refund_create", "inputResponses": {}}, "carrying inputResponses"),
        ({"name": "refund_create", "requestState": "s"}, "carrying requestState"),
        (
            {"name": "order_read", "inputResponses": None, "requestState": None},
            "carrying inputResponses and requestState",
        ),
        # A field MCP may give a meaning later (fail closed), named in the refusal.
        ({"name": "refund_create", "arguments": {}, "amount": 400}, "carrying 'amount'"),
        ({"name": "order_read", "Arguments": {"id": 1}}, "carrying 'Arguments'"),
        (
            {"name": "refund_create", **{f"f{i}": i for i in range(7)}},
            "carrying 'f0', 'f1', 'f2', 'f3', 'f4' and more",
        ),
        ({"name": "refund_create", "x" * 200: 1}, f"carrying '{'x' * 64}'"),
    ],
)
def test_tool_calls_that_are_not_a_name_and_an_object(params: Any, words: str) -> None:
    message = request(9, "tools/call")
    if params is not None:
        message["params"] = params
    refusal = refused(message)
    assert (refusal.id, refusal.code) == (9, INVALID_PARAMS)
    assert words in refusal.message


def test_messages_that_are_not_json_rpc_2_are_refused_under_their_id() -> None:
    refusal = refused({"jsonrpc": "1.0", "id": 3, "method": "ping"})
    assert (refusal.id, refusal.code) == (3, INVALID_REQUEST)
    assert "jsonrpc" in refusal.message


def test_well_formed_messages_pass_as_they_are() -> None:
    call = parse_line(json.dumps(request(1, "tools/call", {"name": "a", "arguments": {}})).encode())
    assert isinstance(call.message, types.JSONRPCRequest)
    assert call.message.params == {"name": "a", "arguments": {}}
    meta = {"name": "a", "arguments": {}, "_meta": {"progressToken": 7}}
    with_meta = parse_line(json.dumps(request(2, "tools/call", meta)).encode())
    assert isinstance(with_meta.message, types.JSONRPCRequest)
    assert with_meta.message.params == meta
    note = parse_line(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert isinstance(note.message, types.JSONRPCNotification)
    answer = parse_line(b'{"jsonrpc": "2.0", "id": 1, "result": {}}')  # to a server request
    assert isinstance(answer.message, types.JSONRPCResponse)
    assert too_long(10).message.startswith("Refused by the Claros guard: a message longer than 10")


def msg(line: dict[str, Any]) -> SessionMessage:
    return parse_line(json.dumps(line).encode())


def test_in_flight_ids() -> None:
    flight = InFlight()
    flight.admit(msg(request(7, "ping")))
    with pytest.raises(Refusal, match="already in flight") as caught:
        flight.admit(msg(request("7", "tools/list")))  # "7" and 7 are one id
    assert caught.value.id == "7" and caught.value.code == INVALID_REQUEST
    flight.settle(msg({"jsonrpc": "2.0", "id": 7, "result": {}}))
    flight.admit(msg(request(7, "ping")))  # answered: free again
    cancel = {"requestId": 7, "reason": "no longer needed"}
    flight.admit(msg({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}))
    assert len(flight) == 0
    flight.admit(msg(request("x", "ping")))
    error = {"code": -1, "message": "no"}
    flight.settle(msg({"jsonrpc": "2.0", "id": "x", "error": error}))
    assert len(flight) == 0


@pytest.mark.anyio
async def test_screened_answers_refusals_and_passes_the_rest() -> None:
    t_send, t_read = anyio.create_memory_object_stream[SessionMessage | Exception](10)
    t_write, t_out = anyio.create_memory_object_stream[SessionMessage](10)
    with anyio.fail_after(10), t_send, t_read, t_write, t_out:
        async with screened(t_read, t_write) as (read, write):
            await t_send.send(msg(request(1, "tools/call", {"name": "a"})))
            await t_send.send(msg(request(1, "ping")))  # 1 is in flight
            await t_send.send(Refusal(None, INVALID_REQUEST, "a batch", "one at a time"))
            await t_send.send(ValueError("something else"))
            await t_send.send(Refusal(None, METHOD_NOT_FOUND, "x", "y", answer=False))
            passed = await read.receive()
            assert isinstance(passed, SessionMessage) and passed.message.id == 1  # type: ignore[union-attr]
            answers = [await t_out.receive() for _ in range(3)]
            errors = [a.message for a in answers]
            assert [e.id for e in errors] == [1, None, None]  # type: ignore[union-attr]
            assert "already in flight" in errors[0].error.message  # type: ignore[union-attr]
            assert "cannot read" in errors[2].error.message  # type: ignore[union-attr]
            await write.send(msg({"jsonrpc": "2.0", "id": 1, "result": {}}))
            assert (await t_out.receive()).message.id == 1  # type: ignore[union-attr]
            await t_send.send(msg(request(1, "ping")))  # answered: 1 may be used again
            assert (await read.receive()).message.id == 1  # type: ignore[union-attr]
            t_send.close()
            with pytest.raises(anyio.EndOfStream):
                await read.receive()


def test_stdin_from_a_file_is_screened_too(workspace: Workspace, tmp_path: Path) -> None:
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    lines = [
        request(1, "initialize", hello),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        [request(2, "tools/call", {"name": "note_write", "arguments": {"text": "batched"}})],
        request(3, "Tools/Call", {"name": "note_write", "arguments": {"text": "cased"}}),
    ]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    answers = tmp_path / "answers.jsonl"
    params = workspace.guard("lab", lab())
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [params.command, *params.args],
            env=params.env,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    got = {str(a.get("id")): a for a in map(json.loads, answers.read_text().splitlines())}
    assert "result" in got["1"]
    assert "batch" in got["None"]["error"]["message"]
    assert got["3"]["error"]["code"] == METHOD_NOT_FOUND
    assert workspace.calls() == []


@pytest.mark.anyio
async def test_the_session_refuses_malformed_calls_without_the_wire_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AgentSession`` on bare memory streams (no ``screened``) refuses them too."""
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("EXAMPLE_CALL_LOG", str(log))
    claros = FakeClaros([])
    spec = UpstreamSpec(command=sys.executable, args=(str(LAB),))
    peers = PeerClient(Path(tempfile.mkdtemp(prefix="cs")), "ck_k")
    reporter = Reporter(claros, idle=0.0)
    app = GuardedApp(
        AppSettings("lab", spec), GuardSettings(), api=claros, peers=peers, reporter=reporter
    )
    to_guard = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_agent = anyio.create_memory_object_stream[SessionMessage](16)
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }

    def raw(id: Any, method: str, params: dict[str, Any]) -> SessionMessage:
        return SessionMessage(
            types.JSONRPCRequest(jsonrpc="2.0", id=id, method=method, params=params)
        )

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await tg.start(reporter.run)
            await tg.start(app.run)
            tg.start_soon(AgentSession(app, to_guard[1], to_agent[0]).run)  # type: ignore[arg-type]
            await to_guard[0].send(raw(1, "initialize", hello))
            assert isinstance((await to_agent[1].receive()).message, types.JSONRPCResponse)
            note = types.JSONRPCNotification(
                jsonrpc="2.0", method="Tools/Call", params={"name": "note_write"}
            )
            await to_guard[0].send(SessionMessage(note))
            await to_guard[0].send(raw(2, "tools/call", {"name": ["note_write"], "arguments": {}}))
            await to_guard[0].send(raw(3, "Tools/Call", {"name": "note_write", "arguments": {}}))
            await to_guard[0].send(raw(4, "tools/call", {"name": "thing_read", "arguments": "x"}))
            answers = {}
            for _ in range(3):
                answer = (await to_agent[1].receive()).message
                answers[answer.id] = answer  # type: ignore[union-attr]
            tg.cancel_scope.cancel()
        for stream in (*to_guard, *to_agent):
            stream.close()
    assert answers[2].error.code == INVALID_PARAMS and "string" in answers[2].error.message  # type: ignore[union-attr]
    assert answers[3].error.code == METHOD_NOT_FOUND and "case" in answers[3].error.message  # type: ignore[union-attr]
    assert answers[4].error.code == INVALID_PARAMS and "object" in answers[4].error.message  # type: ignore[union-attr]
    assert not log.exists() or log.read_text() == ""
    assert claros.checks == []
