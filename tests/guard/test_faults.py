"""Faults: Claros down, slow or failing; the wrapped server crashing or hanging; reads
failing or not reads at all. No write reaches the wrapped server unchecked unless
``--fail-open``, and the agent always gets a clear error."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from claros_guard.api import HttpClarosApi
from claros_guard.errors import ClarosUnavailableError
from claros_guard.needs import NeedResolver
from claros_guard.policy import Policy
from tests.guard.conftest import Workspace, lab
from tests.guard.http_fakes import JSON, Answer, HttpFake, Request, relay
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.guard.test_policy import CALL, Reader, result

pytestmark = pytest.mark.anyio


class Flaky(HttpFake):
    """A proxy in front of Claros that fails ``POST /v1/check`` as the test says:
    ``ok`` (pass it on), ``5xx`` (503) or ``slow`` (hold it until released)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.mode = "ok"
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.path == "/v1/check" and self.mode == "5xx":
            return 503, JSON, b'{"error":"unavailable","message":"maintenance"}'
        if request.path == "/v1/check" and self.mode == "slow":
            self.release.wait(30)
        return relay(self.target, request)


@pytest.fixture
def flaky(workspace: Workspace) -> Iterator[Flaky]:
    with Flaky(workspace.claros.url) as proxy:
        yield proxy


class Scripted(HttpFake):
    """An HTTP server answering ``POST /v1/check`` from a script: shapes of answers the
    local server does not send, such as the spec's need without ``result``."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.bodies: list[dict[str, Any]] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        self.bodies.append(json.loads(request.body))
        return 200, JSON, json.dumps(self.answers.pop(0)).encode()


async def test_the_specs_need_answer_without_result_is_answered() -> None:
    need = [{"key": "fetch", "kind": "fetch", "tool": "order_read", "arguments": {"id": "1187"}}]
    claros = Scripted(
        [
            {"allowed": False, "need": need},  # fetching-facts.txt, word for word
            {"allowed": True, "result": "allow", "check_id": "chk_1"},
            {"allowed": True},  # neither a result nor a need
        ]
    )
    api = HttpClarosApi(claros.url, "ck_test")
    try:
        reader = Reader({"order_read": lambda a: result({"id": a["id"], "total": 200})})
        verdict = await Policy(api, NeedResolver(reader)).decide(CALL)
        assert verdict.forward and verdict.check_id == "chk_1"
        assert claros.bodies[1]["fetched"] == {"fetch": {"id": "1187", "total": 200}}
        with pytest.raises(ClarosUnavailableError, match="neither a result nor a need"):
            await api.check({"app": "shop"})
    finally:
        await api.aclose()
        claros.close()


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def note_needs(tool: str) -> dict[str, Any]:
    return {
        "app": "lab",
        "tool": "note_write",
        "fetch": {"tool": tool, "arguments": {"id": "T-1"}, "into": "thing"},
    }


async def test_claros_down_blocks_writes_and_reads_still_pass(workspace: Workspace) -> None:
    async with Client(workspace.guard("lab", lab(), "--url", dead_url())) as agent:
        read = await agent.call_tool("thing_read", {"id": "T-1"})
        write = await agent.call_tool("note_write", {"text": "hi"})
    assert not read.is_error
    assert write.is_error and "Claros could not check this call" in text(write)
    assert "cannot reach Claros" in text(write) and "The call was not run" in text(write)
    assert tools_called(workspace) == ["thing_read"]


async def test_claros_failing_blocks_and_fail_open_forwards_and_reports(
    workspace: Workspace, flaky: Flaky
) -> None:
    flaky.mode = "5xx"
    async with Client(workspace.guard("lab", lab(), "--url", flaky.url)) as agent:
        blocked = await agent.call_tool("note_write", {"text": "one"})
    assert blocked.is_error and "failed (503): maintenance" in text(blocked)
    assert tools_called(workspace) == []
    async with Client(workspace.guard("lab", lab(), "--url", flaky.url, "--fail-open")) as agent:
        forwarded = await agent.call_tool("note_write", {"text": "two"})
        with anyio.fail_after(10):
            while not workspace.records("unchecked"):
                await anyio.sleep(0.05)
    assert not forwarded.is_error
    assert tools_called(workspace) == ["note_write"]
    (unchecked,) = workspace.records("unchecked")
    assert unchecked["tool"] == "note_write" and unchecked["arguments"] == {"text": "two"}
    assert "503" in unchecked["reason"] and unchecked["status"] == "ok"
    assert unchecked["agent"]["via"]["guard"] == "claros-guard"
    assert workspace.records("check") == []


async def test_a_slow_claros_times_out(workspace: Workspace, flaky: Flaky) -> None:
    flaky.mode = "slow"
    params = workspace.guard("lab", lab(), "--url", flaky.url, "--timeout", "0.5")
    async with Client(params) as agent:
        write = await agent.call_tool("note_write", {"text": "hi"})
    flaky.release.set()
    assert write.is_error and "did not answer in time" in text(write)
    assert tools_called(workspace) == []


async def test_a_refusal_is_never_forwarded_even_with_fail_open(workspace: Workspace) -> None:
    params = workspace.guard("lab", lab(), "--key", "ck_not-a-key", "--fail-open")
    async with Client(params) as agent:
        write = await agent.call_tool("note_write", {"text": "hi"})
    assert write.is_error and "Claros refused the check (401)" in text(write)
    assert tools_called(workspace) == []


async def test_a_failing_or_hanging_read_blocks_the_write(workspace: Workspace) -> None:
    ws = workspace
    async with Client(ws.guard("lab", lab(), "--read-timeout", "0.5")) as agent:
        await wait_registered(ws, "lab")
        ws.push(mappings=[note_needs("boom_read")])
        failed = await agent.call_tool("note_write", {"text": "a"})
        ws.push(mappings=[note_needs("stuck_read")])
        hung = await agent.call_tool("note_write", {"text": "b"})
    assert failed.is_error and "the database is down" in text(failed)
    assert "Claros needs facts the guard could not read" in text(failed)
    assert hung.is_error and "stuck_read of lab failed" in text(hung) and "timed out" in text(hung)
    assert tools_called(ws) == ["boom_read", "stuck_read", "stuck_read:cancelled"]
    assert ws.records("check") == []

    async with Client(ws.guard("lab", lab(), "--fail-open")) as agent:
        ws.push(mappings=[note_needs("boom_read")])
        forwarded = await agent.call_tool("note_write", {"text": "c"})
        with anyio.fail_after(10):
            while not ws.records("unchecked"):
                await anyio.sleep(0.05)
    assert not forwarded.is_error
    assert tools_called(ws)[-2:] == ["boom_read", "note_write"]
    assert "the database is down" in ws.records("unchecked")[0]["reason"]


async def test_a_need_for_a_tool_that_is_not_a_read_is_refused(workspace: Workspace) -> None:
    ws = workspace
    async with Client(ws.guard("lab", lab())):
        registered = await wait_registered(ws, "lab")
        assert {t["name"]: t["read"] for t in registered["tools"]}["lookup_thing"] is True
        ws.push(mappings=[note_needs("lookup_thing")])
    # The same server, guarded by someone who says lookup_thing writes: its registration
    # suspends the mapping, so Claros refuses the check (409) before any need is asked, and
    # --fail-open (for outages) does not forward the write over it either. (The guard's own
    # refusal of such a need, the second line, is tested in test_policy and test_peers.)
    for fail_open in ([], ["--fail-open"]):
        params = ws.guard("lab", lab(), "--write", "lookup_thing", *fail_open)
        async with Client(params) as agent:
            write = await agent.call_tool("note_write", {"text": "hi"})
        assert write.is_error, fail_open
        assert "Claros refused the check (409): mapping lab note_write (version 1) is " in text(
            write
        )
        assert "'lookup_thing' of lab is not a read tool" in text(write)
        assert "The call was not run" in text(write)
    assert tools_called(ws) == []
    assert ws.records("unchecked") == [] and ws.records("check") == []


async def test_the_wrapped_server_crashing(workspace: Workspace) -> None:
    async with Client(workspace.guard("lab", lab())) as agent:
        crashed = await agent.call_tool("crash", {})
        assert crashed.is_error and "closed the connection during tools/call" in text(crashed)
        after = await agent.call_tool("note_write", {"text": "hi"})
        with pytest.warns(MCPDeprecationWarning):
            await agent.send_ping()  # the guard itself is still there
    assert after.is_error and "Restart this MCP server" in text(after)
    assert tools_called(workspace) == ["crash"]
    outcome = workspace.records("outcome")
    assert [o["status"] for o in outcome] == ["error"]


async def test_a_hanging_write_cancelled_by_the_agent(workspace: Workspace) -> None:
    async with Client(workspace.guard("lab", lab())) as agent:
        with anyio.move_on_after(1.0):
            await agent.call_tool("hang", {})
        after = await agent.call_tool("note_write", {"text": "still here"})
        with anyio.fail_after(10):
            while len(workspace.records("outcome")) < 2 or "hang:cancelled" not in tools_called(
                workspace
            ):
                await anyio.sleep(0.05)
    assert not after.is_error
    by_tool = {c["tool"]: c["check_id"] for c in workspace.records("check")}
    statuses = {o["check_id"]: (o["status"], o["summary"]) for o in workspace.records("outcome")}
    assert statuses[by_tool["hang"]] == ("error", "cancelled by the agent while it ran")
    assert statuses[by_tool["note_write"]][0] == "ok"
