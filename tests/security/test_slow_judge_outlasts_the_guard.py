"""Attack: make the check outlast the guard by keeping the judge busy.

Each rule without ``when`` is one judge call, and the calls ran one after the other, each
bounded only by its own timeout (5 s connect and 5 s read for Bedrock). A tool with three
judged rules could keep a check 15 s or more, past the guard's 10 s timeout: the guard
then counts Claros as unreachable and blocks the write as an outage, or, with
``--fail-open``, forwards it unchecked past every rule. An agent can slow a model judge
down (a long answer asked for in its own arguments, facts near the prompt limit), and a
judge that hangs is not the agent's to fix.

What holds now: the judged rules of one check are judged together, within one budget for
the check (``JUDGE_BUDGET_S``, under the guard's timeout); a rule with no verdict by then
is not judged and answers by its ``on_unknown``, as a timeout of one call does, and the
row says so. A judge that raises instead of answering is no verdict too, never a 500.

Through the real local server (tests/api/conftest.py), the judge a fake that waits on an
event the test holds (or raises).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

from claros.rules import decide as decide_module
from claros.rules.judge import Verdict
from claros.wiring import Services
from claros_guard.api import DEFAULT_TIMEOUT
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


class HangingJudge:
    """Answers only once the test lets it (bounded, so a failing test still ends)."""

    model_id = "hanging-judge"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self._lock = threading.Lock()

    def judge(
        self,
        rule: Mapping[str, Any],
        facts: Mapping[str, Any],
        context: Mapping[str, Any],
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> Verdict | None:
        with self._lock:
            self.calls += 1
        self.release.wait(60)
        return Verdict(False, "nothing unusual", model=self.model_id)


class SlowOnOneTool(HangingJudge):
    """Hangs on the rules of ``slow_tool`` (another agent's calls), answers the rest at once."""

    def judge(
        self,
        rule: Mapping[str, Any],
        facts: Mapping[str, Any],
        context: Mapping[str, Any],
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> Verdict | None:
        if "slow_tool" in rule["tools"]:
            return super().judge(rule, facts, context, arguments=arguments)
        return Verdict(True, "the reason mentions a chargeback", model=self.model_id)


class FailingJudge:
    model_id = "failing-judge"

    def judge(
        self,
        rule: Mapping[str, Any],
        facts: Mapping[str, Any],
        context: Mapping[str, Any],
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> Verdict | None:
        raise RuntimeError("the model client broke")


@pytest.fixture
def hanging(services: Services, monkeypatch: pytest.MonkeyPatch) -> Iterator[HangingJudge]:
    # raising=False: before the fix there was no budget to set, and the check hung.
    monkeypatch.setattr(decide_module, "JUDGE_BUDGET_S", 0.5, raising=False)
    judge = HangingJudge()
    services.judge = judge
    try:
        yield judge
    finally:
        judge.release.set()
        services.judge = None


def _three_judged_rules(http: httpx.Client, keys: Keys) -> None:
    for i in range(3):
        put_rule(http, keys.admin, id=f"judged-{i}", response="stop", when=None,
                 title=f"Refund reasonable for the customer ({i})")  # fmt: skip


@SQLITE
def test_a_hanging_judge_does_not_hold_the_check_past_its_budget(
    http: httpx.Client, keys: Keys, services: Services, hanging: HangingJudge
) -> None:
    _three_judged_rules(http, keys)
    # The guard waits DEFAULT_TIMEOUT (10 s) for a check; this one must answer well before
    # (the judges hang until the test ends).
    answer = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent),
                       timeout=DEFAULT_TIMEOUT / 2)  # fmt: skip
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["result"] == "stop"
    assert body["not_judged"] == ["judged-0", "judged-1", "judged-2"]
    # Judged together, not one after another.
    assert hanging.calls == 3
    row = services.store.get_record(WORKSPACE, "check", body["check_id"])
    assert row is not None
    for entry in row["rules"]:
        assert entry["judged"] is False and entry["on_unknown"] == "fire"
        assert "within 0.5 s" in entry["note"], entry["note"]


def test_the_budget_is_under_the_guards_timeout() -> None:
    # Room left for the rest of the check (reads, the ledger write) within the guard's wait.
    budget = getattr(decide_module, "JUDGE_BUDGET_S", None)
    assert budget is not None, "no budget for the judge calls of one check"
    assert budget + 2 <= DEFAULT_TIMEOUT


@SQLITE
def test_a_judge_that_raises_is_no_verdict_not_a_500(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin, id="judged", response="ask", when=None,
             title="Refund reasonable for the customer")  # fmt: skip
    services.judge = FailingJudge()
    try:
        answer = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
    finally:
        services.judge = None
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["result"] == "ask" and body["not_judged"] == ["judged"]
    assert body["rules"][0]["note"] == "not judged: the judge failed (RuntimeError)"


@SQLITE
def test_slow_judge_calls_of_other_checks_do_not_leave_this_one_unjudged(
    http: httpx.Client, keys: Keys, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One check of a tool with many judged rules, whose calls hang (a slow model, or an
    # agent asking it for long answers): they must not take the judge from other checks,
    # where a rule not judged in time would answer by its on_unknown (allow, here).
    monkeypatch.setattr(decide_module, "JUDGE_BUDGET_S", 1.0)
    judge = SlowOnOneTool()
    services.judge = judge
    try:
        for i in range(decide_module.JUDGE_PARALLEL):
            put_rule(http, keys.admin, id=f"slow-{i:02d}", response="stop", when=None,
                     tools=["slow_tool"], title=f"Reasonable ({i})")  # fmt: skip
        put_rule(http, keys.admin, id="dispute", response="stop", when=None,
                 on_unknown="allow", title="Refunds on a chargeback")  # fmt: skip
        slow = http.post("/v1/check", json=check_body(tool="slow_tool"),
                         headers=bearer(keys.agent), timeout=DEFAULT_TIMEOUT / 2)  # fmt: skip
        assert slow.status_code == 200 and slow.json()["result"] == "stop", slow.text
        assert judge.calls == decide_module.JUDGE_PARALLEL  # all still hanging
        refund = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent),
                           timeout=DEFAULT_TIMEOUT / 2)  # fmt: skip
        assert refund.status_code == 200, refund.text
        body = refund.json()
        assert body["result"] == "stop" and not body.get("not_judged"), body["rules"]
    finally:
        judge.release.set()
        services.judge = None
