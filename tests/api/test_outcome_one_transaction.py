"""An outcome report with an Idempotency-Key is one transaction: the key's record rides the
outcome's own append (claros.api.idempotency.run_in_append), on both stores, over a real
local server."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from claros.api.idempotency import COMPLETED, INPROGRESS, OUTCOME_ANSWERS, _doc_key
from claros.auth import authenticate
from claros.clock import now_ms
from claros.local import LocalServer
from claros.store.base import GLOBAL, DocWrite, StorageUnavailableError, Store
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body


class _Store:
    """The store, counting its writes, and failing the next append when told to."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.appends = 0
        self.doc_writes: list[list[DocWrite]] = []
        self.fail_next_append = False

    def append_many(self, *args: Any, **kwargs: Any) -> Any:
        self.appends += 1
        if self.fail_next_append:
            self.fail_next_append = False
            raise StorageUnavailableError("disk full (injected); nothing was written")
        return self.store.append_many(*args, **kwargs)

    def write_docs(self, writes: Any) -> None:
        self.doc_writes.append(list(writes))
        self.store.write_docs(writes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture
def counted(services: Services) -> _Store:
    return _Store(services.store)


@pytest.fixture
def client(services: Services, counted: _Store) -> Iterator[httpx.Client]:
    wrapped = Services(services.settings, counted, services.signer)  # type: ignore[arg-type]
    srv = LocalServer(wrapped, "127.0.0.1", 0).start()
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            yield http
    finally:
        srv.stop()


def _check(http: httpx.Client, key: str) -> str:
    response = http.post("/v1/check", json=check_body(), headers=bearer(key))
    assert response.status_code == 200, response.text
    return str(response.json()["check_id"])


def _report(http: httpx.Client, key: str, check_id: str, idem: str | None,
            status: str = "ok") -> httpx.Response:  # fmt: skip
    headers = bearer(key) | ({"Idempotency-Key": idem} if idem else {})
    body = {"status": status, "summary": "done"}
    return http.post(f"/v1/check/{check_id}/outcome", json=body, headers=headers)


def _key_doc(services: Services, keys: Keys, check_id: str, idem: str) -> Any:
    who = authenticate(services.store, f"Bearer {keys.agent}", note_use=False)
    route = f"POST /v1/check/{check_id}/outcome"
    return services.store.get_doc(GLOBAL, OUTCOME_ANSWERS, _doc_key(who, route, idem))


def _key_writes(counted: _Store) -> list[DocWrite]:
    return [w for ws in counted.doc_writes for w in ws if w.collection == OUTCOME_ANSWERS]


def test_a_keyed_outcome_is_one_append_with_its_key(
    client: httpx.Client, keys: Keys, services: Services, counted: _Store
) -> None:
    check_id = _check(client, keys.agent)
    counted.appends, counted.doc_writes = 0, []
    first = _report(client, keys.agent, check_id, f"outcome-{check_id}")
    assert first.status_code == 201, first.text
    assert counted.appends == 1 and _key_writes(counted) == []  # no hold, no release
    doc = _key_doc(services, keys, check_id, f"outcome-{check_id}")
    assert doc is not None and doc.value["status"] == COMPLETED
    entry = services.store.record_entry(WORKSPACE, "outcome", check_id)
    assert entry is not None and first.json() == {
        "check_id": check_id, "status": "ok", "seq": entry.seq}  # fmt: skip
    # The retry gets the first answer, seq included, and appends nothing.
    again = _report(client, keys.agent, check_id, f"outcome-{check_id}")
    assert again.status_code == 201 and again.json() == first.json()
    assert again.headers["Idempotency-Key"] == f"outcome-{check_id}"
    assert counted.appends == 1 and services.store.head(WORKSPACE).seq == entry.seq
    # The same key with another body is refused; a second outcome without a key is too.
    other = _report(client, keys.agent, check_id, f"outcome-{check_id}", "error")
    assert other.status_code == 422 and "another body" in other.json()["message"]
    assert _report(client, keys.agent, check_id, None).status_code == 409


def test_a_failed_append_leaves_no_key_and_the_retry_records(
    client: httpx.Client, keys: Keys, services: Services, counted: _Store
) -> None:
    check_id = _check(client, keys.agent)
    counted.fail_next_append = True
    failed = _report(client, keys.agent, check_id, "k-1")
    assert failed.status_code == 503 and "disk full" in failed.json()["message"]
    assert _key_doc(services, keys, check_id, "k-1") is None  # nothing to take over
    assert services.store.get_record(WORKSPACE, "outcome", check_id) is None
    retry = _report(client, keys.agent, check_id, "k-1")
    assert retry.status_code == 201, retry.text
    assert services.store.get_record(WORKSPACE, "outcome", check_id) is not None


def test_a_refused_outcome_keeps_no_key(
    client: httpx.Client, keys: Keys, services: Services
) -> None:
    check_id = _check(client, keys.agent)
    bad = client.post(f"/v1/check/{check_id}/outcome", json={"status": "maybe"},
                      headers=bearer(keys.agent) | {"Idempotency-Key": "k-2"})  # fmt: skip
    assert bad.status_code == 400
    assert _key_doc(services, keys, check_id, "k-2") is None
    assert _report(client, keys.service, check_id, "k-2").status_code == 403  # not its key
    assert _report(client, keys.agent, "chk_nope", "k-2").status_code == 404
    assert _report(client, keys.agent, check_id, "k-2").status_code == 201


def test_a_key_written_meanwhile_refuses_the_append(
    client: httpx.Client, keys: Keys, services: Services, counted: _Store
) -> None:
    """Another request under the same key wrote its record between this one's read and its
    append: the append's condition fails, nothing is written, and the answer is the 409
    "recorded already" (the other request recorded it)."""
    check_id = _check(client, keys.agent)
    who = authenticate(services.store, f"Bearer {keys.agent}", note_use=False)
    doc_key = _doc_key(who, f"POST /v1/check/{check_id}/outcome", "k-3")
    real = counted.store.append_many

    def racing(*args: Any, **kwargs: Any) -> Any:
        services.store.write_docs([DocWrite(GLOBAL, OUTCOME_ANSWERS, doc_key, {"status": "x"}, 0)])
        return real(*args, **kwargs)

    counted.store = _Racing(counted.store, racing)  # type: ignore[assignment]
    refused = _report(client, keys.agent, check_id, "k-3")
    assert refused.status_code == 409 and refused.json()["error"] == "conflict"
    assert services.store.get_record(WORKSPACE, "outcome", check_id) is None


class _Racing:
    def __init__(self, store: Store, append_many: Any) -> None:
        self.store, self.append_many = store, append_many

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_held_key_is_in_progress_and_a_dead_hold_is_taken_over(
    client: httpx.Client, keys: Keys, services: Services
) -> None:
    """A record an older server left INPROGRESS: 409 ``idempotency_in_progress`` while its
    lease runs, taken over once it has ended."""
    check_id = _check(client, keys.agent)
    who = authenticate(services.store, f"Bearer {keys.agent}", note_use=False)
    doc_key = _doc_key(who, f"POST /v1/check/{check_id}/outcome", "k-4")
    body = b'{"status":"ok","summary":"done"}'
    now = now_ms()
    held = {"status": INPROGRESS, "payload_hash": hashlib.sha256(body).hexdigest(),
            "holder": "old", "lease_until": now + 60_000, "expiry": now + 86_400_000}  # fmt: skip
    services.store.write_docs([DocWrite(GLOBAL, OUTCOME_ANSWERS, doc_key, held, 0)])
    headers = bearer(keys.agent) | {"Idempotency-Key": "k-4", "Content-Type": "application/json"}
    path = f"/v1/check/{check_id}/outcome"
    busy = client.post(path, content=body, headers=headers)
    assert busy.status_code == 409 and busy.json()["error"] == "idempotency_in_progress"
    doc = services.store.get_doc(GLOBAL, OUTCOME_ANSWERS, doc_key)
    dead = {**held, "lease_until": now_ms() - 1}
    services.store.write_docs([DocWrite(GLOBAL, OUTCOME_ANSWERS, doc_key, dead, doc.rev)])
    taken = client.post(path, content=body, headers=headers)
    assert taken.status_code == 201, taken.text
    assert services.store.get_doc(GLOBAL, OUTCOME_ANSWERS, doc_key).value["status"] == COMPLETED


def test_an_outcome_by_call_is_one_append_with_its_key(
    client: httpx.Client, keys: Keys, services: Services, counted: _Store
) -> None:
    agent = {"name": "claude-code", "call_id": "toolu_07", "via": {"guard": "claros-hooks"}}
    body = check_body(agent=agent)
    assert client.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 200
    counted.appends, counted.doc_writes = 0, []
    headers = bearer(keys.agent) | {"Idempotency-Key": "use-07"}
    report = {"tool_use_id": "toolu_07", "status": "ok", "summary": None}
    first = client.post("/v1/outcomes", json=report, headers=headers)
    again = client.post("/v1/outcomes", json=report, headers=headers)
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    assert isinstance(first.json()["seq"], int)
    assert counted.appends == 1 and _key_writes(counted) == []
