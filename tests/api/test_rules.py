"""Rules over HTTP on both stores: versions, hashes, confirm records, closes, bad rules."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from claros.canonical import canonical_bytes
from claros.wiring import Services
from tests.api.conftest import ADMIN, PERSON, WORKSPACE, Keys, bearer, put_rule, rule


def _kinds(services: Services) -> list[tuple[str, str]]:
    return [(e.kind, e.ref_id) for e in services.store.entries(WORKSPACE)]


def test_create_edit_close_make_versions(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    created = put_rule(http, keys.admin, made_by="expert")
    written = {**rule(), "mode": "enforce"}
    assert created["version"] == 1 and created["changed"] is True
    assert created["hash"] == hashlib.sha256(canonical_bytes(written)).hexdigest()
    assert created["confirm"]["made_by"] == "expert"
    assert created["confirm"]["confirmed_by"] == ADMIN
    assert _kinds(services) == [("rule_version", "refund-half@1")]
    version = services.store.get_record(WORKSPACE, "rule_version", "refund-half@1")
    assert version is not None and version["rule"] == written
    assert version["confirm"] == created["confirm"]

    same = put_rule(http, keys.admin)
    assert same["changed"] is False and same["version"] == 1
    assert len(_kinds(services)) == 1, "an unchanged rule makes no new version"

    edited = put_rule(http, keys.admin, response="stop")
    assert edited["version"] == 2 and edited["hash"] != created["hash"]
    assert _kinds(services)[1:] == [
        ("rule_version_close", "refund-half@1"),
        ("rule_version", "refund-half@2"),
    ]

    closed = http.post("/api/rules/refund-half/close", json={"reason": "retired"},
                       headers=bearer(keys.admin))  # fmt: skip
    assert closed.status_code == 200 and closed.json()["status"] == "closed"
    assert _kinds(services)[-1] == ("rule_version_close", "refund-half@2")
    again = http.post("/api/rules/refund-half/close", headers=bearer(keys.admin))
    assert again.status_code == 409

    listed = http.get("/api/rules?versions=1", headers=bearer(keys.admin)).json()["rules"]
    versions = listed[0]["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[0]["closed"]["reason"] == "replaced by an edit"
    assert versions[1]["closed"]["reason"] == "retired"

    reopened = put_rule(http, keys.admin, response="stop")
    assert reopened["version"] == 3 and reopened["status"] == "active"


def test_create_twice_is_a_conflict(http: httpx.Client, keys: Keys) -> None:
    body = {"rule": rule()}
    assert http.post("/api/rules", json=body, headers=bearer(keys.admin)).status_code == 201
    assert http.post("/api/rules", json=body, headers=bearer(keys.admin)).status_code == 409


def test_unknown_rule(http: httpx.Client, keys: Keys) -> None:
    assert http.get("/api/rules/nope", headers=bearer(keys.admin)).status_code == 404
    assert http.post("/api/rules/nope/close", headers=bearer(keys.admin)).status_code == 404


@pytest.mark.parametrize(
    ("change", "place", "reason"),
    [
        ({"response": "block"}, "rule.response", "Input should be"),
        ({"when": "amount >"}, "rule.when", "column"),
        ({"when": "amount > 5 and"}, "rule.when", "column"),
        ({"colour": "red"}, "rule.colour", "Extra inputs"),
        ({"owners": ["not-an-email"]}, "rule.owners", "not an email"),
        ({"tools": []}, "rule.tools", "at least 1"),
        ({"id": "Bad Id"}, "rule.id", "pattern"),
        ({"mode": "loud"}, "rule.mode", "Input should be"),
    ],
)
def test_invalid_rules_are_refused_with_place(
    http: httpx.Client, keys: Keys, services: Services, change: dict, place: str, reason: str
) -> None:
    response = http.post("/api/rules", json={"rule": rule(**change)}, headers=bearer(keys.admin))
    assert response.status_code == 400, response.text
    details = response.json()["details"]
    assert any(d["field"] == place and reason in d["problem"] for d in details), details
    assert services.store.head(WORKSPACE) is None


def test_put_path_must_match(http: httpx.Client, keys: Keys) -> None:
    response = http.put("/api/rules/other", json={"rule": rule()}, headers=bearer(keys.admin))
    assert response.status_code == 400 and "path says" in response.json()["message"]


def test_bad_made_by(http: httpx.Client, keys: Keys) -> None:
    body = {"rule": rule(), "made_by": "magic"}
    assert http.post("/api/rules", json=body, headers=bearer(keys.admin)).status_code == 400


def test_owner_emails_are_lowercased(http: httpx.Client, keys: Keys) -> None:
    state = put_rule(http, keys.admin, owners=[PERSON.upper()])
    assert state["rule"]["owners"] == [PERSON]
