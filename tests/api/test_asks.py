"""Asks and approvals over HTTP on both stores: routing, authority, binding, single use,
expiry, the webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest

from claros.auth import create_key
from claros.config import Settings
from claros.wiring import Services
from tests.api.conftest import ADMIN, PERSON, WORKSPACE, Keys, bearer, check_body, put_rule
from tests.api.seed import install_clock

BOB = "bob@acme.test"


def _check(http: httpx.Client, key: str, approval: str | None = None, **arguments: object) -> dict:
    body = check_body(arguments=arguments or {"amount": 80, "order_total": 100})
    if approval:
        body["approval"] = approval
    response = http.post("/v1/check", json=body, headers=bearer(key))
    return {"status": response.status_code, **response.json()}


def _answer(http: httpx.Client, key: str, ask_id: str, decision: str = "approve") -> httpx.Response:
    return http.post(f"/api/asks/{ask_id}/answer", json={"decision": decision, "note": "ok"},
                     headers=bearer(key))  # fmt: skip


def test_self_route_approve_and_use_once(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)  # ask, owned by dana
    asked = _check(http, keys.agent)
    assert asked["result"] == "ask" and asked["allowed"] is False
    ask = asked["ask"]
    assert ask["routed_to"] == [PERSON] and ask["route"] == "self" and ask["status"] == "open"
    dana_web = create_key(services.store, WORKSPACE, "person", person=PERSON)
    mine = http.get("/api/asks?mine=1", headers=bearer(dana_web)).json()["asks"]
    assert [a["ask_id"] for a in mine] == [ask["ask_id"]]

    own = _answer(http, keys.agent, ask["ask_id"])
    assert own.status_code == 403 and "never answer asks" in own.json()["message"]

    answered = _answer(http, dana_web, ask["ask_id"])
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "approved" and answered.json()["authority"] == "self"
    approval = services.store.get_record(WORKSPACE, "approval", ask["ask_id"])
    assert approval is not None
    assert (approval["decision"], approval["authority"], approval["decided_by"]) == (
        "approve", "self", PERSON)  # fmt: skip
    assert approval["opened_at"] <= approval["decided_at"]

    waited = http.get(f"/v1/asks/{ask['ask_id']}", headers=bearer(keys.agent)).json()
    assert waited["status"] == "approved"

    again = _answer(http, dana_web, ask["ask_id"])
    assert again.status_code == 409

    used = _check(http, keys.agent, approval=ask["ask_id"])
    assert used["result"] == "allow" and used["approval"]["decided_by"] == PERSON
    twice = _check(http, keys.agent, approval=ask["ask_id"])
    assert twice["status"] == 409 and "used already" in twice["message"]
    assert http.get("/api/asks?mine=1", headers=bearer(dana_web)).json()["asks"] == []


def test_routed_to_owners_when_the_person_may_not_answer(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)
    bob_agent = create_key(services.store, WORKSPACE, "agent", person=BOB)
    bob_web = create_key(services.store, WORKSPACE, "person", person=BOB)
    asked = _check(http, bob_agent)
    assert asked["ask"]["routed_to"] == [PERSON] and asked["ask"]["route"] == "owners"
    refused = _answer(http, bob_web, asked["ask"]["ask_id"])
    assert refused.status_code == 403 and "routed to" in refused.json()["message"]
    answered = _answer(http, keys.person, asked["ask"]["ask_id"])  # dana's own sign-in key
    assert answered.status_code == 200 and answered.json()["authority"] == "owner"


def _second_rule(http: httpx.Client, keys: Keys, owners: list[str]) -> None:
    """Another rule that asks on the same call, so that two rules ask together."""
    put_rule(http, keys.admin, id="refund-other", owners=owners,
             title="Refunds over half also need the other owner", message="Other rule")  # fmt: skip


def test_self_route_only_when_the_person_owns_every_asking_rule(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)  # dana owns refund-half
    _second_rule(http, keys, [BOB])  # bob owns refund-other
    asked = _check(http, keys.agent)
    ask = asked["ask"]
    assert sorted(r["id"] for r in ask["rules"]) == ["refund-half", "refund-other"]
    # Dana owns only one of the two: the ask goes to the owners, without her.
    assert ask["route"] == "owners" and ask["routed_to"] == [BOB]
    dana_web = create_key(services.store, WORKSPACE, "person", person=PERSON)
    assert http.get("/api/asks?mine=1", headers=bearer(dana_web)).json()["asks"] == []
    refused = _answer(http, dana_web, ask["ask_id"])
    assert refused.status_code == 403, refused.text
    assert "own agent under rules they do not own" in refused.json()["message"]
    assert services.store.get_record(WORKSPACE, "approval", ask["ask_id"]) is None
    bob_web = create_key(services.store, WORKSPACE, "person", person=BOB)
    answered = _answer(http, bob_web, ask["ask_id"])
    assert answered.status_code == 200 and answered.json()["authority"] == "owner"


def test_a_person_made_admin_since_the_ask_answers_as_admin(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)
    _second_rule(http, keys, [BOB])
    ask = _check(http, keys.agent)["ask"]
    assert ask["route"] == "owners"
    dana_admin = create_key(services.store, WORKSPACE, "admin", person=PERSON)  # raised now
    answered = _answer(http, dana_admin, ask["ask_id"])
    assert answered.status_code == 200 and answered.json()["authority"] == "admin"


def test_self_route_when_the_person_is_among_every_asking_rules_owners(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)
    _second_rule(http, keys, [BOB, PERSON])
    ask = _check(http, keys.agent)["ask"]
    assert ask["route"] == "self" and ask["routed_to"] == [PERSON]
    dana_web = create_key(services.store, WORKSPACE, "person", person=PERSON)
    answered = _answer(http, dana_web, ask["ask_id"])
    assert answered.status_code == 200 and answered.json()["authority"] == "self"


def test_self_route_for_an_admin_whatever_the_rules_owners(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)
    _second_rule(http, keys, [])
    ask = _check(http, keys.admin)["ask"]  # the admin's own key acts for the admin
    assert ask["route"] == "self" and ask["routed_to"] == [ADMIN]
    admin_web = create_key(services.store, WORKSPACE, "admin", person=ADMIN)
    answered = _answer(http, admin_web, ask["ask_id"])
    assert answered.status_code == 200 and answered.json()["authority"] == "self"


def test_a_second_rule_with_no_owner_sends_the_ask_to_the_admins(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)  # dana's
    _second_rule(http, keys, [])  # nobody's: only an admin may answer for it
    ask = _check(http, keys.agent)["ask"]
    assert ask["route"] == "admins" and ask["routed_to"] == [ADMIN]
    dana_web = create_key(services.store, WORKSPACE, "person", person=PERSON)
    assert _answer(http, dana_web, ask["ask_id"]).status_code == 403
    answered = _answer(http, keys.admin, ask["ask_id"])
    assert answered.status_code == 200 and answered.json()["authority"] == "admin"


def test_rule_without_owner_goes_to_admins(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, owners=[])
    asked = _check(http, keys.agent)
    assert asked["ask"]["routed_to"] == [ADMIN] and asked["ask"]["route"] == "admins"
    answered = _answer(http, keys.admin, asked["ask"]["ask_id"], "deny")
    assert answered.json()["status"] == "denied" and answered.json()["authority"] == "admin"
    refused = _check(http, keys.agent, approval=asked["ask"]["ask_id"])
    assert refused["status"] == 409 and "denied" in refused["message"]


def test_approval_is_bound_to_the_call_and_rule_versions(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin, owners=[])
    ask_id = _check(http, keys.agent)["ask"]["ask_id"]
    assert _answer(http, keys.admin, ask_id).status_code == 200
    other_call = _check(http, keys.agent, approval=ask_id, amount=90, order_total=100)
    assert other_call["status"] == 409 and "different call" in other_call["message"]
    other_key = create_key(services.store, WORKSPACE, "agent", person=PERSON)
    stolen = _check(http, other_key, approval=ask_id)
    assert stolen["status"] == 403
    put_rule(http, keys.admin, owners=[], message="changed")  # a new version
    changed = _check(http, keys.agent, approval=ask_id)
    assert changed["status"] == 409 and "other rule versions" in changed["message"]


def test_service_and_audit_keys_cannot_answer(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, owners=[])
    ask_id = _check(http, keys.agent)["ask"]["ask_id"]
    assert _answer(http, keys.service, ask_id).status_code == 403
    assert _answer(http, keys.audit, ask_id).status_code == 403


def test_unknown_ask(http: httpx.Client, keys: Keys) -> None:
    assert _answer(http, keys.admin, "ask_nope").status_code == 404
    assert http.get("/v1/asks/ask_nope", headers=bearer(keys.agent)).status_code == 404
    assert _check(http, keys.agent, approval="ask_nope")["status"] == 200  # no ask rule


def test_bad_answer_body(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, owners=[])
    ask_id = _check(http, keys.agent)["ask"]["ask_id"]
    response = http.post(f"/api/asks/{ask_id}/answer", json={"decision": "maybe"},
                         headers=bearer(keys.admin))  # fmt: skip
    assert response.status_code == 400 and response.json()["details"][0]["field"] == "decision"


class TestExpiry:
    @pytest.fixture
    def settings(self, tmp_path: Path) -> Settings:
        return Settings(data_dir=tmp_path / "data", ask_ttl_s=1, approval_ttl_s=1)

    def test_expired_ask_and_approval(
        self, http: httpx.Client, keys: Keys, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Claros's clock, not the wall's: on a loaded machine (tests run in parallel) the
        # two checks and the answer could take longer than the 1 s the ask lives.
        clock = install_clock(monkeypatch, time.time_ns() // 1_000_000)
        put_rule(http, keys.admin, owners=[])
        late = _check(http, keys.agent)["ask"]["ask_id"]
        soon = _check(http, keys.agent)["ask"]["ask_id"]
        assert _answer(http, keys.admin, soon).status_code == 200
        clock.later(1.2)
        expired = _answer(http, keys.admin, late)
        assert expired.status_code == 409 and "expired" in expired.json()["message"]
        view = http.get(f"/v1/asks/{late}", headers=bearer(keys.agent)).json()
        assert view["status"] == "expired"
        used = _check(http, keys.agent, approval=soon)
        assert used["status"] == 409 and "expired" in used["message"]


class _Hook(BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]] = []
    status = 200
    event = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        type(self).event.set()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[tuple[str, type[_Hook]]]:
    handler = type("Hook", (_Hook,), {"received": [], "status": 200, "event": threading.Event()})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    server.shutdown()
    server.server_close()


SECRET = "s3cret-s3cret-s3cret"


def test_webhook_gets_each_new_ask_signed(
    http: httpx.Client, keys: Keys, hook: tuple[str, type[_Hook]]
) -> None:
    url, handler = hook
    put = http.put("/api/settings/ask-webhook", json={"url": url, "secret": SECRET},
                   headers=bearer(keys.admin))  # fmt: skip
    assert put.status_code == 200
    shown = http.get("/api/settings/ask-webhook", headers=bearer(keys.admin)).json()
    assert shown == {"url": url, "configured": True}  # the secret is never shown
    put_rule(http, keys.admin, owners=[])
    ask_id = _check(http, keys.agent)["ask"]["ask_id"]
    assert handler.event.wait(10), "the webhook was not called"
    headers, body = handler.received[0]
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-Claros-Signature"] == expected
    payload = json.loads(body)
    assert payload["type"] == "ask.opened" and payload["ask"]["ask_id"] == ask_id


def test_failing_webhook_never_delays_the_check(
    http: httpx.Client, keys: Keys, hook: tuple[str, type[_Hook]]
) -> None:
    url, handler = hook
    handler.status = 500
    http.put("/api/settings/ask-webhook", json={"url": url, "secret": SECRET},
             headers=bearer(keys.admin))  # fmt: skip
    put_rule(http, keys.admin, owners=[])
    start = time.monotonic()
    asked = _check(http, keys.agent)
    assert asked["status"] == 200 and asked["result"] == "ask"
    assert time.monotonic() - start < 5
    assert handler.event.wait(10)  # the first attempt went out, and failed


def test_bad_webhook_settings(http: httpx.Client, keys: Keys) -> None:
    for body in ({"url": "not a url", "secret": SECRET}, {"url": "http://x.test", "secret": "s"}):
        response = http.put("/api/settings/ask-webhook", json=body, headers=bearer(keys.admin))
        assert response.status_code == 400


def test_a_webhook_that_is_not_a_url_is_refused(http: httpx.Client, keys: Keys) -> None:
    """The settings model is imported by the route (claros.webhook_settings): its refusal
    is still a 400 with the reason, and nothing is written."""
    put = http.put("/api/settings/ask-webhook", json={"url": "not a url", "secret": SECRET},
                   headers=bearer(keys.admin))  # fmt: skip
    assert put.status_code == 400 and "url" in put.text
    shown = http.get("/api/settings/ask-webhook", headers=bearer(keys.admin)).json()
    assert shown == {"url": None, "configured": False}
