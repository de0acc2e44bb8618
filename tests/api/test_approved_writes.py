"""A write asked, approved and then run is one write, on both stores, through the real
server: the guard's repeat with ``approval`` writes a second check row (it answers allow),
but coverage, near-misses, oversight, the monthly report, the AIUC-1 pack and Home count
the write once, while its outcome, reported against the repeat, still counts and shows."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
import pytest

from claros.auth import authenticate, create_key
from claros.checks import approved_repeat
from claros.web.views import agents_of
from claros.wiring import Services
from tests.api.conftest import PERSON, WORKSPACE, Keys, bearer, check_body, put_rule

HTML = {"accept": "text/html"}


@dataclass
class Flow:
    dana_web: str  # a second key of dana's: the agent key asked, so it cannot answer
    small: str  # check id: 10 of 100, allowed
    asked: str  # check id: 80 of 100, asked
    ask_id: str
    repeat: str  # check id: the same call repeated with the approval


def _check(http: httpx.Client, key: str, call_id: str, amount: int,
           approval: str | None = None) -> dict:  # fmt: skip
    agent = {"name": "claude-code", "call_id": call_id,
             "via": {"guard": "claros-guard", "version": "1"}}  # fmt: skip
    body = check_body(agent=agent, arguments={"amount": amount, "order_total": 100})
    if approval:
        body["approval"] = approval
    response = http.post("/v1/check", json=body, headers=bearer(key))
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture
def flow(http: httpx.Client, keys: Keys, services: Services) -> Flow:
    put_rule(http, keys.admin)  # refund-half: ask when amount > order_total / 2, owner dana
    dana_web = create_key(services.store, WORKSPACE, "person", person=PERSON)
    small = _check(http, keys.agent, "toolu_small", 10)
    assert small["result"] == "allow"
    asked = _check(http, keys.agent, "toolu_refund", 80)
    assert asked["result"] == "ask" and asked["severity"] == "medium"
    ask_id = asked["ask"]["ask_id"]
    answered = http.post(f"/api/asks/{ask_id}/answer", json={"decision": "approve"},
                         headers=bearer(dana_web))  # fmt: skip
    assert answered.status_code == 200, answered.text
    # The guard repeats the same call (same tool_use_id) with the approval, then runs it.
    repeat = _check(http, keys.agent, "toolu_refund", 80, approval=ask_id)
    assert repeat["result"] == "allow" and repeat["approval"]["ask_id"] == ask_id
    # Claude Code's PostToolUse reports by tool_use_id: it reaches the repeat's check.
    body = {"tool_use_id": "toolu_refund", "status": "ok", "summary": "refunded"}
    ran = http.post("/v1/outcomes", json=body, headers=bearer(keys.agent))
    assert ran.status_code == 201 and ran.json()["check_id"] == repeat["check_id"]
    return Flow(dana_web, small["check_id"], asked["check_id"], ask_id, repeat["check_id"])


def test_the_repeat_row_has_no_near_miss_fields(flow: Flow, services: Services) -> None:
    ask_row = services.store.get_record(WORKSPACE, "check", flow.asked)
    repeat_row = services.store.get_record(WORKSPACE, "check", flow.repeat)
    assert ask_row is not None and repeat_row is not None
    assert (ask_row["result"], ask_row["severity"], ask_row["amount"]) == ("ask", "medium", 100)
    assert (repeat_row["result"], repeat_row["decided"]) == ("allow", "ask")
    assert "severity" not in repeat_row and "amount" not in repeat_row
    assert repeat_row["approval"]["ask_id"] == flow.ask_id
    assert approved_repeat(repeat_row) and not approved_repeat(ask_row)
    outcome = services.store.get_record(WORKSPACE, "outcome", flow.repeat)
    assert outcome is not None and outcome["check_result"] == "allow"


def test_rows_from_before_the_fix_are_told_apart() -> None:
    # Repeats written earlier kept the ask's severity on an allow; their timeline docs had
    # no approval. No other row answers allow with a severity.
    assert approved_repeat({"result": "allow", "severity": "medium", "amount": 80})
    assert not approved_repeat({"result": "allow", "severity": None})
    assert not approved_repeat({"result": "ask", "severity": "medium"})
    assert approved_repeat({"result": "allow", "approval": {"ask_id": "ask_1"}})


def test_coverage_counts_the_write_once(http: httpx.Client, keys: Keys, flow: Flow) -> None:
    report = http.get("/api/coverage?days=1", headers=bearer(keys.admin)).json()
    [agent] = report["agents"]
    # Two writes (the small refund and the approved one), one outcome: the repeat's.
    assert (agent["agent"], agent["checked"], agent["unchecked"]) == ("claude-code", 2, 0)
    assert (agent["outcomes"], agent["ran_after_stop"], agent["coverage"]) == (1, 0, 1.0)


def test_oversight_does_not_count_the_repeat_as_let_through(
    http: httpx.Client, keys: Keys, flow: Flow
) -> None:
    missed = http.post(f"/api/checks/{flow.small}/override", headers=bearer(keys.admin),
                       json={"verdict": "missed", "rule_id": "refund-half"})  # fmt: skip
    assert missed.status_code == 201, missed.text
    rows = http.get("/api/evidence/oversight?days=1", headers=bearer(keys.admin)).json()
    [dana] = [r for r in rows["owners"] if r["owner"] == PERSON]
    # Let through by the rules: only the small refund (the repeat was asked, then approved).
    assert (dana["missed"], dana["let_through"], dana["miss_rate"]) == (1, 1, 1.0)
    assert dana["stops_and_asks"] == 1 and dana["approvals"] == 1


def test_report_and_pack_count_the_ask_and_the_repeat_apart(
    http: httpx.Client, keys: Keys, flow: Flow, services: Services
) -> None:
    row = services.store.get_record(WORKSPACE, "check", flow.asked)
    assert row is not None
    month = time.strftime("%Y-%m", time.gmtime(row["ts"] / 1000))
    got = http.get(f"/api/evidence/report?workflow_id=refunds&month={month}",
                   headers=bearer(keys.admin))  # fmt: skip
    assert got.status_code == 200, got.text
    report = got.json()["report"]
    by_result = {"allow": 1, "nudge": 0, "ask": 1, "stop": 0}
    assert report["checks"] == {"total": 2, "by_result": by_result, "approved_repeats": 1}
    near = report["near_misses"]
    assert near["total"] == 1 and near["by_severity"] == {"high": 0, "medium": 1, "low": 0}
    # The largest money-like argument of the ask (order_total), once.
    assert near["amounts_by_currency"] == {"unknown": "100"}
    assert [n["check_id"] for n in near["latest"]] == [flow.asked]
    assert report["approvals"]["by_decision"] == {"approve": 1}
    [agent] = report["coverage"]
    assert (agent["checked"], agent["outcomes"], agent["coverage"]) == (2, 1, 1.0)
    page = http.get(f"/api/evidence/report?workflow_id=refunds&month={month}&format=html",
                    headers=bearer(keys.admin)).text  # fmt: skip
    assert "2 writes checked" in page and "1 approved asks were repeated" in page

    pack = http.get("/api/evidence/aiuc1?days=1", headers=bearer(keys.admin)).json()["controls"]
    assert pack["D003"]["holds"]["checks_by_result"] == by_result
    assert pack["C009"]["holds"]["near_misses"]["by_severity"]["medium"] == 1
    assert [s["check_id"] for s in pack["C009"]["samples"]["near_misses"]] == [flow.asked]
    assert pack["E015"]["holds"]["checks"] == 2
    [b006] = pack["B006"]["holds"]["coverage_by_agent"]
    assert (b006["checked"], b006["outcomes"]) == (2, 1)


def test_home_counts_the_write_once_and_shows_its_outcome(
    http: httpx.Client, flow: Flow, services: Services
) -> None:
    dana = authenticate(services.store, f"Bearer {flow.dana_web}")
    [agent] = agents_of(services.store, dana)
    assert agent.counts == {"allow": 1, "ask": 1}
    assert (agent.checked, agent.outcomes, agent.coverage) == (2, 1, 1.0)
    # The flagged ask shows the write's approval and outcome, taken from its repeat.
    [flagged] = agent.flagged
    assert flagged["check_id"] == flow.asked and flagged["outcome"]["status"] == "ok"
    assert flagged["approval"]["decided_by"] == PERSON

    home = http.get("/app", headers={**HTML, **bearer(flow.dana_web)})
    assert home.status_code == 200, home.text
    agents = home.text.split('id="agents"')[1].split("</section>")[0]
    assert "2 checked · 0 ran unchecked" in agents and "100%" in agents
    assert f"approved by {PERSON}" in agents and "ran: ok" in agents and "refunded" in agents
    timeline = home.text.split('id="timeline"')[1].split("</section>")[0]
    rows = timeline.split("<tr>")[2:]  # past the header: newest first
    assert len(rows) == 3
    assert "ran: ok" in rows[0] and f"approved by {PERSON}" in rows[0]
    assert "ran:" not in rows[1] and "ran:" not in rows[2]
