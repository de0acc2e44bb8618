"""Attacks on the pages the web app serves outside /app's own routes: the monthly
report's printable page, and what an admin typed showing up in a page as markup."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from claros.wiring import Services
from tests.api.conftest import Keys, bearer, put_rule
from tests.api.seed import Clock, Seeded, install_clock
from tests.api.seed import seed_october as seed
from tests.web.conftest import Browserish, person_key, sign_in  # noqa: F401 - fixtures

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


def test_rule_text_sent_back_cannot_close_the_textarea_and_run_script(
    http: httpx.Client,
    keys: Keys,
    sign_in: Callable[[str], Browserish],  # noqa: F811 - the imported fixture
) -> None:
    """Bad rule text comes back in the form as typed: text that closes the textarea and
    opens a script must stay text (a link could make an admin post it)."""
    put_rule(http, keys.admin)
    evil = "title: </textarea><script>alert(1)</script>\nwhen: [unclosed"
    got = sign_in(keys.admin).post_form("/app/rules/refund-half/edit", {"text": evil})
    assert got.status_code == 400
    assert "<script>alert(1)</script>" not in got.text
    assert "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in got.text


def test_an_agent_key_cannot_close_a_mapping_to_blind_the_rules(
    http: httpx.Client, keys: Keys
) -> None:
    """An agent whose writes a mapping's facts would stop tries to switch the mapping off."""
    tools = [{"name": "order_read", "read": True}, {"name": "refund_create", "read": False}]
    http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent))
    fetch = {"tool": "order_read", "arguments": {"id": "$order"}, "into": "o"}
    mapping = {"app": "shop", "tool": "refund_create", "fetch": fetch}
    http.put("/api/mappings/shop/refund_create", json={"mapping": mapping},
             headers=bearer(keys.admin)).raise_for_status()  # fmt: skip
    for path in (
        "/api/mappings/shop/refund_create/close",
        "/app/mappings/shop/refund_create/close",
    ):
        got = http.post(path, headers=bearer(keys.agent))
        assert got.status_code == 403, (path, got.text)
    state = http.get("/api/mappings/shop/refund_create", headers=bearer(keys.admin)).json()
    assert state["status"] == "active"
