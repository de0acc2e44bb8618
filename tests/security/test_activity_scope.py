"""A member reads their own checks and their agents', never another person's: not by
listing (GET /api/checks, /app/activity), not by naming another person in the filter, not
by searching a check or ask id, not by opening a check's page or JSON, not by posting to
a check's forms. Each test is the attack; it must get nothing of Sam's.

Seen failing first: with Activity's scope turned off (every caller treated as an admin),
each of these attacks got Sam's checks."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from claros.auth import create_key
from claros.wiring import Services
from tests.api.conftest import bearer
from tests.api.seed import DANA, SAM, WS, Seeded, install_clock, seed_october
from tests.web.conftest import Browserish, sign_in  # noqa: F401 - the fixture

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@pytest.fixture
def seeded(services: Services, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    return seed_october(services, install_clock(monkeypatch))


@pytest.fixture
def dana(services: Services) -> str:
    """Dana's own sign-in key: a member, with no checks of her own (Sam's agent made them)."""
    return create_key(services.store, WS, "person", person=DANA, label="dana")


def test_member_cannot_list_another_persons_checks_through_api_checks(
    http: httpx.Client, seeded: Seeded, dana: str
) -> None:
    got = http.get("/api/checks", headers=bearer(dana))
    assert got.status_code == 200
    assert got.json()["checks"] == []
    assert got.json()["counts"]["total"] == 0


def test_member_cannot_name_another_person_in_the_filter(
    http: httpx.Client, seeded: Seeded, dana: str
) -> None:
    got = http.get("/api/checks", params={"person": SAM}, headers=bearer(dana))
    assert got.status_code == 403
    assert "members see only their own checks" in got.json()["message"]


def test_member_cannot_find_another_persons_check_by_searching_its_id(
    http: httpx.Client, seeded: Seeded, dana: str
) -> None:
    for q in (seeded.checks["c6"], seeded.asks["c3"], "5000"):
        got = http.get("/api/checks", params={"q": q}, headers=bearer(dana))
        assert got.status_code == 200
        assert got.json()["checks"] == [], q


def test_member_cannot_open_another_persons_check_through_api_checks_id(
    http: httpx.Client, seeded: Seeded, dana: str
) -> None:
    got = http.get(f"/api/checks/{seeded.checks['c6']}", headers=bearer(dana))
    assert got.status_code == 404
    assert got.json()["message"] == f"no check {seeded.checks['c6']!r}"  # as if none existed


def test_member_cannot_open_another_persons_check_page(
    seeded: Seeded,
    dana: str,
    sign_in: Callable[[str], Browserish],  # noqa: F811
) -> None:
    browser = sign_in(dana)
    page = browser.get(f"/app/checks/{seeded.checks['c6']}")
    assert page.status_code == 404
    assert "5000" not in page.text and SAM not in page.text
    listing = browser.get("/app/activity")
    assert listing.status_code == 200
    assert SAM not in listing.text and "refund_create" not in listing.text


def test_member_cannot_file_an_override_on_another_persons_check_from_its_page(
    seeded: Seeded,
    dana: str,
    sign_in: Callable[[str], Browserish],  # noqa: F811
    services: Services,
) -> None:
    browser = sign_in(dana)
    check_id = seeded.checks["c7"]
    got = browser.post_form(
        f"/app/checks/{check_id}/override", {"verdict": "wrong_stop", "note": "x", "once": "o1"}
    )
    assert got.status_code == 404
    assert services.store.query_docs(WS, f"overrides:{check_id}") == []


def test_agent_and_service_keys_cannot_browse_checks(
    http: httpx.Client, seeded: Seeded, services: Services
) -> None:
    agent = create_key(services.store, WS, "agent", person=SAM)
    service = create_key(services.store, WS, "service")
    for key in (agent, service):
        assert http.get("/api/checks", headers=bearer(key)).status_code == 403
        check = f"/api/checks/{seeded.checks['c1']}"
        assert http.get(check, headers=bearer(key)).status_code == 403
