"""Keys and people over the API (issue 13): listing keys page by page, revoking, members
added, promoted, demoted and removed, each change a ledger entry that an export carries
and ``claros verify`` accepts; the asks queue with more open asks than a page."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros.auth import MAX_AUDIT_DAYS, create_key
from claros.store.base import GLOBAL, DocWrite
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import ADMIN, PERSON, WORKSPACE, Keys, bearer, check_body, put_rule
from tests.api.seed import OCT_1, install_clock

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def entries(services: Services, kind: str) -> list[dict[str, object]]:
    return [
        record
        for entry, record in services.store.entries_with_records(WORKSPACE)
        if entry.kind == kind and record is not None
    ]


def all_keys(http: httpx.Client, key: str, limit: int) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    after = ""
    while True:
        page = http.get("/api/keys", params={"limit": limit, "after": after}, headers=bearer(key))
        assert page.status_code == 200, page.text
        found += page.json()["keys"]
        if not page.json()["next"]:
            return found
        after = page.json()["next"]


def test_admin_lists_every_key_newest_first_page_by_page(http: httpx.Client, keys: Keys) -> None:
    listed = all_keys(http, keys.admin, limit=2)
    ids = [k["key_id"] for k in listed]
    assert len(ids) == len(set(ids)) == 5  # the other workspace's admin key is not here
    assert {key_id(keys.of(kind)) for kind in ("admin", "agent", "service", "audit", "person")} \
        == set(ids)  # fmt: skip
    made = [int(str(k["created_at"])) for k in listed]
    assert made == sorted(made, reverse=True)
    audit = next(k for k in listed if k["kind"] == "audit")
    assert audit["made_by"] == ADMIN and audit["status"] == "active"
    # The fixture makes its audit key to live MAX_AUDIT_DAYS (the default 90 is tested below).
    life = int(str(audit["expires_at"])) - int(str(audit["created_at"]))
    assert life == MAX_AUDIT_DAYS * 86_400_000


def test_a_member_lists_only_their_own_keys(http: httpx.Client, keys: Keys) -> None:
    mine = all_keys(http, keys.person, limit=50)
    assert {k["key_id"] for k in mine} == {key_id(keys.agent), key_id(keys.person)}
    assert all(k["person"] == PERSON for k in mine)


def test_keys_made_before_the_lists_are_listed(http: httpx.Client, keys: Keys,
                                               services: Services) -> None:  # fmt: skip
    old = "ck_" + "B" * 43
    digest = hashlib.sha256(old.encode()).hexdigest()
    doc = {"workspace": WORKSPACE, "kind": "service", "person": None, "made_by": None,
           "label": "from before", "created_at": 1}  # fmt: skip
    services.store.write_docs([DocWrite(GLOBAL, "key", digest, doc, 0)])  # no list entries
    listed = all_keys(http, keys.admin, limit=50)
    assert listed[-1]["key_id"] == digest[:16] and listed[-1]["label"] == "from before"
    assert (
        http.post(f"/api/keys/{digest[:16]}/revoke", headers=bearer(keys.admin)).json()["status"]
        == "revoked"
    )


def test_last_use_is_written_at_most_once_a_minute(
    http: httpx.Client, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = install_clock(monkeypatch, OCT_1)
    admin = create_key(services.store, WORKSPACE, "admin", person=ADMIN)
    agent = create_key(services.store, WORKSPACE, "agent", person=PERSON)

    def last_used() -> object:
        listed = all_keys(http, admin, limit=50)
        return next(k for k in listed if k["key_id"] == key_id(agent)).get("last_used_at")

    assert last_used() is None
    assert http.post("/v1/check", json=check_body(), headers=bearer(agent)).status_code == 200
    assert last_used() == OCT_1
    rev = services.store.get_doc(GLOBAL, "key", hashlib.sha256(agent.encode()).hexdigest())
    clock.later(59)
    http.post("/v1/check", json=check_body(), headers=bearer(agent))
    again = services.store.get_doc(GLOBAL, "key", hashlib.sha256(agent.encode()).hexdigest())
    assert rev is not None and again is not None and again.rev == rev.rev  # no write
    clock.later(1)
    http.post("/v1/check", json=check_body(), headers=bearer(agent))
    assert last_used() == OCT_1 + 60_000


def test_every_change_is_a_ledger_entry_and_the_export_verifies(
    http: httpx.Client, keys: Keys, services: Services, tmp_path: Path
) -> None:
    admin = bearer(keys.admin)
    added = http.post("/api/members", json={"email": "eve@acme.test"}, headers=admin)
    assert added.status_code == 201 and added.json()["key"].startswith("ck_")
    promoted = http.put("/api/members/eve%40acme.test", json={"role": "admin"}, headers=admin)
    assert promoted.status_code == 200, promoted.text
    eve_admin = promoted.json()["key"]
    assert http.get("/api/rules", headers=bearer(eve_admin)).status_code == 200
    # Eve demotes the first admin; that admin's key stops, and so does its audit key.
    demoted = http.put(f"/api/members/{ADMIN}", json={"role": "member"},
                       headers=bearer(eve_admin))  # fmt: skip
    assert demoted.status_code == 200, demoted.text
    assert http.get("/api/rules", headers=admin).status_code == 401
    assert http.get("/v1/ledger/entries", headers=bearer(keys.audit)).status_code == 401
    assert http.post(f"/api/keys/{key_id(keys.agent)}/revoke",
                     headers=bearer(eve_admin)).status_code == 200  # fmt: skip
    assert http.delete(f"/api/members/{PERSON}", headers=bearer(eve_admin)).status_code == 200

    roles = [(e["person"], e["role"], e.get("previous"), e["changed_by"])
             for e in entries(services, "member_role")]  # fmt: skip
    assert roles == [
        ("eve@acme.test", "member", None, ADMIN),
        ("eve@acme.test", "admin", "member", ADMIN),
        (ADMIN, "member", "admin", "eve@acme.test"),
        (PERSON, "removed", "member", "eve@acme.test"),
    ]
    [revoked] = entries(services, "key_revoked")
    assert (revoked["key_id"], revoked["kind"], revoked["person"], revoked["revoked_by"]) == (
        key_id(keys.agent), "agent", PERSON, "eve@acme.test")  # fmt: skip

    export = http.get("/api/evidence/export", headers=bearer(eve_admin))
    assert export.status_code == 200
    kinds = {line.split(b'"kind":"')[1].split(b'"')[0] for line in export.content.splitlines()
             if b'"kind":"' in line}  # fmt: skip
    assert {b"key_revoked", b"member_role"} <= kinds
    (tmp_path / "export.jsonl").write_bytes(export.content)
    assert verify(["--export", str(tmp_path / "export.jsonl")]) == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        ("PUT", f"/api/members/{PERSON}", {"role": "owner"}, 400, "role"),
        ("PUT", "/api/members/not-an-email", {"role": "admin"}, 400, "not an email"),
        ("PUT", "/api/members/nobody%40acme.test", {"role": "admin"}, 404, "not a member"),
        ("PUT", f"/api/members/{PERSON}", {"role": "member"}, 409, "a member already"),
        ("DELETE", "/api/members/nobody%40acme.test", None, 404, "not a member"),
        ("POST", "/api/members", {"email": "x"}, 400, "not an email"),
        ("POST", "/api/members", {"email": PERSON}, 409, "a member already"),
        ("POST", "/api/keys/zz/revoke", None, 404, "16 hex digits"),
        ("POST", "/api/keys/0123456789abcdef/revoke", None, 404, "no key"),
        ("GET", "/api/keys?after=%27%3B--", None, 400, "not a position"),
        ("GET", "/api/keys?limit=0", None, 400, "limit"),
    ],
)
def test_bad_input_gets_a_reason(
    http: httpx.Client, keys: Keys, method: str, path: str, body: object, status: int,
    message: str,
) -> None:  # fmt: skip
    got = http.request(method, path, json=body, headers=bearer(keys.admin))
    assert got.status_code == status, got.text
    assert message in got.json()["message"]


def test_revoking_twice_is_a_conflict(http: httpx.Client, keys: Keys) -> None:
    path = f"/api/keys/{key_id(keys.service)}/revoke"
    assert http.post(path, headers=bearer(keys.admin)).status_code == 200
    again = http.post(path, headers=bearer(keys.admin))
    assert again.status_code == 409 and "revoked already" in again.json()["message"]


# --- the asks queue -------------------------------------------------------------------
def _open_asks(http: httpx.Client, keys: Keys, n: int) -> list[str]:
    put_rule(http, keys.admin, when="amount > 100", response="ask")
    asks = []
    for i in range(n):
        call = check_body(arguments={"order": str(1000 + i), "amount": 500})
        answer = http.post("/v1/check", json=call, headers=bearer(keys.agent)).json()
        assert answer["result"] == "ask", answer
        asks.append(answer["ask"]["ask_id"])
    return asks


def _queue(http: httpx.Client, key: str, **params: str) -> dict[str, Any]:
    got = http.get("/app/asks", params=params, headers=bearer(key))
    assert got.status_code == 200, got.text
    return dict(got.json())


def test_the_queue_holds_every_open_ask_soonest_to_expire_first(
    http: httpx.Client, keys: Keys, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = install_clock(monkeypatch, OCT_1)
    asked = []
    for _ in range(3):  # three batches a minute apart: 51 asks
        asked += _open_asks(http, keys, 17)
        clock.later(60)
    first = _queue(http, keys.person)
    assert first["open"] == 51 and len(first["asks"]) == 50
    assert [a["ask_id"] for a in first["asks"]] == asked[:50]
    second = _queue(http, keys.person, after=str(first["next"]))
    assert [a["ask_id"] for a in second["asks"]] == asked[50:]
    assert second["next"] is None
    # The admin's queue is the workspace's; the 51st answered from it leaves 50 open.
    assert _queue(http, keys.admin)["open"] == 51
    done = http.post(f"/api/asks/{asked[50]}/answer", json={"decision": "deny"},
                     headers=bearer(keys.person))  # fmt: skip
    assert done.status_code == 200, done.text
    assert _queue(http, keys.person)["open"] == 50 == _queue(http, keys.admin)["open"]
    # An hour on (the ask TTL), the first batch expired: not open, not counted.
    clock.at(OCT_1 + services.settings.ask_ttl_s * 1000 + 1)
    left = _queue(http, keys.person)
    assert left["open"] == 33 and left["asks"][0]["ask_id"] == asked[17]


def test_a_member_sees_only_the_asks_routed_to_them(http: httpx.Client, keys: Keys,
                                                    services: Services) -> None:  # fmt: skip
    _open_asks(http, keys, 2)
    eve = create_key(services.store, WORKSPACE, "person", person="eve@acme.test")
    assert _queue(http, eve)["open"] == 0
    assert _queue(http, keys.person)["open"] == 2
    assert _queue(http, keys.admin, mine="1")["open"] == 0  # routed to Dana, not the admin


def test_asks_opened_before_the_queue_are_in_it(http: httpx.Client, keys: Keys,
                                                services: Services) -> None:  # fmt: skip
    asked = _open_asks(http, keys, 3)
    store = services.store
    for queue in ("ask_open", f"ask_open_for:{PERSON}"):  # as if opened by the old code
        store.write_docs([DocWrite(WORKSPACE, queue, d.key, None)
                          for d in store.query_docs(WORKSPACE, queue)])  # fmt: skip
    found = _queue(http, keys.person)
    assert found["open"] == 3 and [a["ask_id"] for a in found["asks"]] == asked


def test_home_says_when_asks_are_cut(http: httpx.Client, keys: Keys) -> None:
    _open_asks(http, keys, 51)
    signed = http.post("/app/signin", json={"key": keys.person})
    assert signed.status_code == 200
    home = http.get("/app", headers={"accept": "text/html"})
    assert "Showing 50 of 51 open asks." in home.text
    assert 'href="/app/asks?mine=1"' in home.text


# --- the pages, as HTML ---------------------------------------------------------------
HTML = {"accept": "text/html"}


def test_the_keys_page_escapes_what_people_typed(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    create_key(services.store, WORKSPACE, "agent", person=PERSON, label="<script>x()</script>")
    page = http.get("/app/keys", headers={**HTML, **bearer(keys.admin)})
    assert page.status_code == 200
    assert "&lt;script&gt;x()&lt;/script&gt;" in page.text and "<script>x()" not in page.text
    assert key_id(keys.service) in page.text and "nobody (workspace key)" in page.text


def test_a_members_keys_page_shows_their_keys_only(http: httpx.Client, keys: Keys) -> None:
    page = http.get("/app/keys", headers={**HTML, **bearer(keys.person)})
    assert page.status_code == 200 and "<h1>Your keys</h1>" in page.text
    assert key_id(keys.agent) in page.text and key_id(keys.admin) not in page.text
    assert 'id="members"' not in page.text


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/app/keys?after=%3Cb%3E", "after is not a position in the key list"),
        ("/app/asks?after=nonsense", "after is not a position in the asks queue"),
        ("/app/asks?limit=x", "must be a whole number"),
    ],
)
def test_bad_page_queries_get_the_error_page(
    http: httpx.Client, keys: Keys, path: str, message: str
) -> None:
    page = http.get(path, headers={**HTML, **bearer(keys.admin)})
    assert page.status_code == 400 and message in page.text
    assert page.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize(
    ("days", "status", "life"),
    [("", 201, 90), ("30", 201, 30), ("abc", 400, 0), ("0", 400, 0), ("9999", 400, 0)],
)
def test_an_audit_keys_life_is_chosen_when_it_is_made(
    http: httpx.Client, keys: Keys, services: Services, days: str, status: int, life: int
) -> None:
    made = http.post("/app/evidence/audit-keys", json={"label": "q4", "days": days},
                     headers=bearer(keys.admin))  # fmt: skip
    assert made.status_code == status, made.text
    if status == 400:
        assert made.json()["message"] == (
            "An audit key lives a whole number of days, from 1 to 3660."
        )
        return
    [listed] = [k for k in all_keys(http, keys.admin, 50) if k.get("label") == "q4"]
    assert int(listed["expires_at"]) - int(listed["created_at"]) == life * 86_400_000
    assert listed["made_by"] == ADMIN
