"""Attack: a member who is about to be removed approves a `claros login` device code,
keeps the device code, and polls it after an admin removed them.

What must hold (docs/api.md, "Keys and people"; THREATS.md §1): removing a member stops
every key whose person they are, and every membership change is a ledger entry. A pending
device sign-in approved before the removal must not hand out a working key afterwards,
and must never put the removed person back into the workspace (least of all without a
`member_role` entry)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from claros.auth import create_key, hash_key
from claros.errors import ForbiddenError
from claros.store.base import GLOBAL
from claros.wiring import Services
from tests.api.conftest import PERSON, WORKSPACE, Keys, bearer, check_body


def key_id(key: str) -> str:
    return hash_key(key)[:16]


def _member_role_entries(services: Services) -> list[str]:
    return [
        e.ref_id
        for e in services.store.entries(WORKSPACE, since=0, limit=10_000)
        if e.kind == "member_role"
    ]


def _approved_by_dana(http: httpx.Client, keys: Keys) -> dict[str, Any]:
    """A `claros login` started, and approved by Dana with her person key."""
    started: dict[str, Any] = http.post("/v1/device/code", json={"name": "dana-laptop"}).json()
    approved = http.post(
        "/app/device",
        json={"user_code": started["user_code"], "decision": "approve"},
        headers=bearer(keys.person),
    )
    assert approved.status_code == 200, approved.text
    return started


def test_a_device_code_approved_before_removal_yields_no_key_after_it(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    started = _approved_by_dana(http, keys)

    gone = http.delete(f"/api/members/{PERSON}", headers=bearer(keys.admin))
    assert gone.status_code == 200, gone.text
    entries_before = _member_role_entries(services)

    polled = http.post("/v1/device/token", json={"device_code": started["device_code"]})
    key = polled.json().get("key") if polled.status_code == 200 else None

    # The removed person is not a member again, silently or otherwise.
    members = http.get("/api/members", headers=bearer(keys.admin)).json()["members"]
    assert PERSON not in {m["email"] for m in members}, (
        f"polling the device code put {PERSON} back into the workspace: {members}"
    )
    assert _member_role_entries(services) == entries_before
    # And no key came out of it that the check API accepts: the poll says why.
    assert polled.status_code == 400, polled.text
    assert polled.json()["error"] == "access_denied"
    assert "no longer a member" in polled.json()["message"]
    if key:
        assert http.post("/v1/check", json=check_body(), headers=bearer(key)).status_code == 401
    # The code is used up: polling again does not try once more.
    again = http.post("/v1/device/token", json={"device_code": started["device_code"]})
    assert again.status_code == 404, again.text


def test_a_device_code_approved_with_a_key_revoked_since_yields_no_key(
    http: httpx.Client, keys: Keys
) -> None:
    """The same for the approving key itself: revoked after it approved, nothing is minted
    from it (before, the poll minted a key that only its first use refused)."""
    started = _approved_by_dana(http, keys)
    revoked = http.post(f"/api/keys/{key_id(keys.person)}/revoke", headers=bearer(keys.admin))
    assert revoked.status_code == 200, revoked.text

    polled = http.post("/v1/device/token", json={"device_code": started["device_code"]})
    assert polled.status_code == 400, polled.text
    assert polled.json()["error"] == "access_denied"
    assert "revoked" in polled.json()["message"]


def test_a_key_for_someone_not_a_member_is_refused_not_a_way_in(
    services: Services, keys: Keys
) -> None:
    """What the poll and the web app's agent keys mint with: a key made for a person who
    must be a member already never adds them (that is a ``member_role`` entry's job)."""
    store = services.store
    with pytest.raises(ForbiddenError, match="carol@acme.test is not a member"):
        create_key(store, WORKSPACE, "agent", person="carol@acme.test", with_member=False)
    assert store.get_doc(WORKSPACE, "member", "carol@acme.test") is None
    # A member gets their key, in their membership's term.
    key = create_key(store, WORKSPACE, "agent", person=PERSON, with_member=False)
    member = store.get_doc(WORKSPACE, "member", PERSON)
    assert member is not None
    assert store.get_doc(GLOBAL, "key", hash_key(key)).value["term"] == member.value["term"]
