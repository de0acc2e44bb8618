"""An overloaded Claros (503 with Retry-After: nothing was written): the guard asks again
within its retry budget, honouring Retry-After, then blocks the write with a clear message
(or forwards it with ``--fail-open``). Real HTTP servers, the real guard process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import anyio
import pytest
from mcp import Client

from claros_guard.api import HttpClarosApi
from claros_guard.errors import ClarosOverloadedError, ClarosUnavailableError
from claros_guard.needs import NeedResolver
from claros_guard.policy import Policy
from tests.guard.conftest import Workspace, lab
from tests.guard.http_fakes import JSON, Answer, HttpFake, Request, relay
from tests.guard.test_examples import text, tools_called
from tests.guard.test_policy import CALL, Reader

pytestmark = pytest.mark.anyio

BUSY = b'{"error":"unavailable","message":"the ledger is busy, retry: appends waited"}'
ALLOW = json.dumps({"allowed": True, "result": "allow", "check_id": "chk_1"}).encode()


class Busy(HttpFake):
    """Answers ``POST /v1/check`` 503 + ``Retry-After`` ``busy`` times, then passes it on
    to ``target`` (or allows it, with no target)."""

    def __init__(self, busy: int, retry_after: str | None = "0", target: str = "") -> None:
        self.busy = busy
        self.retry_after = retry_after
        self.target = target
        self.checks: list[float] = []
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.path == "/v1/check":
            self.checks.append(time.monotonic())
            if len(self.checks) <= self.busy:
                headers = dict(JSON)
                if self.retry_after is not None:
                    headers["Retry-After"] = self.retry_after
                return 503, headers, BUSY
            if not self.target:
                return 200, JSON, ALLOW
        return relay(self.target, request)


@pytest.fixture
def sleeps() -> Iterator[list[float]]:
    yield []


def _api(url: str, sleeps: list[float], **options: object) -> HttpClarosApi:
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return HttpClarosApi(url, "ck_test", sleep=sleep, **options)  # type: ignore[arg-type]


async def test_a_busy_claros_is_asked_again_after_retry_after(sleeps: list[float]) -> None:
    claros = Busy(2, retry_after="1")
    api = _api(claros.url, sleeps)
    try:
        answer = await api.check({"app": "a", "tool": "t", "arguments": {}})
    finally:
        await api.aclose()
        claros.stop()
    assert answer["result"] == "allow" and len(claros.checks) == 3
    # Each wait is Claros's Retry-After, with a little jitter above it, never below.
    assert len(sleeps) == 2 and all(1.0 <= s <= 1.25 for s in sleeps)


async def test_past_the_retry_budget_the_check_fails_saying_so(sleeps: list[float]) -> None:
    claros = Busy(100, retry_after="0")
    api = _api(claros.url, sleeps, retries=3)
    try:
        with pytest.raises(ClarosOverloadedError) as failed:
            await api.check({"app": "a", "tool": "t", "arguments": {}})
    finally:
        await api.aclose()
        claros.stop()
    assert len(claros.checks) == 4 and len(sleeps) == 3  # the first try and 3 retries
    message = str(failed.value)
    assert "overloaded (503): the ledger is busy" in message
    assert "asked 4 time(s)" in message and "retry budget (3 retries" in message
    assert isinstance(failed.value, ClarosUnavailableError)  # --fail-open may forward it


async def test_a_retry_after_beyond_the_budget_is_not_waited_for(sleeps: list[float]) -> None:
    claros = Busy(100, retry_after="120")
    api = _api(claros.url, sleeps, retry_budget_s=8.0)
    began = time.monotonic()
    try:
        with pytest.raises(ClarosOverloadedError, match="asked 1 time"):
            await api.check({"app": "a", "tool": "t", "arguments": {}})
    finally:
        await api.aclose()
        claros.stop()
    assert len(claros.checks) == 1 and sleeps == [] and time.monotonic() - began < 5


@pytest.mark.parametrize("retry_after", [None, "soon", "-1"])
async def test_a_503_without_a_usable_retry_after_is_not_retried(
    sleeps: list[float], retry_after: str | None
) -> None:
    # Without Retry-After a 503 may come from a gateway after Claros recorded the check.
    claros = Busy(100, retry_after=retry_after)
    api = _api(claros.url, sleeps)
    try:
        with pytest.raises(ClarosUnavailableError, match=r"failed \(503\)") as failed:
            await api.check({"app": "a", "tool": "t", "arguments": {}})
    finally:
        await api.aclose()
        claros.stop()
    assert not isinstance(failed.value, ClarosOverloadedError)
    assert len(claros.checks) == 1 and sleeps == []


async def test_the_real_budget_waits_for_real(sleeps: list[float]) -> None:
    claros = Busy(1, retry_after="0.2")
    api = HttpClarosApi(claros.url, "ck_test")  # anyio.sleep, the real clock
    try:
        with anyio.fail_after(10):
            answer = await api.check({"app": "a", "tool": "t", "arguments": {}})
    finally:
        await api.aclose()
        claros.stop()
    assert answer["result"] == "allow"
    assert claros.checks[1] - claros.checks[0] >= 0.2


async def test_the_policy_blocks_or_forwards_an_overloaded_check(sleeps: list[float]) -> None:
    claros = Busy(100)
    api = _api(claros.url, sleeps)
    try:
        blocked = await Policy(api, NeedResolver(Reader({}))).decide(CALL)
        forwarded = await Policy(api, NeedResolver(Reader({})), fail_open=True).decide(CALL)
    finally:
        await api.aclose()
        claros.stop()
    assert not blocked.forward and blocked.message is not None
    assert "overloaded (503)" in blocked.message and "The call was not run" in blocked.message
    assert forwarded.forward and forwarded.result == "unchecked"
    assert forwarded.unchecked is not None and "overloaded" in forwarded.unchecked


async def test_the_guard_rides_out_a_short_overload(workspace: Workspace) -> None:
    busy = Busy(2, retry_after="0", target=workspace.claros.url)
    try:
        async with Client(workspace.guard("lab", lab(), "--url", busy.url)) as agent:
            write = await agent.call_tool("note_write", {"text": "hi"})
    finally:
        busy.stop()
    assert not write.is_error, text(write)
    assert tools_called(workspace) == ["note_write"]
    assert len(busy.checks) == 3
    assert len(workspace.records("check")) == 1  # the 503s wrote nothing; one check


async def test_the_guard_blocks_a_long_overload_with_the_reason(workspace: Workspace) -> None:
    busy = Busy(100, retry_after="0", target=workspace.claros.url)
    try:
        async with Client(workspace.guard("lab", lab(), "--url", busy.url)) as agent:
            blocked = await agent.call_tool("note_write", {"text": "one"})
        params = workspace.guard("lab", lab(), "--url", busy.url, "--fail-open")
        async with Client(params) as agent:
            forwarded = await agent.call_tool("note_write", {"text": "two"})
    finally:
        busy.stop()
    assert blocked.is_error
    assert "overloaded (503): the ledger is busy" in text(blocked)
    assert "retry budget" in text(blocked) and "The call was not run" in text(blocked)
    assert not forwarded.is_error
    assert tools_called(workspace) == ["note_write"]
