"""A record read ahead (``fetched_with``), server side, on both stores: used only when it is
the read the mapping asks for now; set aside (``fetch_stale``) when the mapping changed or
is gone; refused when malformed. Validated exactly as a record read after a need."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer
from tests.api.test_fetching_facts import (
    INVOICE_MAPPING,
    INVOICES,
    ROUND_2,
    accounting,
    clock,  # noqa: F401 (the fixture pinning Claros's clock)
    put_mapping,
)

FETCH_ONLY = {
    "app": "accounting",
    "tool": "invoice_submit",
    "fetch": {"tool": "invoice_read", "arguments": {"name": "$name"}, "into": ""},
}
GOOD = INVOICES["ACC-PINV-0042"]
READ = {"tool": "invoice_read", "arguments": {"name": "ACC-PINV-0042"}}


@pytest.fixture(autouse=True)
def registered(http: httpx.Client, keys: Keys) -> None:
    accounting().register(http, keys.agent)


def _check(
    http: httpx.Client, key: str, fetched: dict[str, Any] | None, fetched_with: Any = None
) -> httpx.Response:
    body: dict[str, Any] = {
        "app": "accounting",
        "tool": "invoice_submit",
        "arguments": {"name": "ACC-PINV-0042"},
        "agent": {"name": "t"},
    }
    if fetched is not None:
        body["fetched"] = fetched
    if fetched_with is not None:
        body["fetched_with"] = fetched_with
    return http.post("/v1/check", json=body, headers=bearer(key))


def test_a_record_read_ahead_is_used_in_one_check(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    assert put_mapping(http, keys.admin, FETCH_ONLY).status_code == 200
    answer = _check(http, keys.agent, {"fetch": GOOD}, READ).json()
    assert answer["result"] == "allow" and "fetch_stale" not in answer
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None and row["resolved"] is True and row["fetched"] == {"fetch": GOOD}


def test_a_read_ahead_then_the_next_round_as_always(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_mapping(http, keys.admin, INVOICE_MAPPING)
    second = _check(http, keys.agent, {"fetch": GOOD}, READ).json()
    assert second["result"] == "need" and "fetch_stale" not in second
    assert sorted(n["key"] for n in second["need"]) == sorted(ROUND_2)
    done = _check(http, keys.agent, {"fetch": GOOD, **ROUND_2}, READ).json()
    assert done["result"] == "allow"
    row = services.store.get_record(WORKSPACE, "check", done["check_id"])
    assert row is not None and row["fetched"]["fetch"] == GOOD


@pytest.mark.parametrize(
    "read",
    [
        {"tool": "invoice_read", "arguments": {"name": "ACC-PINV-0043"}},  # another record
        {"tool": "item_read", "arguments": {"name": "ACC-PINV-0042"}},  # another tool
        {"tool": "invoice_read", "arguments": {"name": "ACC-PINV-0042", "x": 1}},
        {"tool": "invoice_read"},
    ],
)
def test_a_stale_read_ahead_is_set_aside_and_the_need_answered(
    http: httpx.Client, keys: Keys, services: Services, read: dict[str, Any]
) -> None:
    put_mapping(http, keys.admin, FETCH_ONLY)
    before = services.store.head(WORKSPACE)
    answer = _check(http, keys.agent, {"fetch": GOOD}, read).json()
    assert answer == {"allowed": False, "result": "need", "fetch_stale": True, "need": [
        {"key": "fetch", "kind": "fetch", "tool": "invoice_read",
         "arguments": {"name": "ACC-PINV-0042"}, "template": {"name": "$name"}}]}  # fmt: skip
    assert services.store.head(WORKSPACE) == before  # nothing logged


def test_a_mapping_edited_since_the_read_ahead_is_asked_again(
    http: httpx.Client, keys: Keys
) -> None:
    edited = {**FETCH_ONLY, "fetch": {"tool": "invoice_read", "arguments": {"name": "$invoice"}}}
    put_mapping(http, keys.admin, edited)
    body = {"app": "accounting", "tool": "invoice_submit", "agent": {"name": "t"},
            "arguments": {"name": "ACC-PINV-0042", "invoice": "ACC-PINV-0043"},
            "fetched": {"fetch": GOOD}, "fetched_with": READ}  # fmt: skip
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()
    assert answer["fetch_stale"] is True
    assert answer["need"][0]["arguments"] == {"name": "ACC-PINV-0043"}


def test_a_read_ahead_for_a_closed_mapping_is_set_aside(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_mapping(http, keys.admin, FETCH_ONLY)
    closed = http.post("/api/mappings/accounting/invoice_submit/close", headers=bearer(keys.admin))
    assert closed.status_code == 200, closed.text
    answer = _check(http, keys.agent, {"fetch": GOOD}, READ).json()
    # Decided on the call alone, as a check with nothing read; the record is not logged.
    assert answer["result"] == "allow" and answer["fetch_stale"] is True
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None and "fetched" not in row and "resolved" not in row


@pytest.mark.parametrize(
    ("fetched", "fetched_with", "message"),
    [
        (None, READ, "fetched_with names the read of fetched.fetch, which is missing"),
        ({"queries[0]": 1}, READ, "which is missing"),
        ({"fetch": GOOD}, {"tool": "not a name!", "arguments": {}}, "fetched_with.tool"),
        ({"fetch": GOOD}, {**READ, "stamp": "x"}, "fetched_with.stamp"),
        ({"fetch": GOOD}, {"tool": "invoice_read", "arguments": [1]}, "fetched_with.arguments"),
        ({"fetch": GOOD}, "invoice_read", "fetched_with"),
        # Validated as a record read after a need: not trusted more for coming first.
        ({"fetch": [1, 2]}, READ, "fetched.fetch must be the record read (a JSON object)"),
        ({"fetch": {"result": "Invoice 42: 12,500 EUR"}}, READ, "not a record"),
        ({"fetch": {**GOOD, "blob": "x" * 600_000}}, READ, "larger than 524,288 bytes"),
    ],
)
def test_a_bad_read_ahead_is_refused_and_nothing_logged(
    http: httpx.Client,
    keys: Keys,
    services: Services,
    fetched: dict[str, Any] | None,
    fetched_with: Any,
    message: str,
) -> None:
    put_mapping(http, keys.admin, FETCH_ONLY)
    before = services.store.head(WORKSPACE)
    response = _check(http, keys.agent, fetched, fetched_with)
    assert response.status_code == 400, response.text
    assert message in response.text
    assert services.store.head(WORKSPACE) == before
