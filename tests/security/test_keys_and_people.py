"""Attacks on keys and people (issue 13): a key that was revoked, a member removed or an
audit key past its expiry must stop at once; a member must not revoke others' keys or
make themself admin; an agent key must not list or revoke keys. On both stores."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from claros.auth import create_key
from claros.wiring import Services
from tests.api.conftest import ADMIN, PERSON, WORKSPACE, Keys, bearer, check_body
from tests.api.seed import OCT_1, install_clock

HTML_FORM = {"accept": "application/json"}


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def checks(http: httpx.Client, key: str) -> int:
    return http.post("/v1/check", json=check_body(), headers=bearer(key)).status_code


def revoke(http: httpx.Client, by: str, key: str) -> httpx.Response:
    return http.post(f"/api/keys/{key_id(key)}/revoke", headers=bearer(by))


def test_revoked_agent_key_is_refused_on_its_next_check(http: httpx.Client, keys: Keys) -> None:
    assert checks(http, keys.agent) == 200
    done = revoke(http, keys.admin, keys.agent)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "revoked"
    refused = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
    assert refused.status_code == 401 and "revoked" in refused.json()["message"]


def test_revoked_key_is_refused_by_the_api(http: httpx.Client, keys: Keys) -> None:
    assert http.get("/api/me/timeline", headers=bearer(keys.person)).status_code == 200
    assert revoke(http, keys.admin, keys.person).status_code == 200
    assert http.get("/api/me/timeline", headers=bearer(keys.person)).status_code == 401


def test_revoked_person_keys_web_session_ends(http: httpx.Client, keys: Keys) -> None:
    signed = http.post("/app/signin", json={"key": keys.person})
    assert signed.status_code == 200, signed.text
    assert http.get("/app/asks", headers=HTML_FORM).status_code == 200  # the cookie
    assert revoke(http, keys.admin, keys.person).status_code == 200
    ended = http.get("/app/asks", headers=HTML_FORM)
    assert ended.status_code == 401 and "revoked" in ended.json()["message"]


def test_member_cannot_revoke_someone_elses_key(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    other = create_key(services.store, WORKSPACE, "agent", person="eve@acme.test")
    for victim in (keys.admin, keys.service, other, keys.audit):
        tried = revoke(http, keys.person, victim)
        assert tried.status_code == 404, tried.text
    assert checks(http, other) == 200 and checks(http, keys.service) == 200
    assert http.get("/api/rules", headers=bearer(keys.admin)).status_code == 200
    # Their own agent key they may revoke; their own sign-in key only an admin may.
    assert revoke(http, keys.person, keys.agent).status_code == 200
    assert revoke(http, keys.person, keys.person).status_code == 403


def test_member_cannot_promote_themself(http: httpx.Client, keys: Keys) -> None:
    tried = http.put(f"/api/members/{PERSON}", json={"role": "admin"}, headers=bearer(keys.person))
    assert tried.status_code == 403
    signed = http.post("/app/signin", json={"key": keys.person})
    csrf, hand = signed.json()["csrf"], signed.json()["hand"]
    form = http.post(
        f"/app/members/{PERSON}/role",
        data={"role": "admin", "csrf": csrf, "hand": hand},
        headers={"accept": "application/json"},
    )
    assert form.status_code == 403
    members = http.get("/api/members", headers=bearer(keys.admin)).json()["members"]
    assert {m["email"]: m["role"] for m in members}[PERSON] == "member"


def test_agent_key_cannot_list_or_revoke_keys(http: httpx.Client, keys: Keys) -> None:
    for kind in ("agent", "service", "audit"):
        key = keys.of(kind)
        assert http.get("/api/keys", headers=bearer(key)).status_code == 403, kind
        assert revoke(http, key, key).status_code == 403, kind
        assert http.get("/app/keys", headers=bearer(key)).status_code == 403, kind
    assert checks(http, keys.agent) == 200


def test_expired_audit_key_is_refused(
    http: httpx.Client, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = install_clock(monkeypatch, OCT_1)
    create_key(services.store, WORKSPACE, "admin", person=ADMIN)
    audit = create_key(services.store, WORKSPACE, "audit", made_by=ADMIN)
    short = create_key(services.store, WORKSPACE, "audit", made_by=ADMIN, expires_days=1)
    assert http.get("/v1/ledger/entries", headers=bearer(audit)).status_code == 200
    clock.later(86_400)
    refused = http.get("/v1/ledger/entries", headers=bearer(short))
    assert refused.status_code == 401 and "expired" in refused.json()["message"]
    assert http.get("/v1/ledger/entries", headers=bearer(audit)).status_code == 200
    clock.later(89 * 86_400)  # 90 days: the default life
    assert http.get("/v1/ledger/entries", headers=bearer(audit)).status_code == 401


def test_removed_members_keys_are_refused(http: httpx.Client, keys: Keys) -> None:
    assert checks(http, keys.agent) == 200
    gone = http.delete(f"/api/members/{PERSON}", headers=bearer(keys.admin))
    assert gone.status_code == 200, gone.text
    assert checks(http, keys.agent) == 401
    assert http.get("/api/me/timeline", headers=bearer(keys.person)).status_code == 401


def test_admin_cannot_demote_or_remove_the_last_admin(http: httpx.Client, keys: Keys) -> None:
    demoted = http.put(f"/api/members/{ADMIN}", json={"role": "member"}, headers=bearer(keys.admin))
    assert demoted.status_code == 409 and "last admin" in demoted.json()["message"]
    removed = http.delete(f"/api/members/{ADMIN}", headers=bearer(keys.admin))
    assert removed.status_code == 409
    assert http.get("/api/rules", headers=bearer(keys.admin)).status_code == 200
