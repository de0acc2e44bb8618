"""Reading the fetched record ahead: a real ``claros guard`` (subprocess) in front of the lab
MCP server, a real local Claros behind a recording relay, the MCP SDK client. The second
write of a mapped tool costs one check; a mapping changed meanwhile costs one round more
and never a decision on the old record; a read ahead that fails changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from claros_guard.needs import NeedResolver
from claros_guard.policy import Call, Policy
from claros_guard.read_ahead import ReadAhead, fill_in
from tests.guard.conftest import Workspace, lab
from tests.guard.http_fakes import Answer, HttpFake, Request, relay
from tests.guard.test_examples import text, wait_registered
from tests.guard.test_policy import CALL, FakeClaros, Reader, result

pytestmark = pytest.mark.anyio

T1 = {"id": "T-1", "size": 3, "owner": "ada"}
T2 = {"id": "T-2", "size": 9}


class Recorder(HttpFake):
    """Claros behind a relay that keeps every ``POST /v1/check`` body and answer."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.checks: list[tuple[dict[str, Any], dict[str, Any]]] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        answer = relay(self.target, request)
        if request.path == "/v1/check":
            self.checks.append((json.loads(request.body), json.loads(answer[2])))
        return answer


@pytest.fixture
def recorder(workspace: Workspace) -> Iterator[Recorder]:
    with Recorder(workspace.claros.url) as proxy:
        yield proxy


def mapping(arguments: dict[str, Any], tool: str = "thing_read") -> dict[str, Any]:
    return {"app": "lab", "tool": "note_write",
            "fetch": {"tool": tool, "arguments": arguments, "into": "thing"}}  # fmt: skip


def reads(ws: Workspace) -> list[tuple[str, dict[str, Any]]]:
    return [(c["tool"], c["arguments"]) for c in ws.calls()]


async def test_the_second_write_reads_first_and_checks_once(
    workspace: Workspace, recorder: Recorder
) -> None:
    ws = workspace
    ws.push(rules=[{"id": "big", "app": "lab", "tools": ["note_write"], "response": "stop",
                    "when": "thing.size > 5", "message": "too big"}])  # fmt: skip
    async with Client(ws.guard("lab", lab(), "--url", recorder.url)) as agent:
        await wait_registered(ws, "lab")
        ws.push(mappings=[mapping({"id": "$thing"})])
        first = await agent.call_tool("note_write", {"text": "a", "thing": "T-1"})
        second = await agent.call_tool("note_write", {"text": "b", "thing": "T-1"})
        stopped = await agent.call_tool("note_write", {"text": "c", "thing": "T-2"})
    assert not first.is_error and not second.is_error
    assert stopped.is_error and "too big" in text(stopped)
    assert reads(ws) == [
        ("thing_read", {"id": "T-1"}), ("note_write", {"text": "a", "thing": "T-1"}),
        ("thing_read", {"id": "T-1"}), ("note_write", {"text": "b", "thing": "T-1"}),
        ("thing_read", {"id": "T-2"}),  # read ahead; the rule stops the write on it
    ]  # fmt: skip
    bodies = [body for body, _ in recorder.checks]
    assert [("fetched" in b, "fetched_with" in b) for b in bodies] == [
        (False, False), (True, False),  # the first write: need, then the check
        (True, True), (True, True),  # then one check per write
    ]  # fmt: skip
    assert bodies[2]["fetched_with"] == {"tool": "thing_read", "arguments": {"id": "T-1"}}
    assert bodies[3]["fetched"] == {"fetch": T2}
    rows = ws.records("check")
    assert [r["result"] for r in rows] == ["allow", "allow", "stop"]
    assert [r["fetched"]["fetch"] for r in rows] == [T1, T1, T2]


async def test_a_mapping_changed_since_is_read_again_and_learnt(
    workspace: Workspace, recorder: Recorder
) -> None:
    ws = workspace
    async with Client(ws.guard("lab", lab(), "--url", recorder.url)) as agent:
        await wait_registered(ws, "lab")
        ws.push(mappings=[mapping({"id": "$thing"})])
        await agent.call_tool("note_write", {"text": "a", "thing": "T-1", "other": "T-2"})
        ws.push(mappings=[mapping({"id": "$other"})])
        changed = await agent.call_tool("note_write", {"text": "b", "thing": "T-1", "other": "T-2"})
        again = await agent.call_tool("note_write", {"text": "c", "thing": "T-1", "other": "T-2"})
    assert not changed.is_error and not again.is_error
    assert [t for t in reads(ws) if t[0] == "thing_read"] == [
        ("thing_read", {"id": "T-1"}),  # the first write, asked for
        ("thing_read", {"id": "T-1"}),  # read ahead with the old mapping: stale
        ("thing_read", {"id": "T-2"}),  # what Claros asked for instead
        ("thing_read", {"id": "T-2"}),  # read ahead with the mapping learnt anew
    ]
    answers = [answer for _, answer in recorder.checks]
    assert answers[2]["result"] == "need" and answers[2]["fetch_stale"] is True
    assert "fetched_with" not in recorder.checks[3][0]  # asked again with the new read only
    assert "fetch_stale" not in answers[4] and answers[4]["result"] == "allow"
    assert [r["fetched"]["fetch"] for r in ws.records("check")] == [T1, T2, T2]


async def test_a_read_ahead_that_fails_is_dropped_and_the_check_goes_as_before(
    workspace: Workspace, recorder: Recorder
) -> None:
    ws = workspace
    async with Client(ws.guard("lab", lab(), "--url", recorder.url)) as agent:
        await wait_registered(ws, "lab")
        ws.push(mappings=[mapping({"id": "$thing"})])
        await agent.call_tool("note_write", {"text": "a", "thing": "T-1"})
        ws.push(mappings=[mapping({"id": "$other"})])
        # The old mapping's read names a thing that does not exist: the read ahead fails.
        passed = await agent.call_tool("note_write", {"text": "b", "thing": "T-9", "other": "T-2"})
        # A read that fails ahead fails when asked for too, and that blocks as always.
        blocked = await agent.call_tool("note_write", {"text": "c", "other": "T-9"})
    assert not passed.is_error
    assert blocked.is_error and "Claros needs facts the guard could not read" in text(blocked)
    assert [t for t in reads(ws) if t[0] == "thing_read"] == [
        ("thing_read", {"id": "T-1"}),
        ("thing_read", {"id": "T-9"}),  # read ahead: failed, dropped
        ("thing_read", {"id": "T-2"}),  # what Claros asked for (and the guard learnt)
        ("thing_read", {"id": "T-9"}),  # the third write, read ahead: failed, dropped
        ("thing_read", {"id": "T-9"}),  # then asked for: fails again, blocks
    ]
    assert [body.get("fetched_with") for body, _ in recorder.checks] == [None] * 5
    assert [r["fetched"]["fetch"] for r in ws.records("check")] == [T1, T2]


NEED = {"key": "fetch", "kind": "fetch", "tool": "order_read", "arguments": {"id": "1187"},
        "template": {"id": "$order"}}  # fmt: skip


async def test_a_read_ahead_of_a_tool_no_longer_a_read_is_refused_and_blocks() -> None:
    for fail_open in (False, True):
        answers = {"order_read": lambda a: result({"id": a["id"], "total": 200})}
        reader = Reader(answers)
        claros = FakeClaros([
            {"allowed": False, "result": "need", "need": [NEED]},
            {"result": "allow", "check_id": "chk_1"},
            {"allowed": False, "result": "need", "need": [NEED]},
        ])  # fmt: skip
        checks = Policy(claros, NeedResolver(reader), fail_open=fail_open)
        assert (await checks.decide(CALL)).forward
        del answers["order_read"]  # now held as a write: the reader refuses it
        verdict = await checks.decide(CALL)
        # The read ahead was refused and dropped; Claros asked for it; refused again: blocked,
        # even with --fail-open, as a need naming a non-read always is.
        assert not verdict.forward and verdict.unchecked is None
        assert "order_read is not a read" in str(verdict.message)
        assert [r[1] for r in reader.reads] == ["order_read"] * 3
        assert "fetched_with" not in claros.checks[2] and "fetched" not in claros.checks[2]


async def test_claros_saying_stale_sets_everything_read_aside() -> None:
    reader = Reader({"order_read": lambda a: result({"id": a["id"], "total": 200})})
    moved = {**NEED, "arguments": {"id": "1187-b"}, "template": {"id": "$order_b"}}
    claros = FakeClaros([
        {"allowed": False, "result": "need", "need": [NEED]},
        {"result": "allow", "check_id": "chk_1"},
        {"allowed": False, "result": "need", "need": [moved], "fetch_stale": True},
        {"result": "allow", "check_id": "chk_2"},
        {"result": "allow", "check_id": "chk_3", "fetch_stale": True},  # mapping closed
        {"result": "allow", "check_id": "chk_4"},
    ])  # fmt: skip
    checks = Policy(claros, NeedResolver(reader))
    call = Call("shop", "refund_create", {"order": "1187", "order_b": "1187-b"}, {"name": "t"})
    for _ in range(4):
        assert (await checks.decide(call)).forward
    bodies = claros.checks
    assert bodies[2]["fetched_with"] == {"tool": "order_read", "arguments": {"id": "1187"}}
    assert "fetched_with" not in bodies[3]  # the new read only
    assert bodies[3]["fetched"] == {"fetch": {"id": "1187-b", "total": 200}}
    assert bodies[4]["fetched_with"]["arguments"] == {"id": "1187-b"}  # learnt anew
    assert "fetched" not in bodies[5] and "fetched_with" not in bodies[5]  # forgotten


def test_templates_only_claros_can_fill_in_are_not_kept() -> None:
    assert fill_in({"id": "$order", "n": 1, "l": ["$a.b"]}, {"order": 7, "a": {"b": 2}}) == {
        "id": 7, "n": 1, "l": [2]}  # fmt: skip
    # A field that names no record (missing, null, blank, an object): Claros refuses the
    # check rather than read with it, so nothing is read ahead.
    for named in ({}, {"order": None}, {"order": " "}, {"order": {"$ne": None}}):
        assert fill_in({"id": "$order"}, named) is None
    for builtin in ("$today", "$now", "$month_start", "$quarter_start", "$year_start", "$"):
        assert fill_in({"since": builtin}, {}) is None
    ahead = ReadAhead()
    need = {"key": "fetch", "kind": "fetch", "tool": "r", "arguments": {"since": "2026-11-20"},
            "template": {"since": "$today"}}  # fmt: skip
    ahead.learn("shop", "w", {}, [need])
    assert len(ahead) == 0
    # Filled in otherwise than Claros did (a path this guard reads differently): not kept.
    need = {"key": "fetch", "kind": "fetch", "tool": "r", "arguments": {"id": 1},
            "template": {"id": "$order"}}  # fmt: skip
    ahead.learn("shop", "w", {"order": 2}, [need])
    assert len(ahead) == 0
    ahead.learn("shop", "w", {"order": 1}, [need])
    assert ahead.read_for("shop", "w", {"order": 5}) == {"tool": "r", "arguments": {"id": 5}}
    # A Claros that sends no template (an older one): whatever was kept goes.
    ahead.learn("shop", "w", {"order": 1}, [{**need, "template": None}])
    assert ahead.read_for("shop", "w", {"order": 5}) is None
    # Bounded: past the limit everything is forgotten and learnt again.
    small = ReadAhead(limit=2)
    for tool in ("a", "b", "c"):
        small.learn("shop", tool, {"order": 1}, [need])
    assert len(small) == 1 and small.read_for("shop", "c", {"order": 1}) is not None
