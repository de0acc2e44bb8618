"""Small pieces without a server: escaping, where sign-in may send you, the Evidence page's
"not available" parts, and the in-process call to another route."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from claros.api import web
from claros.auth import Principal
from claros.web.evidence_page import EvidenceData, Fetched, evidence_page
from claros.web.html import Safe, attrs, esc, render
from claros.web.pages import Chrome
from tests.web.conftest import Browserish, Keys

ADMIN = Principal("acme", "admin", "admin@acme.test", "0" * 16)


def test_values_are_escaped_and_safe_markup_is_not() -> None:
    assert esc("<a href='x'>&</a>") == "&lt;a href=&#x27;x&#x27;&gt;&amp;&lt;/a&gt;"
    assert esc(None) == "" and esc(Safe("<b>")) == "<b>"
    assert render("<p>{x}</p>", x='"><script>') == "<p>&quot;&gt;&lt;script&gt;</p>"
    assert render("<p>{x}</p>", x=Safe("<em>ok</em>")) == "<p><em>ok</em></p>"
    assert attrs(disabled=True, hidden=False, data_copy='a"b', class_="x") == (
        'disabled data-copy="a&quot;b" class="x"'
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "/app"),
        ("/app/rules", "/app/rules"),
        ("/app/device?code=BCDF-GHJK", "/app/device?code=BCDF-GHJK"),
        ("//evil.example/app", "/app"),
        ("https://evil.example/app", "/app"),
        ("/api/rules", "/app"),
        ("/app\\@evil.example", "/app"),
    ],
)
def test_sign_in_only_sends_you_within_the_app(given: str | None, expected: str) -> None:
    assert web.safe_next(given) == expected


def _data(**overrides: Any) -> EvidenceData:
    values: dict[str, Any] = {
        "workspace": "acme",
        "verify": {"ok": True, "entries": 0, "failures": []},
        "checkpoint": None,
        "public_keys": 0,
        "available": {"export": False, "stream": False, "report": False},
        "presigned_export": False,
        "retention": Fetched("GET /api/evidence/retention"),
        "aiuc1": Fetched("GET /api/evidence/aiuc1"),
        "oversight": Fetched("GET /api/evidence/oversight"),
        "workflows": ["refunds"],
        "month": "2026-11",
        "today": "2026-11-30",
    }
    values.update(overrides)
    return EvidenceData(**values)


def test_parts_this_server_lacks_say_which_route_they_need() -> None:
    page = evidence_page(Chrome(ADMIN, "t"), _data())
    for route in (
        "GET /api/evidence/export",
        "GET /api/evidence/retention",
        "GET /api/evidence/aiuc1",
        "GET /api/evidence/oversight",
        "GET /api/evidence/report",
    ):
        assert f"This part needs <code>{route}</code>" in page
    assert page.count("Not available on this server yet.") == 5
    assert 'href="/api/evidence/export"' not in page


def test_a_failing_part_shows_its_status_and_reason() -> None:
    failed = Fetched("GET /api/evidence/aiuc1", 503, {"message": "storage is <down>"})
    page = evidence_page(Chrome(ADMIN, "t"), _data(aiuc1=failed))
    assert "Could not load it (503)." in page and "storage is &lt;down&gt;" in page


def test_a_failing_chain_is_shown_with_each_failure() -> None:
    verify = {
        "ok": False,
        "entries": 3,
        "failures": [{"seq": 2, "kind": "check", "problem": "record <edited>"}],
    }
    page = evidence_page(Chrome(ADMIN, "t"), _data(verify=verify))
    assert "The chain does not verify." in page
    assert "<td>2</td><td>check</td><td>record &lt;edited&gt;</td>" in page


def test_rates_show_as_percentages() -> None:
    from decimal import Decimal

    oversight = Fetched(
        "GET /api/evidence/oversight",
        200,
        {"owners": [{"owner": "dana@acme.test", "false_stop_rate": Decimal("0.25"),
                     "miss_rate": None, "approved_too_fast": 2,
                     "median_seconds_to_decide": Decimal("4.5")}]},
    )  # fmt: skip
    page = evidence_page(Chrome(ADMIN, "t"), _data(oversight=oversight))
    assert ">25.0%<" in page and ">—<" in page and ">4.5<" in page


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_evidence_routes_missing_on_the_server(
    sign_in: Callable[[str], Browserish], keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in a function that does not serve the export, stream and report routes: the page
    says so for those; retention, the AIUC-1 pack and oversight are computed in place (in
    AWS their routes live in other functions), so they still show and retention saves."""
    monkeypatch.setattr(web, "serves", lambda app, method, path: False)
    admin = sign_in(keys.admin)
    page = admin.get("/app/evidence")
    assert page.status_code == 200 and page.text.count("Not available on this server yet") == 2
    assert "D003" in page.text and "Oldest record kept" in page.text
    saved = admin.post_form("/app/evidence/retention", {"days": "365"})
    assert saved.status_code in (200, 303), saved.text
    low = admin.post_form("/app/evidence/retention", {"days": "30"})
    assert low.status_code == 400 and "183" in low.text
