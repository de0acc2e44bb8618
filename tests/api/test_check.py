"""POST /v1/check on both stores: the row it logs, who it acts for, and bad input."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from claros.auth import create_key
from claros.ledger import verify_entries
from claros.wiring import Services
from tests.api.conftest import PERSON, WORKSPACE, Keys, bearer, check_body


def _head_seq(services: Services) -> int:
    head = services.store.head(WORKSPACE)
    return head.seq if head else 0


def test_check_logs_row_with_entry(http: httpx.Client, keys: Keys, services: Services) -> None:
    response = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["allowed"] is True and answer["result"] == "allow"
    assert answer["check_id"].startswith("chk_")
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None
    assert row["app"] == "shop" and row["tool"] == "refund_create"
    assert row["arguments"] == {"order": "1187", "amount": "$120.00"}
    assert row["agent"]["via"] == {"guard": "claros-guard", "version": "0.1.0"}
    assert row["on_behalf_of"] == PERSON and row["obo_source"] == "agent_key"
    assert row["reason"] == "no rule applied"
    report = verify_entries(
        WORKSPACE, services.store.entries_with_records(WORKSPACE), compare_records=True
    )
    assert report.ok and report.entries == 1


def test_agent_cannot_claim_someone_else(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    body = check_body(agent={"name": "x", "on_behalf_of": "ceo@acme.test"})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()
    assert answer["on_behalf_of"] == PERSON  # from the key, not from what the agent says


def test_service_key_names_a_member(http: httpx.Client, keys: Keys) -> None:
    body = check_body(agent={"name": "x", "on_behalf_of": PERSON})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.service)).json()
    assert (answer["on_behalf_of"], answer["obo_source"]) == (PERSON, "service_key")
    nobody = http.post("/v1/check", json=check_body(), headers=bearer(keys.service)).json()
    assert nobody["on_behalf_of"] is None and nobody["obo_source"] is None


def test_service_key_cannot_name_a_stranger(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    body = check_body(agent={"name": "x", "on_behalf_of": "stranger@evil.test"})
    response = http.post("/v1/check", json=body, headers=bearer(keys.service))
    assert response.status_code == 403
    assert "not a member" in response.json()["message"]
    assert _head_seq(services) == 0


def test_keys_are_per_workspace(http: httpx.Client, keys: Keys, services: Services) -> None:
    http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
    other = create_key(services.store, "other", "agent", person="eve@other.test")
    lines = http.get("/v1/ledger/entries", headers=bearer(other)).text
    assert lines == ""


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth - 1):
        value = {"a": value}
    return value


BAD_BODIES: list[tuple[str, bytes, int, str]] = [
    ("malformed", b'{"app": "shop"', 400, "malformed JSON"),
    ("not-json", b"app=shop", 400, "malformed JSON"),
    ("empty", b"", 400, "empty"),
    ("array", b"[1, 2]", 400, "must be a JSON object"),
    ("wrong-type", json.dumps(check_body(arguments=[1])).encode(), 400, "arguments"),
    ("app-type", json.dumps(check_body(app=12)).encode(), 400, "app"),
    ("bad-app-name", json.dumps(check_body(app="a b")).encode(), 400, "app"),
    ("unknown-field", json.dumps(check_body(colour="red")).encode(), 400, "colour"),
    ("unknown-agent-field", json.dumps(check_body(agent={"name": "x", "y": 1})).encode(), 400,
     "agent.y"),
    ("missing-agent", json.dumps({"app": "shop", "tool": "t"}).encode(), 400, "agent"),
    ("too-deep", json.dumps(check_body(arguments=_deep(33))).encode(), 400, "deeper than 32"),
    ("very-deep", b'{"arguments":' + b"[" * 5000 + b"]" * 5000 + b"}", 400, "deeper than 32"),
    ("too-large", json.dumps(check_body(arguments={"x": "y" * 1_000_001})).encode(), 413,
     "limit is 1000000"),
    ("bad-utf8", b'{"app": "\xff"}', 400, "malformed JSON"),
    ("nan", b'{"app":"shop","tool":"t","agent":{"name":"a"},"arguments":{"x":NaN}}', 400,
     "NaN is not a JSON number"),
    ("huge-integer", b'{"app":"shop","tool":"t","agent":{"name":"a"},"arguments":{"x":'
     + b"9" * 5000 + b"}}", 400, "malformed JSON: a whole number of more than 4,300 digits"),
    ("4000-digit-integer", b'{"app":"shop","tool":"t","agent":{"name":"a"},"arguments":{"x":'
     + b"9" * 4000 + b"}}", 400, "number out of range: " + "9" * 40 + "... (4,000 characters)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [(b, s, r) for _, b, s, r in BAD_BODIES],
    ids=[name for name, *_ in BAD_BODIES],
)
def test_bad_input(
    http: httpx.Client, keys: Keys, services: Services, body: bytes, status: int, reason: str
) -> None:
    response = http.post(
        "/v1/check",
        content=body,
        headers={**bearer(keys.agent), "Content-Type": "application/json"},
    )
    assert response.status_code == status, response.text
    payload = response.json()
    assert reason in json.dumps(payload), payload
    assert _head_seq(services) == 0, "nothing may be written on bad input"


def test_depth_32_is_accepted(http: httpx.Client, keys: Keys) -> None:
    body = check_body(arguments=_deep(32))  # 31 objects inside the body: depth 32
    response = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert response.status_code == 200, response.text


def test_a_huge_number_is_not_sent_back_whole(http: httpx.Client, keys: Keys) -> None:
    body = b'{"app":"shop","tool":"t","agent":{"name":"a"},"arguments":{"x":' + b"9" * 4000 + b"}}"
    answer = http.post(
        "/v1/check",
        content=body,
        headers={**bearer(keys.agent), "Content-Type": "application/json"},
    )
    assert answer.status_code == 400 and len(answer.text) < 200, answer.text[:300]
