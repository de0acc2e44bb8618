"""``GET /api/asks`` page by page (issue 13: nothing capped silently), on both stores:
every ask routed to the caller is reached through the cursors, open, answered or all, and
a bad cursor or a bad mix of filters is a plain 400."""

from __future__ import annotations

import httpx

from tests.api.conftest import Keys, bearer, check_body, put_rule


def _asks(http: httpx.Client, keys: Keys, n: int) -> list[str]:
    put_rule(http, keys.admin, when="amount > 100", response="ask")
    ids = []
    for i in range(n):
        call = check_body(arguments={"order": str(i), "amount": 500})
        ids.append(
            http.post("/v1/check", json=call, headers=bearer(keys.agent)).json()["ask"]["ask_id"]
        )
    return ids


def _every_page(http: httpx.Client, key: str, **params: str) -> tuple[list[str], int]:
    seen: list[str] = []
    pages = 0
    cursor = ""
    while True:
        body = http.get("/api/asks", params={**params, "cursor": cursor},
                        headers=bearer(key)).json()  # fmt: skip
        pages += 1
        seen += [a["ask_id"] for a in body["asks"]]
        if not body["next"]:
            return seen, pages
        cursor = body["next"]


def test_every_open_ask_is_reached_page_by_page(http: httpx.Client, keys: Keys) -> None:
    ids = _asks(http, keys, 5)
    first = http.get("/api/asks", params={"mine": "1", "limit": 2}, headers=bearer(keys.person))
    assert first.status_code == 200, first.text
    assert [a["ask_id"] for a in first.json()["asks"]] == ids[::-1][:2]
    assert first.json()["next"]
    seen, pages = _every_page(http, keys.person, limit="2")
    assert seen == ids[::-1] and pages == 3


def test_answered_asks_are_listed_apart_from_open_ones(http: httpx.Client, keys: Keys) -> None:
    ids = _asks(http, keys, 4)
    for ask_id in ids[:3]:
        done = http.post(f"/api/asks/{ask_id}/answer", json={"decision": "deny"},
                         headers=bearer(keys.person))  # fmt: skip
        assert done.status_code == 200, done.text
    answered, _ = _every_page(http, keys.person, answered="1", limit="2")
    assert answered == ids[:3][::-1]
    still_open, _ = _every_page(http, keys.person, limit="2")
    assert still_open == [ids[3]]
    everything, _ = _every_page(http, keys.person, all="1", limit="3")
    assert everything == ids[::-1]


def test_a_cursor_the_server_did_not_give_is_a_400(http: httpx.Client, keys: Keys) -> None:
    for cursor in ("not-a-cursor", "YTE6Y2hrXzEyMw", "x" * 200):
        bad = http.get("/api/asks", params={"cursor": cursor}, headers=bearer(keys.person))
        assert bad.status_code == 400, bad.text
        assert "cursor is not one this server gave out" in bad.json()["message"]


def test_all_and_answered_together_is_a_400(http: httpx.Client, keys: Keys) -> None:
    bad = http.get("/api/asks", params={"all": "1", "answered": "1"}, headers=bearer(keys.person))
    assert bad.status_code == 400 and "not both" in bad.json()["message"]
    bad = http.get("/api/asks", params={"answered": "maybe"}, headers=bearer(keys.person))
    assert bad.status_code == 400 and "answered must be 1 or 0" in bad.json()["message"]
    bad = http.get("/api/asks", params={"limit": "0"}, headers=bearer(keys.person))
    assert bad.status_code == 400 and "limit" in bad.json()["message"]
