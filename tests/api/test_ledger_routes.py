"""The ledger over HTTP, on both stores: entries, checkpoints, keys, verification."""

from __future__ import annotations

import json

import httpx

from claros.ledger import Checkpoint, Entry, PublicKey, verify_entries
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body


def _checks(http: httpx.Client, key: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        body = check_body(agent={"name": "t", "call_id": str(i)})
        response = http.post("/v1/check", json=body, headers=bearer(key))
        assert response.status_code == 200, response.text
        ids.append(response.json()["check_id"])
    return ids


def _lines(response: httpx.Response) -> list[dict[str, object]]:
    return [json.loads(line) for line in response.text.splitlines()]


def test_entries_page_and_resume(http: httpx.Client, keys: Keys) -> None:
    ids = _checks(http, keys.agent, 7)
    first = http.get("/v1/ledger/entries?since=0&limit=3", headers=bearer(keys.agent))
    assert first.status_code == 200
    assert first.headers["content-type"].startswith("application/x-ndjson")
    assert [e["seq"] for e in _lines(first)] == [1, 2, 3]
    assert first.headers["x-claros-next"] == "3"
    rest = http.get("/v1/ledger/entries?since=3", headers=bearer(keys.agent))
    lines = _lines(rest)
    assert [e["seq"] for e in lines] == [4, 5, 6, 7]
    assert [e["ref_id"] for e in lines] == ids[3:]
    assert rest.headers["x-claros-next"] == "7"
    empty = http.get("/v1/ledger/entries?since=7", headers=bearer(keys.agent))
    assert empty.text == "" and empty.headers["x-claros-next"] == "7"


def test_only_admin_and_audit_keys_get_records(http: httpx.Client, keys: Keys) -> None:
    _checks(http, keys.agent, 2)
    for kind in ("admin", "audit"):
        lines = _lines(http.get("/v1/ledger/entries", headers=bearer(keys.of(kind))))
        assert all(isinstance(e.get("event"), dict) for e in lines), kind
    for kind in ("agent", "service"):
        lines = _lines(http.get("/v1/ledger/entries", headers=bearer(keys.of(kind))))
        assert lines and all("event" not in e for e in lines), kind


def test_downloaded_chain_verifies_with_checkpoints(http: httpx.Client, keys: Keys) -> None:
    _checks(http, keys.agent, 12)  # checkpoint_every = 5: checkpoints at 5 and 10
    audit = bearer(keys.audit)
    entries = _lines(http.get("/v1/ledger/entries", headers=audit))
    cps = http.get("/v1/ledger/checkpoints", headers=audit).json()["checkpoints"]
    pubkeys = http.get("/v1/ledger/pubkey", headers=audit).json()["keys"]
    assert [c["seq"] for c in cps] == [5, 10]
    assert {"workspace", "seq", "hash", "ts", "key_id", "signature"} <= set(cps[0])
    report = verify_entries(
        WORKSPACE,
        [(Entry.from_json(e), e["event"]) for e in entries],
        [Checkpoint.from_json(c) for c in cps],
        [PublicKey.from_json(k) for k in pubkeys],
        compare_records=True,
    )
    assert report.ok, report.failures
    assert report.checkpoints_verified == 2 and report.unsigned_tail == 2


def test_checkpoint_on_demand(http: httpx.Client, keys: Keys, services: Services) -> None:
    empty = http.post("/v1/ledger/checkpoints", headers=bearer(keys.admin))
    assert empty.status_code == 409
    _checks(http, keys.agent, 3)
    response = http.post("/v1/ledger/checkpoints", headers=bearer(keys.admin))
    assert response.status_code == 201, response.text
    cp = response.json()
    assert cp["seq"] == 3
    assert services.store.latest_checkpoint(WORKSPACE) == Checkpoint.from_json(cp)


def test_checkpoints_paging(http: httpx.Client, keys: Keys) -> None:
    _checks(http, keys.agent, 15)
    page = http.get("/v1/ledger/checkpoints?limit=2", headers=bearer(keys.agent)).json()
    assert [c["seq"] for c in page["checkpoints"]] == [5, 10] and page["next"] == 10
    rest = http.get("/v1/ledger/checkpoints?since=10", headers=bearer(keys.agent)).json()
    assert [c["seq"] for c in rest["checkpoints"]] == [15] and "next" not in rest


def test_bad_paging_parameters(http: httpx.Client, keys: Keys) -> None:
    for query in ("since=-1", "since=abc", "limit=0", "limit=10001", "limit=1.5"):
        response = http.get(f"/v1/ledger/entries?{query}", headers=bearer(keys.agent))
        assert response.status_code == 400, query
        assert "query parameter" in response.json()["message"]


def test_server_side_verify(http: httpx.Client, keys: Keys, services: Services) -> None:
    _checks(http, keys.agent, 6)
    ok = http.get("/api/evidence/verify", headers=bearer(keys.admin)).json()
    assert ok["ok"] is True and ok["entries"] == 6 and ok["checkpoints_verified"] == 1
    assert ok["unsigned_tail"] == 1
