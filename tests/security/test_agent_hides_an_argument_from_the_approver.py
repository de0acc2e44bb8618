"""The agent hides the argument that matters from the person asked to approve its call.

An ask card shows a call's first 12 arguments (sorted by name) and links to the check's
page for the rest. An agent writes the arguments, so it puts a dozen harmless ones that
sort first (``a00`` ... ``a11``) and the one that matters after them (``refund_to``: where
the money goes). The rule's owner (a member, not the person the agent acts for) is the
one asked; the check's page, ``GET /api/checks/{id}`` and the asks listing were all closed
to her (a check "made for" someone else is a 404 to a member), so the link on her own
ask card led to "There is no such page" and she could approve the call only without
seeing where the refund goes. A person asked to answer an ask sees the check it asks
about, whole: its page, its JSON and its answer form.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.api.conftest import Keys, bearer, check_body, put_rule
from tests.web.conftest import Browserish, sign_in  # noqa: F401 - the fixture

pytestmark = pytest.mark.parametrize("store", ["sqlite", "dynamodb"], indirect=True)

OLGA = "olga@acme.test"  # owns the rule: the ask is routed to her
SAM = "sam@acme.test"  # the agent acts for him; he owns no rule
IBAN = "XX00ATTACKER0000000042"


def _member(http: httpx.Client, keys: Keys, email: str) -> str:
    made = http.post("/api/members", json={"email": email}, headers=bearer(keys.admin))
    assert made.status_code == 201, made.text
    return str(made.json()["key"])


def _hidden_ask(http: httpx.Client, keys: Keys) -> tuple[str, dict[str, object]]:
    olga = _member(http, keys, OLGA)
    sam = _member(http, keys, SAM)
    agent = str(http.post("/app/keys", json={}, headers=bearer(sam)).json()["key"])
    put_rule(http, keys.admin, owners=[OLGA])
    arguments: dict[str, object] = {f"a{i:02d}": "ok" for i in range(12)}
    arguments.update(amount=80, order_total=100, refund_to=IBAN)
    asked = http.post("/v1/check", json=check_body(arguments=arguments), headers=bearer(agent))
    assert asked.status_code == 200 and asked.json()["result"] == "ask", asked.text
    ask = asked.json()["ask"]
    assert ask["routed_to"] == [OLGA], ask
    return olga, asked.json()


def test_the_approver_can_see_every_argument_of_the_call_she_is_asked_about(
    http: httpx.Client,
    keys: Keys,
    sign_in: Callable[[str], Browserish],  # noqa: F811
) -> None:
    olga, asked = _hidden_ask(http, keys)
    check_id = str(asked["check_id"])
    browser = sign_in(olga)
    queue = browser.get("/app/asks")
    assert queue.status_code == 200
    assert "Showing 12 of 15 arguments" in queue.text
    assert IBAN not in queue.text  # past the twelve shown: only the check's page has it
    link = f"/app/checks/{check_id}"
    assert f'href="{link}"' in queue.text
    page = browser.get(link)
    assert page.status_code == 200, page.text[:500]
    assert IBAN in page.text
    as_json = http.get(f"/api/checks/{check_id}", headers=bearer(olga))
    assert as_json.status_code == 200, as_json.text
    assert as_json.json()["call"]["arguments"]["refund_to"] == IBAN


def test_the_approver_answers_from_the_checks_page(
    http: httpx.Client,
    keys: Keys,
    sign_in: Callable[[str], Browserish],  # noqa: F811
) -> None:
    olga, asked = _hidden_ask(http, keys)
    check_id = str(asked["check_id"])
    browser = sign_in(olga)
    done = browser.post_form(
        f"/app/checks/{check_id}/answer", {"decision": "deny", "note": "where to?", "once": "o1"}
    )
    assert done.status_code == 303, done.text[:500]
    ask = asked["ask"]
    assert isinstance(ask, dict)
    listed = http.get("/api/asks?mine=1&answered=1", headers=bearer(olga))
    assert [a["status"] for a in listed.json()["asks"]] == ["denied"], listed.text


def test_another_member_still_does_not_see_the_check(http: httpx.Client, keys: Keys) -> None:
    _, asked = _hidden_ask(http, keys)
    erin = _member(http, keys, "erin@acme.test")
    got = http.get(f"/api/checks/{asked['check_id']}", headers=bearer(erin))
    assert got.status_code == 404, got.text
