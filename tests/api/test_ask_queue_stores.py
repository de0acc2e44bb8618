"""The asks queue and the key lists on both stores (SQLite and moto DynamoDB): pages,
cursors, the open count, an answer leaving the queue, a revoked key listed as such."""

from __future__ import annotations

import hashlib

import httpx

from tests.api.conftest import Keys, bearer, check_body, put_rule


def test_the_queue_pages_and_counts_on_both_stores(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, when="amount > 100", response="ask")
    asked = []
    for i in range(3):
        call = check_body(arguments={"order": str(i), "amount": 500})
        asked.append(http.post("/v1/check", json=call, headers=bearer(keys.agent)).json())
    ids = [a["ask"]["ask_id"] for a in asked]
    first = http.get("/app/asks", params={"limit": 2}, headers=bearer(keys.person)).json()
    assert first["open"] == 3 and [a["ask_id"] for a in first["asks"]] == ids[:2]
    rest = http.get("/app/asks", params={"limit": 2, "after": first["next"]},
                    headers=bearer(keys.person)).json()  # fmt: skip
    assert [a["ask_id"] for a in rest["asks"]] == ids[2:] and rest["next"] is None
    done = http.post(f"/api/asks/{ids[0]}/answer", json={"decision": "approve"},
                     headers=bearer(keys.person))  # fmt: skip
    assert done.status_code == 200, done.text
    after = http.get("/app/asks", headers=bearer(keys.admin)).json()
    assert after["open"] == 2 and [a["ask_id"] for a in after["asks"]] == ids[1:]


def test_keys_page_by_page_on_both_stores(http: httpx.Client, keys: Keys) -> None:
    digest = hashlib.sha256(keys.service.encode()).hexdigest()[:16]
    assert http.post(f"/api/keys/{digest}/revoke", headers=bearer(keys.admin)).status_code == 200
    seen, after = [], ""
    while True:
        page = http.get("/api/keys", params={"limit": 2, "after": after},
                        headers=bearer(keys.admin)).json()  # fmt: skip
        seen += page["keys"]
        if not page["next"]:
            break
        after = page["next"]
    assert len(seen) == 5 and len({k["key_id"] for k in seen}) == 5
    assert {k["key_id"]: k["status"] for k in seen}[digest] == "revoked"
