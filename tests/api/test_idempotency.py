"""Retries with the same Idempotency-Key get the first answer, not a second record."""

from __future__ import annotations

import httpx

from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body


def _entries(services: Services) -> int:
    head = services.store.head(WORKSPACE)
    return head.seq if head else 0


def _post(http: httpx.Client, key: str, path: str, body: dict, idem: str | None) -> httpx.Response:
    headers = bearer(key) | ({"Idempotency-Key": idem} if idem else {})
    return http.post(path, json=body, headers=headers)


def test_a_retried_check_is_recorded_once(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    first = _post(http, keys.agent, "/v1/check", check_body(), "retry-1")
    again = _post(http, keys.agent, "/v1/check", check_body(), "retry-1")
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert _entries(services) == 1
    other = _post(http, keys.agent, "/v1/check", check_body(), "retry-2")
    assert other.json()["check_id"] != first.json()["check_id"] and _entries(services) == 2
    plain = [_post(http, keys.agent, "/v1/check", check_body(), None) for _ in range(2)]
    assert plain[0].json()["check_id"] != plain[1].json()["check_id"]


def test_keys_are_per_api_key(http: httpx.Client, keys: Keys, services: Services) -> None:
    a = _post(http, keys.agent, "/v1/check", check_body(), "same")
    b = _post(http, keys.service, "/v1/check", check_body(), "same")
    assert a.json()["check_id"] != b.json()["check_id"] and _entries(services) == 2


def test_a_key_reused_with_another_body_is_refused(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    _post(http, keys.agent, "/v1/check", check_body(), "k")
    changed = _post(http, keys.agent, "/v1/check", check_body(tool="order_cancel"), "k")
    assert changed.status_code == 422 and "another body" in changed.json()["message"]
    assert _entries(services) == 1


def test_a_refused_request_can_be_retried_corrected(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    bad = _post(http, keys.agent, "/v1/check", check_body(colour="red"), "fix-me")
    assert bad.status_code == 400
    good = _post(http, keys.agent, "/v1/check", check_body(), "fix-me")
    assert good.status_code == 200 and _entries(services) == 1


def test_a_retried_outcome_gets_its_first_answer(http: httpx.Client, keys: Keys) -> None:
    check_id = _post(http, keys.agent, "/v1/check", check_body(), None).json()["check_id"]
    path = f"/v1/check/{check_id}/outcome"
    first = _post(http, keys.agent, path, {"status": "ok"}, "o-1")
    again = _post(http, keys.agent, path, {"status": "ok"}, "o-1")
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    without = _post(http, keys.agent, path, {"status": "ok"}, None)
    assert without.status_code == 409  # a second outcome, not a retry


def test_bad_idempotency_key(http: httpx.Client, keys: Keys) -> None:
    response = _post(http, keys.agent, "/v1/check", check_body(), "x" * 300)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["message"]
