"""Readable everywhere: the web app's error page for paths it does not have and for a
sign-out by link, form errors in plain words, the report's printable page."""

from __future__ import annotations

from collections.abc import Callable
from html import unescape

import httpx
import pytest

from claros.wiring import Services
from tests.api.seed import Clock, Seeded, install_clock
from tests.api.seed import seed_october as seed
from tests.web.conftest import HTML, Browserish, Keys, bearer

LIBRARY_WORDS = ("Input should be", "Extra inputs", "String should", "validation error", "[type=")


def _plain(text: str) -> None:
    for words in LIBRARY_WORDS:
        assert words not in text, words


def test_an_unknown_app_path_gets_the_error_page(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    for headers in (HTML, {"accept": "*/*"}, {}):
        got = http.get("/app/no-such-page", headers=headers)
        assert got.status_code == 404 and got.headers["content-type"].startswith("text/html")
        assert "There is no such page" in got.text and "<h1>Not found</h1>" in got.text
        assert got.headers["x-frame-options"] == "DENY"
    # Signed in, the page keeps the tabs.
    signed = sign_in(keys.admin).get("/app/rules/nothing/here")
    assert signed.status_code == 404 and 'href="/app/rules"' in signed.text
    # A client that asks for JSON only gets the API's answer; other paths too.
    api = http.get("/app/no-such-page", headers={"accept": "application/json"})
    assert api.status_code == 404 and api.json()["error"] == "not_found"
    assert http.get("/v1/nothing-here").json()["error"] == "not_found"


def test_sign_out_by_link_gets_the_error_page_and_signs_nobody_out(
    sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    browser = sign_in(keys.admin)
    got = browser.get("/app/signout")
    assert got.status_code == 405 and got.headers["allow"] == "POST"
    assert "Sign out with the Sign out button" in got.text
    assert browser.get("/app/rules").status_code == 200  # still signed in


@pytest.mark.parametrize(
    ("days", "status"), [("abc", 400), ("30", 400), ("12.5", 400), ("", 400), ("99999999", 400)]
)
def test_retention_form_errors_are_plain(
    sign_in: Callable[[str], Browserish], keys: Keys, days: str, status: int
) -> None:
    got = sign_in(keys.admin).post_form("/app/evidence/retention", {"days": days})
    assert got.status_code == status
    assert "Retention must be a whole number of days, at least 183" in got.text
    _plain(got.text)


def test_other_form_errors_are_plain(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    dana = sign_in(person_key)
    answer = dana.post_form("/app/asks/ask_x/answer", {"decision": "maybe"})
    assert answer.status_code == 400 and "Choose Approve or Deny." in answer.text
    _plain(answer.text)
    label = dana.post_form("/app/keys", {"label": "x" * 101})
    assert label.status_code == 400 and "The label is too long" in label.text
    device = dana.post_form("/app/device", {"user_code": "", "decision": "approve"})
    assert device.status_code == 400 and "Type the code your terminal shows" in device.text
    long_key = http.post(
        "/app/signin", data={"key": "k" * 201}, headers={**HTML, "origin": str(http.base_url)}
    )
    assert long_key.status_code == 400 and "That is not a Claros key" in unescape(long_key.text)
    for page in (answer, label, device, long_key):
        _plain(page.text)
    # Scripts posting JSON still get the field-by-field details.
    api = http.post("/app/keys", json={"label": "x" * 101}, headers=bearer(person_key))
    assert api.status_code == 400 and api.json()["details"][0]["field"] == "label"


@pytest.fixture
def october(services: Services, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    clock: Clock = install_clock(monkeypatch)
    return seed(services, clock)


def test_the_printable_report_is_a_styled_page_with_human_dates(
    http: httpx.Client, october: Seeded
) -> None:
    url = "/api/evidence/report?workflow_id=refunds&month=2026-10&format=html"
    got = http.get(url, headers=bearer(october.admin_key))
    assert got.status_code == 200
    page = got.text
    assert '<link rel="stylesheet" href="/app/static/claros.css' in page
    assert '<body class="report">' in page
    # Dates as <time> (the viewer's zone with claros.js, UTC text without it), not ms.
    assert '<time datetime="2026-10-01T00:00:00Z">2026-10-01 00:00 UTC</time>' in page
    assert "ms since the epoch" not in page
    assert "7,655 EUR" in page
    assert 'href="/api/evidence/report?workflow_id=refunds&amp;month=2026-10"' in page
