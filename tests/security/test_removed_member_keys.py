"""Attacks by people who lost their place (issue 13, "Keys and people"), on both stores:

* a removed member keeps their sign-in key and the agent keys they minted with it, and
  tries them on the next request (the check API, the web app, a web session opened before
  the removal);
* a demoted admin keeps their admin key (and a web session opened with it) and tries to go
  on running the workspace: add a member, revoke a key, change a rule;
* a removed member who is added again must not get their old keys back: the keys made
  before the removal stay refused (the new membership gets a new sign-in key).

Each test was run on the code before the fix; which attack worked then is said on it."""

from __future__ import annotations

import hashlib

import httpx

from claros.auth import create_key
from claros.wiring import Services
from tests.api.conftest import ADMIN, PERSON, WORKSPACE, Keys, bearer, check_body, rule

JSON = {"accept": "application/json"}


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def mint_agent_key(http: httpx.Client, parent: str) -> str:
    made = http.post("/app/keys", json={"label": "laptop"}, headers=bearer(parent))
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def assert_refused(response: httpx.Response) -> None:
    """Refused with a reason (401 or 403), never served."""
    assert response.status_code in (401, 403), response.text
    assert response.json()["message"], response.text


def session(http: httpx.Client, key: str) -> dict[str, str]:
    """Sign in with ``key`` (the client keeps the cookie); the form fields that let it act
    (the CSRF token and the session's hand)."""
    signed = http.post("/app/signin", json={"key": key})
    assert signed.status_code == 200, signed.text
    return {"csrf": str(signed.json()["csrf"]), "hand": str(signed.json()["hand"])}


def test_removed_members_person_and_agent_keys_are_refused_on_the_next_request(
    http: httpx.Client, keys: Keys
) -> None:
    agent = mint_agent_key(http, keys.person)
    assert http.post("/v1/check", json=check_body(), headers=bearer(agent)).status_code == 200
    assert http.get("/app/asks", headers={**JSON, **bearer(keys.person)}).status_code == 200
    gone = http.delete(f"/api/members/{PERSON}", headers=bearer(keys.admin))
    assert gone.status_code == 200, gone.text
    assert_refused(http.post("/v1/check", json=check_body(), headers=bearer(agent)))
    assert_refused(http.post("/v1/check", json=check_body(), headers=bearer(keys.agent)))
    assert_refused(http.get("/app/asks", headers={**JSON, **bearer(keys.person)}))
    assert_refused(http.get("/api/me/timeline", headers=bearer(keys.person)))
    # Nor can the removed person mint themself a fresh agent key.
    assert_refused(http.post("/app/keys", json={"label": "x"}, headers=bearer(keys.person)))


def test_removed_members_web_session_ends(http: httpx.Client, keys: Keys) -> None:
    session(http, keys.person)
    assert http.get("/app/asks", headers=JSON).status_code == 200
    gone = http.delete(f"/api/members/{PERSON}", headers=bearer(keys.admin))
    assert gone.status_code == 200, gone.text
    assert_refused(http.get("/app/asks", headers=JSON))


def test_demoted_admins_key_cannot_add_revoke_or_change_rules(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    boss = create_key(services.store, WORKSPACE, "admin", person="boss@acme.test")
    demoted = http.put(f"/api/members/{ADMIN}", json={"role": "member"}, headers=bearer(boss))
    assert demoted.status_code == 200, demoted.text
    old = bearer(keys.admin)
    assert_refused(http.post("/api/members", json={"email": "mallory@acme.test"}, headers=old))
    assert_refused(http.post(f"/api/keys/{key_id(keys.agent)}/revoke", headers=old))
    assert_refused(http.put(f"/api/members/{PERSON}", json={"role": "admin"}, headers=old))
    assert_refused(http.delete(f"/api/members/{PERSON}", headers=old))
    change = {"rule": rule(), "made_by": "manual"}
    assert_refused(http.put("/api/rules/refund-half", json=change, headers=old))
    listed = http.get("/api/members", headers=bearer(boss)).json()
    assert "mallory@acme.test" not in {m["email"] for m in listed["members"]}
    assert http.post("/v1/check", json=check_body(), headers=bearer(keys.agent)).status_code == 200


def test_demoted_admins_web_session_cannot_act_as_admin(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    acting = session(http, keys.admin)
    boss = create_key(services.store, WORKSPACE, "admin", person="boss@acme.test")
    demoted = http.put(f"/api/members/{ADMIN}", json={"role": "member"}, headers=bearer(boss))
    assert demoted.status_code == 200, demoted.text
    tried = http.post("/app/members", data={"email": "mallory@acme.test", **acting}, headers=JSON)
    # A form post whose session no longer stands goes back to sign in, having done nothing.
    assert tried.status_code == 303 and tried.headers["location"].startswith("/app/signin")
    assert services.store.get_doc(WORKSPACE, "member", "mallory@acme.test") is None
    assert_refused(http.get("/app/keys", headers=JSON))


def test_re_added_member_does_not_get_their_old_keys_back(http: httpx.Client, keys: Keys) -> None:
    agent = mint_agent_key(http, keys.person)
    gone = http.delete(f"/api/members/{PERSON}", headers=bearer(keys.admin))
    assert gone.status_code == 200, gone.text
    back = http.post("/api/members", json={"email": PERSON}, headers=bearer(keys.admin))
    assert back.status_code == 201, back.text
    # The old keys were made for the membership that ended; the new one is theirs now.
    assert_refused(http.post("/v1/check", json=check_body(), headers=bearer(agent)))
    assert_refused(http.get("/app/asks", headers={**JSON, **bearer(keys.person)}))
    fresh = back.json()["key"]
    assert http.get("/app/asks", headers={**JSON, **bearer(fresh)}).status_code == 200


def test_re_promoted_admin_does_not_get_their_old_admin_key_back(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    boss = create_key(services.store, WORKSPACE, "admin", person="boss@acme.test")
    assert http.put(
        f"/api/members/{ADMIN}", json={"role": "member"}, headers=bearer(boss)
    ).is_success
    again = http.put(f"/api/members/{ADMIN}", json={"role": "admin"}, headers=bearer(boss))
    assert again.status_code == 200, again.text
    assert_refused(http.get("/api/members", headers=bearer(keys.admin)))
    assert http.get("/api/members", headers=bearer(again.json()["key"])).status_code == 200
