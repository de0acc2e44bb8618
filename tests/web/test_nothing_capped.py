"""Issue 13, item 3: every list a page cuts says so and links to the rest. Home's
"Recently answered" (10 asks), each agent's flagged checks (the latest 5) and an ask's
arguments (the first 12) each say how many are shown and link to where the rest are."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import httpx
import pytest

from tests.web.conftest import Browserish, Keys, bearer, check_body, put_rule

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def _ask(http: httpx.Client, keys: Keys, i: int, **extra: object) -> str:
    call = check_body(arguments={"order": str(i), "amount": 80, "order_total": 100, **extra})
    answer = http.post("/v1/check", json=call, headers=bearer(keys.agent)).json()
    assert answer["result"] == "ask", answer
    return str(answer["ask"]["ask_id"])


def _href(page: str, text: str) -> str:
    found = re.search(r'<a href="([^"]+)">' + re.escape(text), page)
    assert found, f"no link {text!r}"
    return html.unescape(found.group(1))


def test_recently_answered_says_it_is_cut_and_links_to_every_answered_ask(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    put_rule(http, keys.admin)
    ids = [_ask(http, keys, i) for i in range(12)]
    for ask_id in ids:
        done = http.post(f"/api/asks/{ask_id}/answer", json={"decision": "deny"},
                         headers=bearer(person_key))  # fmt: skip
        assert done.status_code == 200, done.text
    dana = sign_in(person_key)
    home = dana.get("/app").text
    assert "Showing the latest 10 answered asks." in home
    everything = dana.get(_href(home, "See every answered ask"))
    assert everything.status_code == 200
    rows = re.findall(r'<a href="/app/checks/(chk_[0-9a-f]+)">shop · refund_create</a>',
                      everything.text)  # fmt: skip
    assert len(rows) == 12 and "Show the next" not in everything.text
    paged = dana.get("/app/asks?answered=1&limit=5").text
    assert "Showing 5 answered asks on this page." in paged
    assert dana.get(_href(paged, "Show the next")).status_code == 200
    bad = dana.get("/app/asks?answered=1&cursor=nonsense")
    assert bad.status_code == 400 and "start again from the first page" in bad.text


def test_each_agents_flagged_checks_say_how_many_and_link_to_activity(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    put_rule(http, keys.admin)
    for i in range(7):
        _ask(http, keys, i)
    admin = sign_in(keys.admin)
    home = admin.get("/app").text
    assert "Showing the latest 5 of 7." in home
    link = _href(home, "7 asked")
    assert link.startswith("/app/activity?agent=claude-code&result=ask&since=")
    activity = admin.get(link)
    assert activity.status_code == 200, activity.text
    assert len(re.findall(r'<a class="call" href="/app/checks/', activity.text)) == 7


def test_an_asks_arguments_past_twelve_link_to_the_check(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    put_rule(http, keys.admin)
    many = {f"field_{n:02d}": n for n in range(12)}  # 12 more: 15 arguments in all
    _ask(http, keys, 1, **many)
    dana = sign_in(person_key)
    for page in (dana.get("/app").text, dana.get("/app/asks").text):
        assert "Showing 12 of 15 arguments." in page
        check = dana.get(_href(page, "See them all on the check"))
        assert check.status_code == 200 and "field_11" in check.text
