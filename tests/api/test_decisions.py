"""How checks decide, over HTTP on both stores."""

from __future__ import annotations

from decimal import Decimal

import httpx

from claros.rules.judges import KEYWORD_JUDGE_ID, KeywordJudge
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule


def _check(http: httpx.Client, key: str, **arguments: object) -> dict:
    response = http.post("/v1/check", json=check_body(arguments=arguments), headers=bearer(key))
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_no_rule_allows(http: httpx.Client, keys: Keys) -> None:
    answer = _check(http, keys.agent, amount=10)
    assert answer["result"] == "allow" and answer["reason"] == "no rule applied"
    assert "severity" not in answer


def test_stop_names_rule_version_and_near_miss(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    state = put_rule(http, keys.admin, id="big", response="stop", when="amount > 1000",
                     message="Too big")  # fmt: skip
    answer = _check(http, keys.agent, refund_amount="$1,200.50", amount=1200)
    assert answer["result"] == "stop" and answer["allowed"] is False
    assert answer["severity"] == "high"
    assert answer["messages"] == [{"rule_id": "big", "message": "Too big"}]
    [applied] = answer["rules"]
    assert applied["id"] == "big" and applied["matched"] is True
    assert (applied["version"], applied["hash"]) == (1, state["hash"])
    assert applied["confirm"] == state["confirm"]
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None
    assert row["amount"] == Decimal("1200.5") and row["currency"] == "USD"
    assert row["severity"] == "high" and row["rules"][0]["matched"] is True


def test_strongest_response_wins(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="n", response="nudge", when="amount > 1", message="n")
    put_rule(http, keys.admin, id="a", response="ask", when="amount > 1", message="a")
    put_rule(http, keys.admin, id="s", response="stop", when="amount > 100", message="s")
    assert _check(http, keys.agent, amount=5)["result"] == "ask"
    big = _check(http, keys.agent, amount=500)
    assert big["result"] == "stop" and [m["rule_id"] for m in big["messages"]] == ["s"]
    assert [r["id"] for r in big["rules"]] == ["a", "n", "s"]
    small = _check(http, keys.agent, amount=1)
    assert small["result"] == "allow" and all(r["matched"] is False for r in small["rules"])


def test_nudge_is_allowed_with_its_message(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="n", response="nudge", when="amount > 1", message="Check twice")
    answer = _check(http, keys.agent, amount=5, currency="EUR")
    assert answer["allowed"] is True and answer["result"] == "nudge"
    assert answer["severity"] == "low" and answer["currency"] == "EUR"
    assert answer["messages"] == [{"rule_id": "n", "message": "Check twice"}]


def test_rules_of_other_tools_do_not_apply(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="other", tools=["order_cancel"], response="stop",
             when="amount > 0")  # fmt: skip
    answer = _check(http, keys.agent, amount=5)
    assert answer["result"] == "allow" and answer["rules"] == []


def test_missing_fact_is_recorded_as_unknown(http: httpx.Client, keys: Keys) -> None:
    # A rule that cannot be decided fires by default (on_unknown: fire); unknown never
    # silently means allow (tests/security/test_rules_fail_closed.py).
    put_rule(http, keys.admin, id="half", response="stop", when="amount > order_total / 2")
    answer = _check(http, keys.agent, amount=5)
    assert answer["result"] == "stop"
    assert answer["rules"][0]["matched"] is True
    assert answer["rules"][0]["unknown"] == ["order_total"]
    assert answer["rules"][0]["on_unknown"] == "fire"


def test_rule_without_when_and_no_judge_answers_by_on_unknown(
    http: httpx.Client, keys: Keys
) -> None:
    put_rule(http, keys.admin, id="judge-me", response="stop", when=None)
    answer = _check(http, keys.agent, amount=5)
    assert answer["result"] == "stop"  # on_unknown defaults to fire: never a silent allow
    assert answer["not_judged"] == ["judge-me"]
    entry = answer["rules"][0]
    assert entry["judged"] is False and entry["matched"] is True
    assert entry["on_unknown"] == "fire" and entry["note"] == "not judged: no judge is configured"


def test_rule_without_when_may_allow_when_no_judge_decides(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="judge-me", response="stop", when=None, on_unknown="allow")
    answer = _check(http, keys.agent, amount=5)
    assert answer["result"] == "allow" and answer["not_judged"] == ["judge-me"]
    assert answer["rules"][0]["matched"] is False and answer["rules"][0]["on_unknown"] == "allow"


def test_keyword_judge_decides_a_rule_without_when(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    services.judge = KeywordJudge()
    put_rule(http, keys.admin, id="fraud", response="stop", when=None,
             title='Refunds on orders marked "fraud"')  # fmt: skip
    answer = _check(http, keys.agent, amount=5, reason="Customer reported FRAUD")
    entry = answer["rules"][0]
    assert answer["result"] == "stop" and not answer.get("not_judged")
    assert entry["judged"] is True and entry["judge"] == KEYWORD_JUDGE_ID
    assert entry["note"] == 'keyword judge (not a model): "fraud" found in facts.reason'
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None and row["rules"][0]["judge"] == KEYWORD_JUDGE_ID
    assert _check(http, keys.agent, amount=5, reason="late")["result"] == "allow"


def test_shadow_rule_is_recorded_but_changes_nothing(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin, id="trial", response="stop", when="amount > 1", mode="shadow")
    answer = _check(http, keys.agent, amount=5)
    assert answer["result"] == "allow" and answer["allowed"] is True
    assert answer["shadow_result"] == "stop"
    assert answer["rules"][0]["mode"] == "shadow" and answer["rules"][0]["matched"] is True
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None and row["shadow_result"] == "stop" and "severity" not in row


def test_closed_rule_no_longer_applies(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="s", response="stop", when="amount > 1")
    assert _check(http, keys.agent, amount=5)["result"] == "stop"
    http.post("/api/rules/s/close", headers=bearer(keys.admin))
    assert _check(http, keys.agent, amount=5)["result"] == "allow"
