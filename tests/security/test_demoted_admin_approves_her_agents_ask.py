"""A person's agent asks while she is a workspace admin, so the ask is routed to her
("self", spec/evidence.txt: "goes to that person first when they may answer it
themselves (they own the rule, are one of its owners, or are a workspace admin)"). She is
then demoted to member: she owns none of the asking rules and is no admin, so she may no
longer answer her own agent's call under another person's rule. The route was decided when
the ask opened and trusted as it was when she answered: her person key approved it
(authority ``self``), and her agent's repeat then ran. Who may answer is decided when
the answer is given, as the admin route already is."""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import Keys, bearer, check_body, put_rule

DANA = "dana.admin@acme.test"
OLGA = "olga@acme.test"  # owns the rule


def _member(http: httpx.Client, keys: Keys, email: str) -> str:
    made = http.post("/api/members", json={"email": email}, headers=bearer(keys.admin))
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def _role(http: httpx.Client, keys: Keys, email: str, role: str) -> None:
    done = http.put(f"/api/members/{email}", json={"role": role}, headers=bearer(keys.admin))
    assert done.status_code == 200 and done.json()["role"] == role, done.text


@pytest.mark.parametrize("store", ["sqlite", "dynamodb"], indirect=True)
def test_demoted_admin_cannot_approve_her_own_agents_ask_routed_to_her_as_admin(
    http: httpx.Client, keys: Keys
) -> None:
    _member(http, keys, OLGA)
    dana = _member(http, keys, DANA)
    _role(http, keys, DANA, "admin")
    made = http.post("/app/keys", json={"label": "laptop"}, headers=bearer(dana))
    assert made.status_code == 201, made.text
    agent = str(made.json()["key"])
    put_rule(http, keys.admin, owners=[OLGA])

    asked = http.post(
        "/v1/check", json=check_body(arguments={"amount": 80, "order_total": 100}),
        headers=bearer(agent),
    )  # fmt: skip
    assert asked.status_code == 200 and asked.json()["result"] == "ask", asked.text
    ask = asked.json()["ask"]
    assert ask["route"] == "self" and ask["routed_to"] == [DANA], ask

    _role(http, keys, DANA, "member")  # no admin now, and the rule is Olga's
    answer = http.post(
        f"/api/asks/{ask['ask_id']}/answer", json={"decision": "approve"}, headers=bearer(dana)
    )
    assert answer.status_code == 403, answer.text
    assert "may not answer" in answer.json()["message"]
    view = http.get(f"/v1/asks/{ask['ask_id']}", headers=bearer(agent))
    assert view.json()["status"] == "open", view.text


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_admin_still_approves_her_own_agents_ask_routed_to_her(
    http: httpx.Client, keys: Keys
) -> None:
    _member(http, keys, OLGA)
    dana = _member(http, keys, DANA)
    _role(http, keys, DANA, "admin")
    agent = str(http.post("/app/keys", json={}, headers=bearer(dana)).json()["key"])
    put_rule(http, keys.admin, owners=[OLGA])
    asked = http.post(
        "/v1/check", json=check_body(arguments={"amount": 80, "order_total": 100}),
        headers=bearer(agent),
    )  # fmt: skip
    ask = asked.json()["ask"]
    answer = http.post(
        f"/api/asks/{ask['ask_id']}/answer", json={"decision": "approve"}, headers=bearer(dana)
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["authority"] == "self"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_owner_of_every_asking_rule_still_approves_her_own_agents_ask(
    http: httpx.Client, keys: Keys
) -> None:
    olga = _member(http, keys, OLGA)
    agent = str(http.post("/app/keys", json={}, headers=bearer(olga)).json()["key"])
    put_rule(http, keys.admin, owners=[OLGA])
    asked = http.post(
        "/v1/check", json=check_body(arguments={"amount": 80, "order_total": 100}),
        headers=bearer(agent),
    )  # fmt: skip
    ask = asked.json()["ask"]
    assert ask["route"] == "self", ask
    answer = http.post(
        f"/api/asks/{ask['ask_id']}/answer", json={"decision": "approve"}, headers=bearer(olga)
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["authority"] == "self"
