"""What ``POST /v1/check`` no longer does per request (issue 14, a check that costs little),
and that the shortcuts answer as before: the body's nesting is walked only when it has more
brackets than the limit, and only the Idempotency-Key header is read, in any spelling."""

from __future__ import annotations

import json
from typing import Any

import httpx

from claros.api.app import FUNCTIONS, build_resolver
from claros.local import _LambdaContext
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body


def test_a_shallow_body_with_many_brackets_in_its_strings_is_checked(
    http: httpx.Client, keys: Keys
) -> None:
    # More brackets than the depth limit (32), all inside strings: the body is walked, and
    # its real depth (2) passes.
    body = check_body(arguments={"note": "[{" * 40, "other": "]}" * 40})
    response = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert response.status_code == 200, response.text
    assert response.json()["result"] == "allow"


def test_a_body_deeper_than_the_limit_is_still_refused(http: httpx.Client, keys: Keys) -> None:
    deep: Any = "x"
    for _ in range(33):
        deep = [deep]
    response = http.post("/v1/check", json=check_body(arguments={"a": deep}),
                         headers=bearer(keys.agent))  # fmt: skip
    assert response.status_code == 400 and "deeper than 32" in response.json()["message"]


def _event(key: str, body: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/v1/check",
        "rawQueryString": "",
        "headers": {
            "authorization": f"Bearer {key}",
            "content-type": "application/json",
            **headers,
        },  # fmt: skip
        "requestContext": {"http": {"method": "POST", "path": "/v1/check"}, "stage": "$default"},
        "body": body,
        "isBase64Encoded": False,
    }


def test_the_idempotency_key_header_is_read_in_any_spelling(services: Services, keys: Keys) -> None:
    """API Gateway lowercases header names, the local server too; an event that does not
    (a test, another front) still has its Idempotency-Key honoured."""
    app = build_resolver(services, FUNCTIONS)
    body = json.dumps(check_body())
    answers = []
    for spelling in ("Idempotency-Key", "IDEMPOTENCY-KEY", "idempotency-key"):
        result = app.resolve(_event(keys.agent, body, {spelling: "k-1"}), _LambdaContext())
        assert result["statusCode"] == 200, result
        answers.append(json.loads(result["body"]))
    assert answers[0]["check_id"] == answers[1]["check_id"] == answers[2]["check_id"]
    head = services.store.head(WORKSPACE)
    assert head is not None and head.seq == 1  # one record for the three requests
    # Without the header, each request is its own check.
    result = app.resolve(_event(keys.agent, body, {}), _LambdaContext())
    assert json.loads(result["body"])["check_id"] != answers[0]["check_id"]
