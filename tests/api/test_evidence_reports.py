"""Oversight per owner, the signed monthly report and the AIUC-1 pack, over a seeded
October (tests/api/seed.py), on both stores. Every figure is computed by hand below."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros.evidence.report import verify_signed_report
from claros.ledger import PublicKey
from claros.wiring import Services
from tests.api.conftest import bearer
from tests.api.seed import ADMIN, DANA, ERIN, NOV_1, OCT_1, Clock, Seeded, install_clock
from tests.api.seed import seed_october as seed

REPORT = "/api/evidence/report?workflow_id=refunds&month=2026-10"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return install_clock(monkeypatch)


@pytest.fixture
def october(services: Services, clock: Clock) -> Seeded:
    return seed(services, clock, rule_title='Refunds <b>over</b> 100 & "more"')


def _owner(rows: list[dict[str, Any]], who: str) -> dict[str, Any]:
    [row] = [r for r in rows if r["owner"] == who]
    return row


def test_oversight_per_owner(http: httpx.Client, october: Seeded) -> None:
    got = http.get("/api/evidence/oversight?days=31", headers=bearer(october.admin_key))
    assert got.status_code == 200, got.text
    body = got.json()
    assert (body["from"], body["until"], body["fast_seconds"]) == (OCT_1, NOV_1, 10)
    rows = body["owners"]
    assert [r["owner"] for r in rows] == [ADMIN, DANA, ERIN]
    dana = _owner(rows, DANA)
    # Stops and asks decided by refund-half or refund-huge: c3 c4 c5 (ask), c6 c7 (stop);
    # one wrong_stop (c6). Let through on shop refund_create: c1 c2; one missed (c1).
    assert (dana["wrong_stops"], dana["stops_and_asks"], dana["false_stop_rate"]) == (1, 5, 0.2)
    assert (dana["missed"], dana["let_through"], dana["miss_rate"]) == (1, 2, 0.5)
    # Her answers: c3 approved after 5 s (under 10), c4 denied after 40 s: median 22.5.
    assert dana["approved_too_fast"] == 1 and dana["median_seconds_to_decide"] == 22.5
    assert dana["rules"] == ["refund-half", "refund-huge"]
    erin = _owner(rows, ERIN)
    # refund-huge and payout-stop decided c6 c7 c8; c6 was a wrong stop: 1/3. Let through
    # on shop refund_create and bank payout: c1 c2 c9; missed: c9 (payout-stop).
    assert (erin["wrong_stops"], erin["stops_and_asks"], erin["false_stop_rate"]) == (1, 3, 0.3333)
    assert (erin["missed"], erin["let_through"], erin["miss_rate"]) == (1, 3, 0.3333)
    assert erin["median_seconds_to_decide"] is None and erin["answers"] == 0
    admin = _owner(rows, ADMIN)
    # No rule of their own: both rates are empty, not zero. One answer, after 20 s.
    assert admin["false_stop_rate"] is None and admin["miss_rate"] is None
    assert admin["median_seconds_to_decide"] == 20.0 and admin["approved_too_fast"] == 0
    slower = http.get("/api/evidence/oversight?days=31&fast_seconds=30",
                      headers=bearer(october.admin_key)).json()["owners"]  # fmt: skip
    assert _owner(slower, ADMIN)["approved_too_fast"] == 1
    assert _owner(slower, DANA)["approved_too_fast"] == 1


def test_oversight_refuses_bad_parameters(http: httpx.Client, october: Seeded) -> None:
    for query in ("days=0", "days=x", "fast_seconds=-1", "days=99999"):
        got = http.get(f"/api/evidence/oversight?{query}", headers=bearer(october.admin_key))
        assert got.status_code == 400, (query, got.text)


def test_monthly_report_figures(http: httpx.Client, october: Seeded, services: Services) -> None:
    got = http.get(REPORT, headers=bearer(october.admin_key))
    assert got.status_code == 200, got.text
    signed = got.json()
    report = signed["report"]
    assert (report["workflow_id"], report["month"], report["from"]) == ("refunds", "2026-10", OCT_1)
    assert [(r["id"], r["version"]) for r in report["rules"]] == [
        ("refund-half", 1), ("refund-huge", 1), ("refund-note", 1)]  # fmt: skip
    half = report["rules"][0]
    assert half["owners"] == [DANA] and half["response"] == "ask"
    assert half["confirmed_by"] == ADMIN and len(half["hash"]) == 64
    # Checks of the workflow in October: c1..c7 and c10 (c8 c9 are payouts; c0 is in
    # September, the November one after the month).
    assert report["checks"] == {"total": 8, "by_result": {"allow": 2, "nudge": 1, "ask": 3,
                                                            "stop": 2},
                                "approved_repeats": 0}  # fmt: skip
    near = report["near_misses"]
    assert near["total"] == 6 and near["by_severity"] == {"high": 2, "medium": 3, "low": 1}
    assert near["amounts_by_currency"] == {"EUR": "7655"}  # 200+300+150+5000+2000+5
    assert report["approvals"] == {"total": 3, "by_decision": {"approve": 2, "deny": 1},
                                   "by_authority": {"admin": 1, "owner": 2}}  # fmt: skip
    assert report["overrides"] == {"total": 2, "by_verdict": {"missed": 1, "wrong_stop": 1}}
    [agent] = report["coverage"]
    # 8 checked writes and 1 unchecked one on a refunds map: 8/9.
    assert (agent["checked"], agent["unchecked"], agent["coverage"]) == (8, 1, 0.8889)
    assert (agent["outcomes"], agent["ran_after_stop"]) == (2, 1)
    owners = report["oversight"]
    # Only the workflow's rules count: erin owns refund-huge here, not payout-stop.
    erin = _owner(owners, ERIN)
    assert (erin["false_stop_rate"], erin["miss_rate"]) == (0.5, 0.0)
    assert _owner(owners, DANA)["false_stop_rate"] == 0.2
    assert report["chain"]["ok"] is True and report["chain"]["failures"] == []
    head = services.store.head("acme")
    assert head is not None and report["checkpoint"]["seq"] == head.seq
    assert report["checkpoint"]["hash"] == head.hash
    keys = [PublicKey.from_json(k) for k in http.get(
        "/v1/ledger/pubkey", headers=bearer(october.admin_key)).json()["keys"]]  # fmt: skip
    assert verify_signed_report(signed, keys) == []
    signed["report"]["checks"]["by_result"]["stop"] = 1
    assert verify_signed_report(signed, keys)[0].startswith("report edited: sha256")


def test_report_as_a_printable_page(http: httpx.Client, october: Seeded) -> None:
    got = http.get(REPORT + "&format=html", headers=bearer(october.admin_key))
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/html")
    page = got.text
    # The rule's title holds markup: it shows as text.
    assert "<b>over</b>" not in page
    # (Jinja2 writes a quote as &#34;, where html.escape wrote &quot;: the same text.)
    assert "Refunds &lt;b&gt;over&lt;/b&gt; 100 &amp; &#34;more&#34;" in page
    # Amounts are shown with their currency, digits grouped.
    assert "refund-half" in page and "7,655 EUR" in page and "Evidence for an audit" in page


def test_report_escapes_what_it_shows(http: httpx.Client, october: Seeded) -> None:
    from claros.evidence.report import render_html

    signed = http.get(REPORT, headers=bearer(october.admin_key)).json()
    signed["report"]["rules"][0]["owners"] = ["<script>alert(1)</script>"]
    page = render_html(signed)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_report_bad_requests(http: httpx.Client, october: Seeded) -> None:
    key = bearer(october.admin_key)
    cases = {
        "/api/evidence/report?month=2026-10": 400,  # no workflow
        "/api/evidence/report?workflow_id=refunds": 400,  # no month
        "/api/evidence/report?workflow_id=refunds&month=2026-13": 400,
        "/api/evidence/report?workflow_id=refunds&month=Oct": 400,
        "/api/evidence/report?workflow_id=refunds&month=0000-01": 400,
        "/api/evidence/report?workflow_id=refunds&month=9999-12": 400,
        "/api/evidence/report?workflow_id=refunds&month=1969-12": 400,
        # Full-width digits: \d would take them for 2026.
        "/api/evidence/report?workflow_id=refunds&month=%EF%BC%92%EF%BC%90%EF%BC%92%EF%BC%96"
        "-11": 400,
        REPORT + "&format=pdf": 400,
        "/api/evidence/report?workflow_id=nope&month=2026-10": 404,
    }
    for url, status in cases.items():
        got = http.get(url, headers=key)
        assert got.status_code == status, (url, got.text)
        assert got.json()["message"]


def test_verify_report_command(
    http: httpx.Client, october: Seeded, services: Services, tmp_path: Path
) -> None:
    signed = http.get(REPORT, headers=bearer(october.admin_key)).json()
    keys = http.get("/v1/ledger/pubkey", headers=bearer(october.admin_key)).json()
    report, pubkeys = tmp_path / "report.json", tmp_path / "keys.json"
    report.write_text(json.dumps(signed))
    pubkeys.write_text(json.dumps(keys))
    env = {**os.environ, "CLAROS_DATA": str(tmp_path / "nothing-here")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "claros.ledger", "verify-report", *args],
                              capture_output=True, text=True, env=env, timeout=60)  # fmt: skip

    ok = run(str(report), "--keys", str(pubkeys))
    assert ok.returncode == 0 and ok.stdout.startswith("OK: "), ok.stdout + ok.stderr
    path = getattr(services.store, "path", None)
    if path is not None:  # SQLite: the server's own keys, from its data directory
        own = run(str(report), "--data", str(Path(path).parent))
        assert own.returncode == 0, own.stdout + own.stderr
    signed["report"]["approvals"]["total"] = 2
    report.write_text(json.dumps(signed))
    edited = run(str(report), "--keys", str(pubkeys))
    assert edited.returncode == 1 and "FAIL: report edited: sha256" in edited.stdout
    pubkeys.write_text(json.dumps({"keys": []}))
    signed["report"]["approvals"]["total"] = 3
    report.write_text(json.dumps(signed))
    unknown = run(str(report), "--keys", str(pubkeys))
    assert unknown.returncode == 1 and "signed by unknown key" in unknown.stdout
    no_keys = run(str(report))  # no --keys and no data directory: a usage error
    assert no_keys.returncode == 2 and "pass --keys" in no_keys.stderr
    assert "Traceback" not in no_keys.stderr
    missing = run(str(tmp_path / "nope.json"), "--keys", str(pubkeys))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr


def test_aiuc1_pack(http: httpx.Client, october: Seeded) -> None:
    key = bearer(october.admin_key)
    got = http.get("/api/evidence/aiuc1?days=31", headers=key)
    assert got.status_code == 200, got.text
    pack = got.json()
    assert pack["framework"] == "AIUC-1, Q4 2026 release"
    assert "not a certification" in pack["note"]
    controls = pack["controls"]
    assert list(controls) == ["D003", "B006", "E004", "E015", "C007", "C009"]
    d003 = controls["D003"]
    # Every check of October: allow c1 c2 c9, nudge c10, ask c3 c4 c5, stop c6 c7 c8.
    assert d003["holds"]["checks_by_result"] == {"allow": 3, "nudge": 1, "ask": 3, "stop": 3}
    assert d003["holds"]["approvals"]["total"] == 3
    assert [s["result"] for s in d003["samples"]["stops"]] == ["stop"] * 3
    assert "No native rate limits or cumulative caps" in d003["gaps"]
    e004 = controls["E004"]
    assert "Rules with no owner: refund-note" in e004["gaps"]
    assert {r["id"] for r in e004["holds"]["rules_with_owner"]} == {
        "refund-half", "refund-huge", "payout-stop"}  # fmt: skip
    assert e004["holds"]["rule_versions_by_source"] == {"manual": 4}
    e015 = controls["E015"]
    assert "No retention set" in e015["gaps"]
    assert e015["holds"]["chain_verify"]["ok"] is True
    c009 = controls["C009"]["holds"]
    assert (c009["stops"], c009["asks"], c009["nudges"]) == (3, 3, 1)
    assert c009["overrides"]["by_verdict"] == {"missed": 2, "wrong_stop": 1}
    assert controls["C007"]["gaps"] == ["No review SLA"]
    assert {r["id"] for r in controls["C007"]["holds"]["stop_and_ask_rules"]} == {
        "refund-half", "refund-huge", "payout-stop"}  # fmt: skip
    b006 = controls["B006"]["holds"]["coverage_by_agent"]
    # All 10 checks and the unchecked write, by the one agent: 10/11.
    assert [(a["agent"], a["checked"], a["unchecked"]) for a in b006] == [("claude-code", 10, 1)]
    assert http.put("/api/evidence/retention", json={"days": 365}, headers=key).status_code == 200
    after = http.get("/api/evidence/aiuc1?days=31", headers=key).json()["controls"]["E015"]
    assert "No retention set" not in after["gaps"] and after["holds"]["retention"]["days"] == 365


def test_every_aiuc1_control_lists_sample_records(http: httpx.Client, october: Seeded) -> None:
    """evidence.txt: "Each control lists what Claros holds, sample records and its gaps."
    B006 and C007 listed none, though the window holds stops and near-misses."""
    key = bearer(october.admin_key)
    controls = http.get("/api/evidence/aiuc1?days=31", headers=key).json()["controls"]
    empty = [c for c, control in controls.items() if not any(control["samples"].values())]
    assert empty == []
    # What each shows: the writes stopped (B006); the flagged checks, with their severity
    # (C007).
    assert [s["result"] for s in controls["B006"]["samples"]["stops"]] == ["stop"] * 3
    assert {s["severity"] for s in controls["C007"]["samples"]["near_misses"]} <= {
        "high", "medium", "low"}  # fmt: skip
    assert controls["C007"]["samples"]["near_misses"]
