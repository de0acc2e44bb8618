"""Attacks on the pages the web app serves outside /app's own routes: the monthly
report's printable page, and what an admin typed showing up in a page as markup."""

from __future__ import annotations

import httpx
import pytest

from claros.wiring import Services
from tests.api.conftest import bearer
from tests.api.seed import Clock, Seeded, install_clock
from tests.api.seed import seed_october as seed

REPORT = "/api/evidence/report?workflow_id=refunds&month=2026-10&format=html"


@pytest.fixture
def october(services: Services, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    clock: Clock = install_clock(monkeypatch)
    return seed(services, clock, rule_title="<script>alert(1)</script>")


def test_another_site_cannot_frame_the_printable_report(
    http: httpx.Client, october: Seeded
) -> None:
    """A page on another site puts the report in a hidden frame to lift it by clickjacking
    (the admin's cookie rides along): the report must refuse to be framed, as /app does."""
    got = http.get(REPORT, headers=bearer(october.admin_key))
    assert got.status_code == 200, got.text
    assert got.headers.get("x-frame-options") == "DENY"
    csp = got.headers.get("content-security-policy") or ""
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert got.headers.get("x-content-type-options") == "nosniff"
    assert got.headers.get("cache-control") == "no-store"


def test_a_rule_title_cannot_run_script_in_the_printable_report(
    http: httpx.Client, october: Seeded
) -> None:
    got = http.get(REPORT, headers=bearer(october.admin_key))
    assert "<script>alert(1)</script>" not in got.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in got.text
