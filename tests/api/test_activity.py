"""GET /api/checks (Activity) and GET /api/checks/{check_id}, over October's seeded
activity (tests/api/seed.py): filters, search, the cursor, counts, errors, and one check
with its rules, facts, ask, overrides, outcome and verified ledger entry."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros.activity import decode_cursor, encode_cursor
from claros.auth import create_key
from claros.wiring import Services
from tests.api.conftest import bearer
from tests.api.seed import ADMIN, DANA, SAM, WS, Seeded, install_clock, seed_october, utc_ms

STORES = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@pytest.fixture
def seeded(services: Services, monkeypatch: pytest.MonkeyPatch) -> Seeded:
    return seed_october(services, install_clock(monkeypatch))


def _checks(http: httpx.Client, key: str, **params: str) -> dict[str, Any]:
    got = http.get("/api/checks", params=params, headers=bearer(key))
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


def _ids(body: dict[str, Any]) -> list[str]:
    return [c["check_id"] for c in body["checks"]]


@STORES
def test_admin_sees_every_check_newest_first(http: httpx.Client, seeded: Seeded) -> None:
    body = _checks(http, seeded.admin_key)
    ids = _ids(body)
    assert len(ids) == 12  # c0 (Sep 30), c1..c10, n1 (Nov 5)
    assert ids == sorted(ids, reverse=True)
    assert set(seeded.checks.values()) <= set(ids)
    assert body["scope"] == "workspace" and body["next"] is None
    assert body["counts"] == {
        "by_result": {"allow": 3, "nudge": 1, "ask": 4, "stop": 4},
        "total": 12, "counted": 12, "complete": True, "limit": 10_000,
    }  # fmt: skip
    first = body["checks"][0]
    assert first["result"] == "stop" and first["amount"] == 5000 and first["currency"] == "EUR"
    assert first["agent"]["name"] == "claude-code" and first["on_behalf_of"] == SAM
    assert first["outcome"] is None


@STORES
@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"app": "bank"}, ["c8", "c9"]),
        ({"tool": "refund_note"}, ["c10"]),
        ({"result": "stop", "app": "shop", "until": "2026-10-31"}, ["c6", "c7"]),
        ({"rule": "payout-stop"}, ["c8", "c9"]),
        ({"outcome": "ok"}, ["c1", "c6"]),
        ({"since": "2026-10-03", "until": "2026-10-04"}, ["c2", "c3"]),
        ({"since": "2026-10-03T00:00Z", "until": "2026-10-04T00:00:00+00:00"}, ["c2"]),
        ({"q": "800"}, ["c8"]),
        ({"agent": "cursor"}, []),
        ({"person": DANA}, []),
    ],
)
def test_filters(
    http: httpx.Client, seeded: Seeded, params: dict[str, str], names: list[str]
) -> None:
    body = _checks(http, seeded.admin_key, **params)
    assert sorted(_ids(body)) == sorted(seeded.checks[n] for n in names)
    assert body["counts"]["total"] == len(names)
    assert body["filters"]["app" if "app" in params else next(iter(params))] is not None


@STORES
def test_outcome_none_and_person(http: httpx.Client, seeded: Seeded) -> None:
    assert len(_ids(_checks(http, seeded.admin_key, outcome="none"))) == 10
    assert len(_ids(_checks(http, seeded.admin_key, person=SAM))) == 12


@STORES
def test_search_by_check_id_and_ask_id(http: httpx.Client, seeded: Seeded) -> None:
    c4 = seeded.checks["c4"]
    assert _ids(_checks(http, seeded.admin_key, q=c4)) == [c4]
    assert _ids(_checks(http, seeded.admin_key, q=seeded.asks["c5"])) == [seeded.checks["c5"]]
    # With another filter that the check does not pass: nothing.
    assert _ids(_checks(http, seeded.admin_key, q=c4, result="allow")) == []
    assert _ids(_checks(http, seeded.admin_key, q="chk_" + "0" * 28)) == []


@STORES
def test_the_cursor_walks_every_check_once(http: httpx.Client, seeded: Seeded) -> None:
    seen: list[str] = []
    params: dict[str, str] = {"limit": "5"}
    for _ in range(10):
        body = _checks(http, seeded.admin_key, **params)
        assert len(body["checks"]) <= 5
        seen += _ids(body)
        if not body["next"]:
            break
        params["cursor"] = body["next"]
        # Counts are of the filtered set, whatever the page.
        assert body["counts"]["total"] == 12
    assert len(seen) == 12 and len(set(seen)) == 12 and seen == sorted(seen, reverse=True)


def test_cursor_round_trip() -> None:
    check_id = "chk_" + "a" * 28
    assert decode_cursor(encode_cursor(check_id)) == check_id


@STORES
@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"result": "maybe"}, "result must be one of allow, nudge, ask, stop, not 'maybe'"),
        ({"outcome": "fine"}, "outcome must be ok, error or none"),
        ({"since": "yesterday"}, "since must be a date (2026-11-30)"),
        ({"until": "2026-13-01"}, "until must be a date"),
        ({"since": "2026-10-05", "until": "2026-10-01"}, "since must be before until"),
        ({"cursor": "not-a-cursor"}, "cursor is not one this server gave out"),
        ({"cursor": encode_cursor("chk_" + "a" * 28)[:-3]}, "cursor is not one"),
        ({"limit": "0"}, "limit must be a whole number from 1 to 200"),
        ({"limit": "5000"}, "limit must be a whole number from 1 to 200"),
        ({"color": "red"}, "unknown parameter 'color'"),
        ({"app": "x" * 201}, "app is longer than 200 characters"),
    ],
)
def test_bad_filters_are_400_with_a_reason(
    http: httpx.Client, seeded: Seeded, params: dict[str, str], reason: str
) -> None:
    got = http.get("/api/checks", params=params, headers=bearer(seeded.admin_key))
    assert got.status_code == 400, got.text
    assert got.json()["error"] == "bad_request"
    assert reason in got.json()["message"]


@STORES
def test_a_member_sees_the_checks_made_for_them(
    http: httpx.Client, seeded: Seeded, services: Services
) -> None:
    sam = create_key(services.store, WS, "person", person=SAM)
    body = _checks(http, sam)
    assert body["scope"] == "person" and body["person"] == SAM
    assert len(body["checks"]) == 12
    assert _ids(_checks(http, sam, person=SAM)) == _ids(body)


@STORES
def test_an_audit_key_reads_every_check(
    http: httpx.Client, services: Services, seeded: Seeded
) -> None:
    audit = create_key(services.store, WS, "audit", made_by=ADMIN)
    assert len(_ids(_checks(http, audit))) == 12


def _detail(http: httpx.Client, key: str, check_id: str) -> dict[str, Any]:
    got = http.get(f"/api/checks/{check_id}", headers=bearer(key))
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


@STORES
def test_one_check_has_everything(http: httpx.Client, seeded: Seeded) -> None:
    c4 = _detail(http, seeded.admin_key, seeded.checks["c4"])
    assert c4["call"] == {"app": "shop", "tool": "refund_create",
                          "arguments": {"amount": 300, "currency": "EUR"}}  # fmt: skip
    assert c4["agent"]["name"] == "claude-code" and c4["agent"]["call_id"] == "c4"
    assert c4["agent"]["via"] == {"guard": "claros-guard", "version": "1"}
    assert (c4["on_behalf_of"], c4["obo_source"]) == (SAM, "agent_key")
    rules = {r["id"]: r for r in c4["rules"]}
    assert set(rules) == {"refund-half", "refund-huge"}
    assert rules["refund-half"]["matched"] is True and rules["refund-huge"]["matched"] is False
    assert rules["refund-half"]["written"]["when"] == "amount > 100"
    assert rules["refund-half"]["confirm"]["made_by"] == "manual"
    assert len(rules["refund-half"]["hash"]) == 64
    assert rules["refund-half"]["link"] == "/app/rules?rule=refund-half&version=1#rule-refund-half"
    ask = c4["ask"]
    assert ask["status"] == "denied" and ask["decided_by"] == DANA
    assert ask["authority"] == "owner" and ask["approval"]["decision"] == "deny"
    assert ask["decided_at"] == utc_ms(2026, 10, 5, 10) + 40_000
    ledger = c4["ledger"]
    assert ledger["kind"] == "check" and ledger["ref_id"] == seeded.checks["c4"]
    assert ledger["checkpoint"]["seq"] >= ledger["seq"]  # checkpoints every 5 entries
    assert ledger["verify"] == {
        "ok": True, "covered": True, "problems": [],
        "from_seq": ledger["verify"]["from_seq"], "to_seq": ledger["checkpoint"]["seq"],
    }  # fmt: skip
    assert ledger["verify"]["from_seq"] <= ledger["seq"]


@STORES
def test_overrides_and_outcome_show_on_the_check(http: httpx.Client, seeded: Seeded) -> None:
    c6 = _detail(http, seeded.admin_key, seeded.checks["c6"])
    assert [(o["verdict"], o["by"], o["note"]) for o in c6["overrides"]] == [
        ("wrong_stop", ADMIN, "a known customer")
    ]
    assert c6["outcome"]["status"] == "ok"
    assert c6["ask"] is None and c6["result"] == "stop" and c6["severity"] == "high"
    assert c6["facts"] == {} and c6["resolved"] is False


@STORES
def test_a_missing_check_is_404(http: httpx.Client, seeded: Seeded) -> None:
    got = http.get("/api/checks/chk_nope", headers=bearer(seeded.admin_key))
    assert got.status_code == 404
    assert got.json()["message"] == "no check 'chk_nope'"


@STORES
def test_verify_this_entry_names_a_changed_record(
    http: httpx.Client, seeded: Seeded, settings: Any
) -> None:
    check_id = seeded.checks["c3"]
    db = Path(settings.data_dir).parent / "claros.db"
    conn = sqlite3.connect(db)
    # The operator, with the sqlite3 shell, drops the trigger and edits the record.
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute(
        "UPDATE records SET body = replace(body, '\"amount\":200', '\"amount\":20')"
        " WHERE kind = 'check' AND ref_id = ?",
        (check_id,),
    )
    conn.commit()
    conn.close()
    ledger = _detail(http, seeded.admin_key, check_id)["ledger"]
    assert ledger["verify"]["ok"] is False
    [problem] = ledger["verify"]["problems"]
    assert f"({'check'}) record hashes to" in problem and "the entry says" in problem


@STORES
def test_a_mapped_checks_facts_and_an_unknown_rule(
    http: httpx.Client, keys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.api.conftest import put_rule
    from tests.api.fake_guard import FakeGuard
    from tests.api.test_fetching_facts import INVOICE_MAPPING, accounting, put_mapping

    install_clock(monkeypatch, utc_ms(2026, 11, 20, 9))
    app = accounting()
    app.register(http, keys.agent)
    guard = FakeGuard(http, keys.agent, {"accounting": app})
    assert put_mapping(http, keys.admin, INVOICE_MAPPING).status_code == 200
    put_rule(http, keys.admin, id="big-invoice", app="accounting", tools=["invoice_submit"],
             response="stop", when="net > 10000", message="Invoice over 10,000")  # fmt: skip
    put_rule(http, keys.admin, id="po-needed", app="accounting", tools=["invoice_submit"],
             response="nudge", when="po_number == ''", on_unknown="fire")  # fmt: skip
    answer = guard.check("accounting", "invoice_submit", {"name": "ACC-PINV-0042"})
    detail = _detail(http, keys.admin, answer["check_id"])
    assert detail["resolved"] is True
    facts = detail["facts"]
    assert facts["fetched"]["fetch"]["grand_total"] == 12500
    assert facts["derived"] == {"net": 12000}
    assert facts["vars"]["supplier_invoices"] == 1
    assert "item_groups" in facts["vars"] and facts["context"]
    rules = {r["id"]: r for r in detail["rules"]}
    assert rules["po-needed"]["unknown"] == ["po_number"]
    assert rules["po-needed"]["on_unknown"] == "fire" and rules["po-needed"]["matched"] is True
    page = http.get(f"/app/checks/{answer['check_id']}",
                    headers={**bearer(keys.admin), "accept": "text/html"})  # fmt: skip
    assert page.status_code == 200
    for text in ("Fetched record", "Derived values", "Lookups and query results",
                 "Judge context", "on_unknown <code>fire</code>", "(no po_number)",
                 "ACC-PINV-0042", "Acme Paper"):  # fmt: skip
        assert text in page.text, text
