"""A member files a verdict on a check that is not theirs through the API.

The check's page refuses it (404, tests/security/test_activity_scope.py), but
``POST /api/checks/{check_id}/override`` with the member's own person key took it: a
201, an ``override`` entry on the ledger under the member's name, counted in the evidence
(the AIUC-1 pack's false-stop rate reads ``wrong_stop`` overrides), on a check the member
may not even open; and the 201 against the 404 of an unknown id told them which check ids
exist. A member's verdict belongs on the checks they may see (their own and their
agents', and those asking them), or, as a rule's owner, on what their own rule did (a
stop it made, a call it missed); an admin files one on any check."""

from __future__ import annotations

import httpx
import pytest

from claros.auth import create_key
from claros.wiring import Services
from tests.api.conftest import bearer
from tests.api.seed import DANA, WS, Seeded, install_clock, seed_october

pytestmark = pytest.mark.parametrize("store", ["sqlite", "dynamodb"], indirect=True)


@pytest.fixture
def seeded(services: Services, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    return seed_october(services, install_clock(monkeypatch))


def _entries(services: Services) -> int:
    head = services.store.head(WS)
    return head.seq if head else 0


def test_member_cannot_file_an_override_on_another_persons_check_through_the_api(
    http: httpx.Client, seeded: Seeded, services: Services
) -> None:
    dana = create_key(services.store, WS, "person", person=DANA, label="dana")
    # Sam's agent's payout stop, under Erin's rule: not Dana's to see, nor her rule's.
    check_id = seeded.checks["c8"]
    before = services.store.query_docs(WS, f"overrides:{check_id}")
    entries = _entries(services)
    got = http.post(
        f"/api/checks/{check_id}/override",
        json={"verdict": "wrong_stop", "note": "this stop was wrong"},
        headers={**bearer(dana), "Idempotency-Key": "dana-1"},
    )
    assert got.status_code == 404, got.text
    # As for a check that does not exist: nothing tells her the id is real.
    assert got.json()["message"] == f"no check {check_id!r}"
    assert services.store.query_docs(WS, f"overrides:{check_id}") == before
    assert _entries(services) == entries


def test_admin_still_files_an_override_on_any_check(
    http: httpx.Client, seeded: Seeded, services: Services
) -> None:
    admin = create_key(services.store, WS, "admin", person="admin@acme.test")
    check_id = seeded.checks["c8"]
    got = http.post(
        f"/api/checks/{check_id}/override",
        json={"verdict": "right_stop"},
        headers={**bearer(admin), "Idempotency-Key": "admin-1"},
    )
    assert got.status_code == 201, got.text


def test_owner_still_files_a_verdict_on_what_her_rule_did(
    http: httpx.Client, seeded: Seeded, services: Services
) -> None:
    erin = create_key(services.store, WS, "person", person="erin@acme.test", label="erin")
    got = http.post(
        f"/api/checks/{seeded.checks['c8']}/override",
        json={"verdict": "wrong_stop"},  # her payout-stop stopped it
        headers={**bearer(erin), "Idempotency-Key": "erin-1"},
    )
    assert got.status_code == 201, got.text
