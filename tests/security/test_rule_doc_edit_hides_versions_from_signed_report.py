"""A rule's doc edited so that the signed monthly report leaves out its later versions.

The monthly report and the AIUC-1 pack say they count "from the ledger's own records,
never from mutable docs" (claros.evidence.activity), and the report holds the chain's
verify result and is signed with the ledger key. But which rule versions there are came
from each rule's doc: its ``version`` field bounded the versions read, and a rule with no
doc had none. Docs are not in the chain: anyone who may write docs (in AWS every role that
appends; locally the sqlite3 shell, triggers kept) sets a rule's doc back to version 1,
and Claros itself then signs a report whose rules leave out version 2 and whose counts
leave out every check made under it, with ``chain.ok`` true.

Now the versions are read from the ledger's records (every ``rule_version`` and
``rule_version_close`` record, never pruned), whatever the docs say."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from claros.evidence.activity import DAY_MS
from claros.store.base import DocWrite
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule
from tests.api.seed import install_clock, utc_ms

MARCH = utc_ms(2027, 3, 10)


def _report(http: httpx.Client, keys: Keys) -> dict[str, Any]:
    got = http.get(
        "/api/evidence/report",
        params={"workflow_id": "refunds", "month": "2027-03"},
        headers=bearer(keys.admin),
    )
    assert got.status_code == 200, got.text
    return dict(got.json()["report"])


def _aiuc1(http: httpx.Client, keys: Keys) -> dict[str, Any]:
    got = http.get("/api/evidence/aiuc1", params={"days": 30}, headers=bearer(keys.admin))
    assert got.status_code == 200, got.text
    return dict(got.json())


def _stops(http: httpx.Client, keys: Keys, n: int, start: int) -> None:
    for i in range(start, start + n):
        body = check_body(arguments={"order": str(i), "amount": 900, "order_total": 1000})
        got = http.post("/v1/check", json=body, headers=bearer(keys.agent))
        assert got.status_code == 200, got.text
        assert got.json()["result"] == "stop", got.text


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_rule_doc_set_back_does_not_change_the_signed_report(
    http: httpx.Client, keys: Keys, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = install_clock(monkeypatch, MARCH)
    put_rule(http, keys.admin, when="amount > 500", response="stop")
    _stops(http, keys, 2, 0)
    clock.at(MARCH + DAY_MS)
    put_rule(http, keys.admin, when="amount > 400", response="stop")  # version 2
    _stops(http, keys, 3, 10)
    clock.at(MARCH + 2 * DAY_MS)

    honest = _report(http, keys)
    assert [(r["id"], r["version"]) for r in honest["rules"]] == [
        ("refund-half", 1),
        ("refund-half", 2),
    ]
    assert honest["checks"]["total"] == 5
    assert honest["chain"]["ok"] is True
    pack = _aiuc1(http, keys)
    honest_sources = pack["controls"]["E004"]["holds"]["rule_versions_by_source"]

    # Someone who may write docs (not sign, not touch the ledger) sets the doc back.
    doc = services.store.get_doc(WORKSPACE, "rule", "refund-half")
    assert doc is not None and doc.value["version"] == 2
    services.store.write_docs(
        [DocWrite(WORKSPACE, "rule", "refund-half", {**doc.value, "version": 1})]
    )

    after = _report(http, keys)
    assert after["chain"]["ok"] is True  # the chain is untouched
    assert [(r["id"], r["version"]) for r in after["rules"]] == [
        ("refund-half", 1),
        ("refund-half", 2),
    ], after["rules"]
    assert after["checks"] == honest["checks"], after["checks"]
    pack = _aiuc1(http, keys)
    assert pack["controls"]["E004"]["holds"]["rule_versions_by_source"] == honest_sources
