"""Outcomes, unchecked writes, coverage, overrides and the timeline (each check with its
outcome), on both stores."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import httpx
import pytest

from claros import jsonutil
from claros.auth import authenticate, create_key
from claros.canonical import canonical, canonical_bytes
from claros.errors import ConflictError
from claros.outcomes import OutcomeRequest, _check_fields, record_outcome
from claros.store.base import Doc, DocWrite, Store
from claros.timeline import timeline
from claros.wiring import Services
from tests.api.conftest import PERSON, WORKSPACE, Keys, bearer, check_body, put_rule


def _check(http: httpx.Client, key: str, name: str = "claude-code", guard: str = "claros-guard",
           call_id: str = "c1", **arguments: object) -> str:  # fmt: skip
    agent = {"name": name, "call_id": call_id, "via": {"guard": guard, "version": "1"}}
    body = check_body(agent=agent, arguments=arguments or {"amount": 5})
    response = http.post("/v1/check", json=body, headers=bearer(key))
    assert response.status_code == 200, response.text
    return str(response.json()["check_id"])


def _outcome(http: httpx.Client, key: str, check_id: str, status: str = "ok") -> httpx.Response:
    return http.post(f"/v1/check/{check_id}/outcome", json={"status": status, "summary": "done"},
                     headers=bearer(key))  # fmt: skip


def test_outcome_once_and_only_by_its_key(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    check_id = _check(http, keys.agent)
    other = create_key(services.store, WORKSPACE, "agent", person=PERSON)
    assert _outcome(http, other, check_id).status_code == 403
    first = _outcome(http, keys.agent, check_id)
    assert first.status_code == 201, first.text
    record = services.store.get_record(WORKSPACE, "outcome", check_id)
    assert record is not None and record["status"] == "ok" and record["summary"] == "done"
    second = _outcome(http, keys.agent, check_id, "error")
    assert second.status_code == 409 and "has an outcome already" in second.json()["message"]
    assert _outcome(http, keys.agent, "chk_nope").status_code == 404


def test_outcome_by_tool_use_id(http: httpx.Client, keys: Keys, services: Services) -> None:
    check_id = _check(http, keys.agent, call_id="toolu_01")
    body = {"tool_use_id": "toolu_01", "status": "error", "summary": "exit 1"}
    other = create_key(services.store, WORKSPACE, "agent", person=PERSON)
    assert http.post("/v1/outcomes", json=body, headers=bearer(other)).status_code == 404
    done = http.post("/v1/outcomes", json=body, headers=bearer(keys.agent))
    assert done.status_code == 201 and done.json()["check_id"] == check_id
    missing = {**body, "tool_use_id": "toolu_99"}
    assert http.post("/v1/outcomes", json=missing, headers=bearer(keys.agent)).status_code == 404


def test_bad_outcomes(http: httpx.Client, keys: Keys) -> None:
    check_id = _check(http, keys.agent)
    for body in ({"status": "maybe"}, {}, {"status": "ok", "extra": 1}):
        response = http.post(f"/v1/check/{check_id}/outcome", json=body,
                             headers=bearer(keys.agent))  # fmt: skip
        assert response.status_code == 400, body


def test_coverage_and_ran_after_stop(http: httpx.Client, keys: Keys) -> None:
    put_rule(http, keys.admin, id="s", response="stop", when="amount > 100")
    for i in range(3):
        _check(http, keys.agent, call_id=f"c{i}")
    stopped = _check(http, keys.agent, call_id="c9", amount=500)
    assert _outcome(http, keys.agent, stopped).status_code == 201  # it ran after a stop
    unchecked = {"app": "shop", "tool": "refund_create", "reason": "Claros unreachable",
                 "agent": {"name": "claude-code", "via": {"guard": "claros-guard"}}}  # fmt: skip
    assert http.post("/v1/unchecked", json=unchecked, headers=bearer(keys.agent)).status_code == 201
    _check(http, keys.agent, name="cursor", guard="cursor-native", call_id="x")
    report = http.get("/api/coverage?days=1", headers=bearer(keys.admin)).json()
    by_agent = {a["agent"]: a for a in report["agents"]}
    cc = by_agent["claude-code"]
    assert (cc["checked"], cc["unchecked"], cc["coverage"]) == (4, 1, 0.8)
    assert cc["ran_after_stop"] == 1 and cc["outcomes"] == 1
    assert by_agent["cursor"]["coverage"] is None and "coverage_note" in by_agent["cursor"]


def test_overrides(http: httpx.Client, keys: Keys, services: Services) -> None:
    put_rule(http, keys.admin, id="s", response="stop", when="amount > 100")
    stopped = _check(http, keys.agent, amount=500)
    allowed = _check(http, keys.agent, amount=5, call_id="c2")
    wrong = http.post(
        f"/api/checks/{stopped}/override",
        json={"verdict": "wrong_stop", "note": "fine"},
        headers=bearer(keys.admin),
    )
    assert wrong.status_code == 201, wrong.text
    row = services.store.get_record(WORKSPACE, "override", wrong.json()["override_id"])
    assert row is not None and row["verdict"] == "wrong_stop" and row["check_id"] == stopped
    missed = http.post(f"/api/checks/{allowed}/override", json={"verdict": "missed",
                       "rule_id": "s"}, headers=bearer(keys.person))  # fmt: skip
    assert missed.status_code == 201
    for check_id, body, status in [
        (allowed, {"verdict": "missed"}, 400),
        (allowed, {"verdict": "wrong_stop"}, 400),
        (allowed, {"verdict": "missed", "rule_id": "nope"}, 400),
        (allowed, {"verdict": "great"}, 400),
        ("chk_nope", {"verdict": "right_stop"}, 404),
    ]:
        response = http.post(f"/api/checks/{check_id}/override", json=body,
                             headers=bearer(keys.admin))  # fmt: skip
        assert response.status_code == status, (body, response.text)


def test_timeline_is_per_person_newest_first(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    ids = [_check(http, keys.agent, call_id=f"c{i}") for i in range(5)]
    body = check_body(agent={"name": "batch", "on_behalf_of": PERSON})
    by_service = http.post("/v1/check", json=body, headers=bearer(keys.service)).json()
    ids.append(by_service["check_id"])
    page = http.get("/api/me/timeline?limit=4", headers=bearer(keys.agent)).json()
    assert [i["check_id"] for i in page["items"]] == ids[::-1][:4]
    rest = http.get(f"/api/me/timeline?limit=4&before={page['next']}",
                    headers=bearer(keys.agent)).json()  # fmt: skip
    assert [i["check_id"] for i in rest["items"]] == ids[::-1][4:] and "next" not in rest
    admin_view = http.get("/api/me/timeline", headers=bearer(keys.admin)).json()
    assert admin_view["items"] == []  # the admin's own timeline: none of dana's checks


# --- the outcome joined into every view of its check ------------------------------------
def test_timeline_items_carry_their_outcome(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    ran = _check(http, keys.agent, call_id="c0")
    failed = _check(http, keys.agent, call_id="toolu_9")
    pending = _check(http, keys.agent, call_id="c2")
    assert _outcome(http, keys.agent, ran).status_code == 201
    by_call = {"tool_use_id": "toolu_9", "status": "error", "summary": "exit 1"}
    assert http.post("/v1/outcomes", json=by_call, headers=bearer(keys.agent)).status_code == 201
    again = _outcome(http, keys.agent, ran, "error")  # refused: the first one stays shown
    assert again.status_code == 409

    items = http.get("/api/me/timeline", headers=bearer(keys.agent)).json()["items"]
    shown = {i["check_id"]: i["outcome"] for i in items}
    assert shown[pending] is None
    assert shown[failed]["status"] == "error" and shown[failed]["summary"] == "exit 1"
    assert shown[ran]["status"] == "ok" and shown[ran]["summary"] == "done"
    record = services.store.get_record(WORKSPACE, "outcome", ran)
    assert record is not None and shown[ran]["reported_at"] == record["reported_at"]
    # The ledger's check row is as written: the outcome is an entry of its own.
    check = services.store.get_record(WORKSPACE, "check", ran)
    assert check is not None and "outcome" not in check
    # Paged, each page with its items' outcomes.
    first = http.get("/api/me/timeline?limit=2", headers=bearer(keys.agent)).json()
    rest = http.get(f"/api/me/timeline?limit=2&before={first['next']}",
                    headers=bearer(keys.agent)).json()  # fmt: skip
    assert [i["check_id"] for i in rest["items"]] == [ran]
    assert rest["items"][0]["outcome"]["status"] == "ok"


class _Counting:
    """The store, counting the reads made through it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        return getattr(self.store, name)


def test_a_timeline_page_is_one_read_whatever_its_outcomes(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    ids = [_check(http, keys.agent, call_id=f"c{i}") for i in range(4)]
    for check_id in ids[:3]:
        assert _outcome(http, keys.agent, check_id).status_code == 201
    counting = _Counting(services.store)
    dana = authenticate(services.store, f"Bearer {keys.agent}")
    page = timeline(counting, dana, limit=10, before=None)  # type: ignore[arg-type]
    assert counting.calls == ["query_docs"]
    assert [i["outcome"] is not None for i in page["items"]] == [False, True, True, True]


def test_outcome_of_a_check_without_a_timeline(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    # A service key acting for nobody: no timeline to show the outcome on.
    body = check_body(agent={"name": "batch", "via": {"guard": "claros-guard"}})
    anonymous = http.post("/v1/check", json=body, headers=bearer(keys.service)).json()
    assert anonymous["on_behalf_of"] is None
    assert _outcome(http, keys.service, anonymous["check_id"]).status_code == 201
    # A check whose timeline doc is gone (made before timelines were kept).
    check_id = _check(http, keys.agent)
    services.store.write_docs([DocWrite(WORKSPACE, f"timeline:{PERSON}", check_id, None)])
    assert _outcome(http, keys.agent, check_id).status_code == 201
    assert services.store.get_record(WORKSPACE, "outcome", check_id) is not None
    assert http.get("/api/me/timeline", headers=bearer(keys.agent)).json()["items"] == []


class _Moved(_Counting):
    """The store, with another writer moving a timeline doc right after it is read."""

    def get_doc(self, workspace: str, collection: str, key: str) -> Doc | None:
        doc = self.store.get_doc(workspace, collection, key)
        if doc is not None and collection.startswith("timeline:"):
            self.store.write_docs([DocWrite(workspace, collection, key, doc.value, doc.rev)])
        return doc


def test_the_outcome_and_its_timeline_doc_land_together(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    check_id = _check(http, keys.agent)
    moved = copy.copy(services)
    moved.store = _Moved(services.store)
    dana = authenticate(services.store, f"Bearer {keys.agent}")
    with pytest.raises(ConflictError, match="has an outcome already"):
        record_outcome(moved, dana, check_id, OutcomeRequest(status="ok"))
    assert services.store.get_record(WORKSPACE, "outcome", check_id) is None
    [item] = http.get("/api/me/timeline", headers=bearer(keys.agent)).json()["items"]
    assert item["outcome"] is None
    assert _outcome(http, keys.agent, check_id).status_code == 201  # nothing half written


@pytest.mark.parametrize(
    "raw",
    [
        canonical_bytes(
            {"key_id": "k1", "result": "allow", "on_behalf_of": PERSON, "n": 2**60,
             "amount": Decimal("12.50"), "agent": {"name": "cc", "via": {"guard": "g"}}}
        ),
        canonical_bytes({"key_id": "k1", "result": 7.5, "agent": {"name": 1e-7}, "big": 1.2e20}),
        b'{"key_id":"k1","result":"stop","x":"\\ud800"}',  # orjson refuses a lone surrogate
    ],
    ids=["a check row", "numbers where text is", "what orjson refuses"],
)  # fmt: skip
def test_an_outcome_reads_its_checks_fields_as_every_reader_does(raw: bytes) -> None:
    """The check record is parsed by orjson for an outcome's few fields: what it reads is
    what jsonutil.loads gives, and a number there (floats, not Decimals) is written into the
    outcome's record as the same canonical text."""
    got, want = _check_fields(raw), jsonutil.loads(raw)
    for path in (("key_id",), ("result",), ("on_behalf_of",), ("agent", "name"),
                 ("agent", "via", "guard")):  # fmt: skip
        a, b = got, want
        for step in path:
            a, b = (a or {}).get(step), (b or {}).get(step)
        assert canonical({"v": a}) == canonical({"v": b}), path
    assert got.keys() == want.keys()
