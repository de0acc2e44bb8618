"""Attacks on rules by spelling and by missing facts (THREATS.md, the agent): an agent that
writes an amount the expression language cannot read, or leaves out (or nulls, or
mistypes) a fact a rule needs, or makes a read tool answer something that is not a record,
must not get its write past the rule.

The checks run through the real local server on both stores (tests/api/conftest.py) or
through the real guard wrapping a real MCP SDK server (tests/guard/conftest.py).
"""

# The fixtures of tests/api and tests/guard are imported by name; tests take them as
# parameters of the same name.
# ruff: noqa: F811

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from claros.wiring import Services
from tests.api.conftest import (  # noqa: F401 - fixtures
    WORKSPACE,
    Keys,
    bearer,
    check_body,
    put_rule,
)
from tests.guard.conftest import Workspace, anyio_backend, claros, workspace  # noqa: F401
from tests.guard.test_examples import text, tools_called, wait_registered

PLAIN_TEXT_SHOP = Path(__file__).resolve().parent / "servers" / "plain_text_shop.py"


def _check(http: httpx.Client, key: str, **arguments: object) -> dict[str, Any]:
    response = http.post("/v1/check", json=check_body(arguments=arguments), headers=bearer(key))
    assert response.status_code == 200, response.text
    return dict(response.json())


def _stop_over_500(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="big", response="stop", when="amount > 500",
             message="Refunds over 500 are stopped")  # fmt: skip


# --- money written as text --------------------------------------------------------------


def test_amount_written_with_a_dollar_sign_does_not_slip_past_a_rule(
    http: httpx.Client, keys: Keys
) -> None:
    _stop_over_500(http, keys)
    assert _check(http, keys.agent, amount="$600.00")["result"] == "stop"
    assert _check(http, keys.agent, amount="$400.00")["result"] == "allow"


def test_amount_written_as_500_EUR_or_EUR_500_does_not_slip_past_a_rule(
    http: httpx.Client, keys: Keys
) -> None:
    _stop_over_500(http, keys)
    for spelled in ("900 EUR", "EUR 900", "900EUR", "€900", " 900", "900 "):
        assert _check(http, keys.agent, amount=spelled)["result"] == "stop", spelled
    assert _check(http, keys.agent, amount="-900 EUR")["result"] == "allow"


def test_european_thousands_do_not_slip_past_a_rule(http: httpx.Client, keys: Keys) -> None:
    _stop_over_500(http, keys)
    for spelled in ("1.200,50 EUR", "EUR 1.200,50", "1 200,50 €", "CHF 1'200.50"):
        assert _check(http, keys.agent, amount=spelled)["result"] == "stop", spelled


def test_ambiguous_thousands_do_not_slip_past_a_rule(http: httpx.Client, keys: Keys) -> None:
    # "1.000" is 1 to a machine and 1000 to a German reader: Claros does not guess, so the
    # rule cannot be decided and fires (its on_unknown).
    _stop_over_500(http, keys)
    for spelled in ("1.000", "1,000", "1.000 EUR"):
        answer = _check(http, keys.agent, amount=spelled)
        assert answer["result"] == "stop", spelled
        assert answer["rules"][0]["unknown"] == ["amount"]


def test_exponent_does_not_slip_past_a_rule(http: httpx.Client, keys: Keys) -> None:
    _stop_over_500(http, keys)
    assert _check(http, keys.agent, amount="5e3")["result"] == "stop"
    assert _check(http, keys.agent, amount="6E2")["result"] == "stop"
    assert _check(http, keys.agent, amount="4e2")["result"] == "allow"


def test_arithmetic_on_money_strings_does_not_slip_past_a_rule(
    http: httpx.Client, keys: Keys
) -> None:
    put_rule(http, keys.admin, id="half", response="ask", when="amount > order_total / 2")
    assert _check(http, keys.agent, amount="$120", order_total="$200.00")["result"] == "ask"
    assert _check(http, keys.agent, amount="$90", order_total="$200.00")["result"] == "allow"


def test_unreadable_or_huge_numbers_fire_the_rule_and_never_500(
    http: httpx.Client, keys: Keys
) -> None:
    _stop_over_500(http, keys)
    for spelled in ("NaN", "Infinity", "-Infinity", "1e999999", "9" * 10_000, "1" * 65):
        answer = _check(http, keys.agent, amount=spelled)
        assert answer["result"] == "stop", spelled[:20]
        assert answer["rules"][0]["unknown"] == ["amount"], spelled[:20]


def test_a_word_stays_a_word(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="acme", response="stop", when='customer == "Acme"')
    assert _check(http, keys.agent, customer="Acme")["result"] == "stop"
    assert _check(http, keys.agent, customer="Other")["result"] == "allow"


# --- facts missing, null or of the wrong type -------------------------------------------


def _half_rule(http: httpx.Client, keys: Keys, **overrides: object) -> None:
    put_rule(http, keys.admin, **overrides)  # amount > order_total / 2, ask


def test_missing_field_fires_the_rule(http: httpx.Client, keys: Keys, services: Services) -> None:
    _half_rule(http, keys)
    answer = _check(http, keys.agent, amount=600)
    assert answer["result"] == "ask" and answer["allowed"] is False
    [applied] = answer["rules"]
    # The rule spoke (matched), because its when could not be decided (unknown, on_unknown).
    assert applied["matched"] is True
    assert applied["unknown"] == ["order_total"] and applied["on_unknown"] == "fire"
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None
    assert row["rules"][0]["unknown"] == ["order_total"]
    assert row["rules"][0]["on_unknown"] == "fire"


def test_null_field_fires_the_rule(http: httpx.Client, keys: Keys) -> None:
    _half_rule(http, keys)
    answer = _check(http, keys.agent, amount=600, order_total=None)
    assert answer["result"] == "ask"
    assert answer["rules"][0]["unknown"] == ["order_total"]


def test_wrong_type_field_fires_the_rule(http: httpx.Client, keys: Keys) -> None:
    _half_rule(http, keys)
    for wrong in ("lots", True, [200], {"value": 200}):
        answer = _check(http, keys.agent, amount=600, order_total=wrong)
        assert answer["result"] == "ask", wrong
        assert answer["rules"][0]["unknown"] == ["order_total"], wrong


def test_division_by_zero_fires_the_rule(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="avg", response="stop", when="amount / count > 10")
    answer = _check(http, keys.agent, amount=600, count=0)
    assert answer["result"] == "stop"
    assert answer["rules"][0]["unknown"] == ["count"]


def test_negation_of_a_missing_fact_fires_the_rule(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="neg", response="stop", when="not (approved == true)")
    assert _check(http, keys.agent, approved=True)["result"] == "allow"
    assert _check(http, keys.agent, approved=False)["result"] == "stop"
    assert _check(http, keys.agent)["result"] == "stop"


def test_a_decided_when_ignores_what_it_does_not_need(http: httpx.Client, keys: Keys) -> None:
    # false and unknown is false; true or unknown is true: nothing is unknown then.
    put_rule(http, keys.admin, id="and", response="stop", when="amount > 500 and tier != 'gold'")
    put_rule(http, keys.admin, id="or", response="ask", when="amount > 100 or tier == 'new'")
    small = _check(http, keys.agent, amount=50)
    by_id = {r["id"]: r for r in small["rules"]}
    assert by_id["and"]["matched"] is False and "unknown" not in by_id["and"]
    assert by_id["or"]["matched"] is True and by_id["or"]["unknown"] == ["tier"]
    assert small["result"] == "ask"
    big = _check(http, keys.agent, amount=200)
    by_id = {r["id"]: r for r in big["rules"]}
    assert by_id["or"]["matched"] is True and "unknown" not in by_id["or"]
    assert by_id["and"]["matched"] is False and "unknown" not in by_id["and"]


def test_on_unknown_ask_and_allow_are_recorded(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="s", response="stop", when="amount > limit", on_unknown="ask")
    answer = _check(http, keys.agent, amount=600)
    assert answer["result"] == "ask"
    assert answer["rules"][0]["on_unknown"] == "ask" and answer["rules"][0]["unknown"] == ["limit"]
    assert answer["rules"][0]["answered"] == "ask"
    put_rule(http, keys.admin, id="s", response="stop", when="amount > limit", on_unknown="allow")
    answer = _check(http, keys.agent, amount=600)
    assert answer["result"] == "allow" and answer["rules"][0]["matched"] is False
    assert answer["rules"][0]["on_unknown"] == "allow"
    # Decided: on_unknown plays no part and is not recorded.
    answer = _check(http, keys.agent, amount=600, limit=100)
    assert answer["result"] == "stop" and "on_unknown" not in answer["rules"][0]


def test_a_bad_on_unknown_is_refused(http: httpx.Client, keys: Keys) -> None:
    body = {"rule": {"id": "r", "workflow_id": "w", "app": "shop", "tools": ["refund_create"],
                     "title": "t", "when": "amount > 1", "response": "stop",
                     "on_unknown": "ignore"}, "made_by": "manual"}  # fmt: skip
    response = http.put("/api/rules/r", json=body, headers=bearer(keys.admin))
    assert response.status_code == 400, response.text
    assert "on_unknown" in response.text


# --- a read tool that answers something other than a record -----------------------------


def _plain_text_shop() -> list[str]:
    return [sys.executable, str(PLAIN_TEXT_SHOP)]


FETCH_ORDER = {
    "app": "shop",
    "tool": "refund_create",
    "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"},
}
HALF_RULE = {"id": "half", "app": "shop", "tools": ["refund_create"], "response": "stop",
             "when": "amount > order.total / 2", "on_unknown": "allow"}  # fmt: skip


@pytest.mark.anyio
async def test_plain_text_record_blocks_the_write(workspace: Workspace) -> None:
    # on_unknown allow: only the guard's refusal of the read stands between the agent and
    # the write (a rule that fires on unknown would hide the hole).
    ws = workspace
    params = ws.guard("shop", _plain_text_shop(), "--read", "order_read", "--read", "order_count")
    async with Client(params) as agent:
        await wait_registered(ws, "shop")
        ws.push(rules=[HALF_RULE], mappings=[FETCH_ORDER])
        write = await agent.call_tool("refund_create", {"order": "1187", "amount": 150})
    assert write.is_error, text(write)
    assert "order_read" in text(write) and "not a record" in text(write)
    assert tools_called(ws) == ["order_read"]
    assert ws.records("check") == []


@pytest.mark.anyio
async def test_number_record_blocks_the_write(workspace: Workspace) -> None:
    ws = workspace
    params = ws.guard("shop", _plain_text_shop(), "--read", "order_read", "--read", "order_count")
    mapping = {**FETCH_ORDER, "fetch": {"tool": "order_count", "arguments": {"customer": "C-7"},
                                        "into": "order"}}  # fmt: skip
    async with Client(params) as agent:
        await wait_registered(ws, "shop")
        ws.push(rules=[HALF_RULE], mappings=[mapping])
        write = await agent.call_tool("refund_create", {"order": "1187", "amount": 150})
    assert write.is_error and "order_count" in text(write) and "not a record" in text(write)
    assert tools_called(ws) == ["order_count"]


@pytest.mark.anyio
async def test_plain_text_record_with_fail_open_forwards_as_unchecked(
    workspace: Workspace,
) -> None:
    import anyio

    ws = workspace
    params = ws.guard("shop", _plain_text_shop(), "--read", "order_read", "--fail-open")
    async with Client(params) as agent:
        await wait_registered(ws, "shop")
        ws.push(rules=[HALF_RULE], mappings=[FETCH_ORDER])
        write = await agent.call_tool("refund_create", {"order": "1187", "amount": 150})
        with anyio.fail_after(10):
            while not ws.records("unchecked"):
                await anyio.sleep(0.05)
    assert not write.is_error
    assert tools_called(ws) == ["order_read", "refund_create"]
    assert "not a record" in ws.records("unchecked")[0]["reason"]


def test_server_refuses_a_wrapped_scalar_as_a_record(http: httpx.Client, keys: Keys) -> None:
    """Claros itself does not take ``{"result": <not an object>}`` (the SDK's wrapping of a
    plain answer) as a fetched record, whatever guard sends it."""
    tools = [{"name": "order_read", "read": True}, {"name": "refund_create", "read": False}]
    registered = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent))
    assert registered.status_code == 200, registered.text
    mapping = http.put("/api/mappings/shop/refund_create", json={"mapping": FETCH_ORDER},
                       headers=bearer(keys.admin))  # fmt: skip
    assert mapping.status_code == 200, mapping.text
    for record in ({"result": "Order 1187: total 200"}, {"result": 3}, {"result": [1, 2]}):
        body = check_body(arguments={"order": "1187", "amount": 150}, fetched={"fetch": record})
        response = http.post("/v1/check", json=body, headers=bearer(keys.agent))
        assert response.status_code == 400, response.text
        assert "not a record" in response.json()["message"]
