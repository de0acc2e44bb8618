"""Reports go together: each its own request under its own Idempotency-Key, pipelined in
one write on one kept connection (claros_guard.keepalive.pipeline,
HttpClarosApi.send_reports, Reporter's ``coalesce``). Against scripted sockets, the real
local server, and a real guard process."""

from __future__ import annotations

import asyncio

import anyio
import httpx
import pytest
from mcp import Client

from claros_guard.api import HttpClarosApi, outcome_report
from claros_guard.errors import ClarosRefusedError, ClarosUnavailableError
from claros_guard.keepalive import Answer, KeepAlivePool, Outgoing
from claros_guard.reporter import Reporter
from claros_guard.spool import Spool
from tests.guard.conftest import Workspace, lab
from tests.guard.scripted_http import ok
from tests.guard.test_examples import text

pytestmark = pytest.mark.anyio

WAIT = 20.0  # seconds any one step may take before the test fails (never a sync point)


def _pool(url: str) -> KeepAlivePool:
    return KeepAlivePool(url, {"Authorization": "Bearer ck_test"}, timeout=5.0,
                         connect_timeout=5.0)  # fmt: skip


def _three() -> list[Outgoing]:
    return [Outgoing("POST", f"/v1/r/{n}", {"n": n}, {"Idempotency-Key": f"k{n}"})
            for n in range(3)]  # fmt: skip


async def test_a_pipeline_is_one_connection_and_answers_in_order(scripted) -> None:  # type: ignore[no-untyped-def]
    async def numbered(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(ok(b'{"n":%d}' % (len(fake.requests) - 1)))
        return True

    fake = await scripted(numbered)
    client = _pool(fake.url)
    try:
        answers = await client.pipeline(_three())
        again = await client.request("GET", "/v1/after")  # the connection is kept
    finally:
        await client.aclose()
    assert [a.json() for a in answers if isinstance(a, Answer)] == [
        {"n": 0}, {"n": 1}, {"n": 2}]  # fmt: skip
    assert again.status_code == 200 and fake.connections == 1
    assert [r.split(b" ")[1] for r in fake.requests] == [
        b"/v1/r/0", b"/v1/r/1", b"/v1/r/2", b"/v1/after"]  # fmt: skip
    assert b"Idempotency-Key: k1" in fake.requests[1]


async def test_what_a_closing_server_left_unanswered_goes_on_a_new_connection(scripted) -> None:  # type: ignore[no-untyped-def]
    async def one_per_connection(r: asyncio.StreamReader, w: asyncio.StreamWriter,
                                 n: int) -> bool:  # fmt: skip
        w.write(ok(extra=b"Connection: close\r\n"))
        return False

    fake = await scripted(one_per_connection)
    client = _pool(fake.url)
    try:
        answers = await client.pipeline(_three())
    finally:
        await client.aclose()
    assert [a.status_code for a in answers if isinstance(a, Answer)] == [200] * 3
    assert fake.connections == 3


async def test_an_answer_cut_off_fails_it_and_the_rest(scripted) -> None:  # type: ignore[no-untyped-def]
    async def cut_second(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        if len(fake.requests) == 1:
            w.write(ok())
            return True
        w.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"half')
        return False

    fake = await scripted(cut_second)
    client = _pool(fake.url)
    try:
        answers = await client.pipeline(_three())
    finally:
        await client.aclose()
    assert isinstance(answers[0], Answer) and answers[0].status_code == 200
    assert all(isinstance(a, httpx.RemoteProtocolError) for a in answers[1:])
    assert fake.connections == 1  # not sent again: it may have run


async def test_a_request_that_cannot_be_framed_fails_alone(scripted) -> None:  # type: ignore[no-untyped-def]
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(ok())
        return True

    fake = await scripted(answer)
    client = _pool(fake.url)
    bad = Outgoing("POST", "/v1/r/x", {}, {"Idempotency-Key": "line\r\nbreak"})
    try:
        answers = await client.pipeline([_three()[0], bad, _three()[2]])
    finally:
        await client.aclose()
    assert isinstance(answers[1], httpx.LocalProtocolError)
    assert [a.status_code for a in (answers[0], answers[2]) if isinstance(a, Answer)] == [
        200, 200]  # fmt: skip
    assert len(fake.requests) == 2


async def test_nothing_listening_fails_every_request() -> None:
    with anyio.fail_after(WAIT):
        api = HttpClarosApi("http://127.0.0.1:9", "ck_test")
        try:
            results = await api.send_reports([outcome_report(f"chk_{n}", "ok", None, "outcome")
                                              for n in range(2)])  # fmt: skip
        finally:
            await api.aclose()
    assert all(isinstance(r, ClarosUnavailableError) for r in results)


async def _check(api: HttpClarosApi, n: int) -> str:
    body = {"app": "lab", "tool": "note_write", "arguments": {"text": str(n)},
            "agent": {"name": "test-agent", "call_id": f"call-{n}"}}  # fmt: skip
    answer = await api.check(body)
    return str(answer["check_id"])


async def test_the_server_takes_a_pipelined_run_of_reports(
    workspace: Workspace, opened: list[object]
) -> None:
    """Against the real local server: each report of the run is recorded once, a refused
    one (an unknown check) is answered alone, and it all rides one connection."""
    api = HttpClarosApi(workspace.claros.url, workspace.agent)
    try:
        ids = [await _check(api, n) for n in range(5)]
        reports = [outcome_report(i, "ok", None, "outcome") for i in ids]
        unknown = outcome_report("chk_000000000000nope", "ok", None, "outcome")
        results = await api.send_reports([*reports[:2], unknown, *reports[2:]])
        again = await api.send_reports(reports[:1])  # a report sent again: the same answer
    finally:
        await api.aclose()
    assert results[:2] == [None, None] and results[3:] == [None] * 3 and again == [None]
    assert isinstance(results[2], ClarosRefusedError) and results[2].status == 404
    assert sorted(o["check_id"] for o in workspace.records("outcome")) == sorted(ids)
    assert len(opened) == 1, opened


async def test_the_reporter_sends_what_waits_behind_a_check_as_one_run(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    runs: list[int] = []
    api = HttpClarosApi(workspace.claros.url, workspace.agent)
    send_reports = api.send_reports

    async def counted(reports):  # type: ignore[no-untyped-def]
        runs.append(len(reports))
        return await send_reports(reports)

    monkeypatch.setattr(api, "send_reports", counted)
    reporter = Reporter(api, Spool(tmp_path / "state", workspace.agent), idle=0.0,
                        max_delay=WAIT, coalesce=4)  # fmt: skip
    try:
        ids = [await _check(api, n) for n in range(6)]
        async with anyio.create_task_group() as tg:
            await tg.start(reporter.run)
            with reporter.busy():  # a call in flight: the reports wait behind it
                for check_id in ids:
                    reporter.submit(outcome_report(check_id, "ok", None, "outcome"))
                await anyio.sleep(0)
                assert runs == []
            with anyio.fail_after(WAIT):
                while reporter.sent < 6:
                    await anyio.sleep(0.01)
            await reporter.drain(1.0)
    finally:
        await api.aclose()
    assert runs == [4, 2]  # at most ``coalesce`` at a time
    assert sorted(o["check_id"] for o in workspace.records("outcome")) == sorted(ids)


async def test_a_guard_stopped_right_after_a_run_of_writes_loses_no_report(
    workspace: Workspace,
) -> None:
    """A real guard process: writes back to back, then the agent goes away at once. The
    guard drains its queue (bounded) before it exits: every write's outcome is recorded."""
    with anyio.fail_after(WAIT * 2):
        async with Client(workspace.guard("lab", lab())) as agent:
            for n in range(12):
                answer = await agent.call_tool("note_write", {"text": f"n{n}"})
                assert not answer.is_error, text(answer)
    checks = {c["check_id"] for c in workspace.records("check")}
    outcomes = workspace.records("outcome")
    assert len(checks) == 12 and {o["check_id"] for o in outcomes} == checks
    assert len(outcomes) == 12 and {o["status"] for o in outcomes} == {"ok"}
