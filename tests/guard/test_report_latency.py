"""The outcome report never delays the agent's answer, and is never lost: a real guard
process in front of the lab server, its Claros behind a proxy whose outcome route is held
until the test lets it go."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from tests.guard.conftest import Workspace, lab
from tests.guard.http_fakes import Answer, HttpFake, Request, relay
from tests.guard.test_examples import text

pytestmark = pytest.mark.anyio

WAIT = 20.0  # seconds any one step may take before the test fails (never a sync point)


class SlowOutcomes(HttpFake):
    """Passes everything on to Claros, but holds each outcome report until ``go`` is set."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.arrived = threading.Event()  # an outcome report reached the proxy
        self.go = threading.Event()
        self.drop = False  # once let go, fail the held reports instead of passing them on
        self.outcomes = 0
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.path.endswith("/outcome"):
            self.outcomes += 1
            self.arrived.set()
            if not self.go.wait(WAIT) and not self.release.is_set():
                return 503, {}, b""  # never let go: fail the report, not the test run
            if self.drop:
                return 503, {}, b""
        return relay(self.target, request)

    def stop(self) -> None:
        self.go.set()
        super().stop()


@pytest.fixture
def slow(workspace: Workspace) -> Iterator[SlowOutcomes]:
    with SlowOutcomes(workspace.claros.url) as proxy:
        yield proxy


async def _wait_for(event: threading.Event) -> bool:
    return await anyio.to_thread.run_sync(event.wait, WAIT)


async def test_the_answer_reaches_the_agent_while_its_outcome_is_held(
    workspace: Workspace, slow: SlowOutcomes
) -> None:
    params = workspace.guard("lab", lab(), CLAROS_URL=slow.url)
    async with Client(params) as agent:
        with anyio.fail_after(WAIT):
            first = await agent.call_tool("note_write", {"text": "one"})
        assert not first.is_error, text(first)
        # The guard sends the report after answering; the proxy holds it there.
        assert await _wait_for(slow.arrived), "the outcome report was never sent"
        assert workspace.records("outcome") == []  # held: not recorded yet
        # A held report keeps no check waiting: the next write is checked and answered.
        with anyio.fail_after(WAIT):
            second = await agent.call_tool("note_write", {"text": "two"})
        assert not second.is_error, text(second)
        assert workspace.records("outcome") == []
        slow.go.set()
        with anyio.fail_after(WAIT):
            while len(workspace.records("outcome")) < 2:
                await anyio.sleep(0.02)
    checks = {c["check_id"] for c in workspace.records("check")}
    outcomes = workspace.records("outcome")
    assert {o["check_id"] for o in outcomes} == checks and len(checks) == 2
    assert {o["status"] for o in outcomes} == {"ok"}


async def test_an_outcome_held_when_the_guard_stops_is_kept_and_sent_later(
    workspace: Workspace, slow: SlowOutcomes
) -> None:
    params = workspace.guard("lab", lab(), CLAROS_URL=slow.url)
    async with Client(params) as agent:
        with anyio.fail_after(WAIT):
            answer = await agent.call_tool("note_write", {"text": "one"})
        assert not answer.is_error, text(answer)
        assert await _wait_for(slow.arrived)
    # The guard stopped within its bounded drain, the report still held: it went to the
    # spool. The proxy fails it now (not recorded); the next guard sends it from there.
    slow.drop = True
    slow.go.set()
    with anyio.fail_after(WAIT):
        async with Client(workspace.guard("lab", lab())):
            while len(workspace.records("outcome")) < 1:
                await anyio.sleep(0.02)
    [check] = workspace.records("check")
    [outcome] = workspace.records("outcome")
    assert outcome["check_id"] == check["check_id"] and outcome["status"] == "ok"
