"""POST /api/mappings/{app}/{tool}/close: an admin closes a mapping as a rule is closed,
a ledger entry says who, when and why, and its tool's checks read the arguments alone."""

from __future__ import annotations

import httpx

from claros.mapping.service import mapping_versions
from claros.wiring import Services
from tests.api.conftest import ADMIN, WORKSPACE, Keys, bearer, check_body

MAPPING = {
    "app": "shop",
    "tool": "refund_create",
    "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"},
}
CLOSE = "/api/mappings/shop/refund_create/close"


def _mapped(http: httpx.Client, keys: Keys) -> None:
    tools = [{"name": "order_read", "read": True}, {"name": "refund_create", "read": False}]
    registered = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent))
    assert registered.status_code == 200, registered.text
    saved = http.put(
        "/api/mappings/shop/refund_create", json={"mapping": MAPPING}, headers=bearer(keys.admin)
    )
    assert saved.status_code == 200, saved.text


def test_closing_a_mapping_stops_its_fetch_and_is_logged(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    _mapped(http, keys)
    before = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent)).json()
    assert before["result"] == "need", before
    closed = http.post(CLOSE, json={"reason": "orders moved"}, headers=bearer(keys.admin))
    assert closed.status_code == 200, closed.text
    state = closed.json()
    assert state["status"] == "closed"
    assert state["closed"]["closed_by"] == ADMIN and state["closed"]["reason"] == "orders moved"
    # Its tool is checked on the arguments alone now.
    after = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent)).json()
    assert after["result"] == "allow", after
    found = [
        (e, r)
        for e, r in services.store.entries_with_records(WORKSPACE, since=0)
        if e.kind == "mapping_version_close"
    ]
    assert len(found) == 1
    entry, record = found[0]
    assert entry.ref_id == "shop:refund_create@1"
    assert record is not None and record["closed_by"] == ADMIN and record["version"] == 1
    assert record["hash"] == state["hash"]
    [version] = mapping_versions(services.store, WORKSPACE, "shop", "refund_create")
    assert version["closed"]["reason"] == "orders moved"
    # A new save opens it again, as the next version.
    reopened = http.put(
        "/api/mappings/shop/refund_create", json={"mapping": MAPPING}, headers=bearer(keys.admin)
    ).json()
    assert (reopened["status"], reopened["version"], reopened["changed"]) == ("active", 2, True)
    again = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent)).json()
    assert again["result"] == "need"


def test_closing_a_mapping_without_a_body(http: httpx.Client, keys: Keys) -> None:
    _mapped(http, keys)
    closed = http.post(CLOSE, headers=bearer(keys.admin))
    assert closed.status_code == 200 and closed.json()["closed"]["reason"] == "closed"


def test_closing_a_mapping_bad_requests(http: httpx.Client, keys: Keys) -> None:
    _mapped(http, keys)
    admin = bearer(keys.admin)
    missing = http.post("/api/mappings/shop/nope/close", headers=admin)
    assert missing.status_code == 404 and missing.json()["message"] == "no mapping for shop nope"
    too_long = http.post(CLOSE, json={"reason": "x" * 2001}, headers=admin)
    assert too_long.status_code == 400
    unknown = http.post(CLOSE, json={"why": "x"}, headers=admin)
    assert unknown.status_code == 400
    assert http.post(CLOSE, headers=admin).status_code == 200
    twice = http.post(CLOSE, headers=admin)
    assert twice.status_code == 409 and "closed already" in twice.json()["message"]


def test_only_admins_close_mappings(http: httpx.Client, keys: Keys) -> None:
    _mapped(http, keys)
    for kind in ("agent", "service", "audit", "person", "other_workspace_admin"):
        got = http.post(CLOSE, headers=bearer(keys.of(kind)))
        assert got.status_code in (403, 404), (kind, got.text)
    state = http.get("/api/mappings/shop/refund_create", headers=bearer(keys.admin)).json()
    assert state["status"] == "active"
