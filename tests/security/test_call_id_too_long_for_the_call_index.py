"""An agent sends a check whose ``agent.call_id`` is 256 characters outside the BMP.

``call_id`` may be 256 characters (docs/api.md; the hooks send a tool call's
``tool_use_id`` there, cut to 256), and each check writes a doc keyed
``<key id>:<call id>`` so that ``POST /v1/outcomes`` finds it by ``tool_use_id``. On
DynamoDB that key is the doc's sort key, which holds at most 1,024 bytes: 256 characters
of four UTF-8 bytes each (1,041 with the key id) made the whole check's transaction a
ValidationException, answered 503 "storage is unavailable; retry shortly": a well-formed
check refused as an outage, which the guard retries (and, run ``--fail-open``, lets
through unchecked), and an error logged as the store's. On SQLite the same check was
answered. The call index now keys a call id too long for a sort key by its sha256, so the
check is logged and its outcome found by ``tool_use_id`` on both stores."""

from __future__ import annotations

import httpx
import pytest

from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body

pytestmark = pytest.mark.parametrize("store", ["sqlite", "dynamodb"], indirect=True)

LONG = "\U0001d538" * 256  # 256 characters, 1,024 UTF-8 bytes


def test_a_check_with_a_long_call_id_is_logged_and_its_outcome_found(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    body = check_body()
    body["agent"]["call_id"] = LONG  # type: ignore[index]
    checked = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert checked.status_code == 200, checked.text
    check_id = checked.json()["check_id"]
    assert services.store.get_record(WORKSPACE, "check", check_id) is not None

    reported = http.post(
        "/v1/outcomes",
        json={"tool_use_id": LONG, "status": "ok"},
        headers={**bearer(keys.agent), "Idempotency-Key": "long-call"},
    )
    assert reported.status_code == 201, reported.text
    assert reported.json()["check_id"] == check_id
    # Another key's tool_use_id of the same text finds nothing of this key's.
    other = http.post(
        "/v1/outcomes", json={"tool_use_id": LONG, "status": "ok"}, headers=bearer(keys.service)
    )
    assert other.status_code == 404, other.text


def test_a_plain_call_id_is_found_as_before(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    body = check_body()
    body["agent"]["call_id"] = "toolu_" + "x" * 250  # type: ignore[index]
    check_id = http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()["check_id"]
    # The doc is keyed as it always was: a call id that fits is not hashed.
    doc = services.store.get_doc(WORKSPACE, "call", f"{_key_id(keys.agent)}:toolu_{'x' * 250}")
    assert doc is not None and doc.value["check_id"] == check_id
    reported = http.post(
        "/v1/outcomes",
        json={"tool_use_id": "toolu_" + "x" * 250, "status": "error"},
        headers=bearer(keys.agent),
    )
    assert reported.status_code == 201 and reported.json()["check_id"] == check_id


def _key_id(key: str) -> str:
    from claros.auth import hash_key

    return hash_key(key)[:16]
