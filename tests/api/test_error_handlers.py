"""claros.api.errors_http tells pydantic's ValidationError apart from other ValueErrors
without importing pydantic (the functions whose routes validate no body never load it): a
validation error that escapes a route is still a 400 naming the fields, any other
ValueError still a 500 with nothing of it shown, and a CanonicalError (a ValueError with a
handler of its own) still its 400. A store's KeyTooLongError (a name longer than DynamoDB
keys) is the request's fault: a 400 with the reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from claros.api.errors_http import install_error_handlers
from claros.api.http import ClarosResolver
from claros.canonical import CanonicalError
from claros.config import Settings
from claros.store.base import KeyTooLongError
from claros.wiring import Services, build_services


class _Body(BaseModel):
    count: int


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    services = build_services(Settings(data_dir=tmp_path / "data"))
    try:
        yield services
    finally:
        services.close()


def _app(services: Services, raises: BaseException) -> ClarosResolver:
    app = ClarosResolver(services)

    # Powertools' own route (not claros.api.http.public, whose PUBLIC set tests/web pins).
    @app.get("/raise")
    def raise_it() -> Any:
        raise raises

    install_error_handlers(app)
    return app


def _get(app: ClarosResolver) -> tuple[int, dict[str, Any]]:
    http = {"method": "GET", "path": "/raise", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"}
    event = {
        "version": "2.0", "routeKey": "$default", "rawPath": "/raise", "rawQueryString": "",
        "headers": {}, "isBase64Encoded": False,
        "requestContext": {"http": http, "requestId": "r1", "stage": "$default"},
    }  # fmt: skip
    answer = app.resolve(event, None)
    return int(answer["statusCode"]), json.loads(answer["body"])


def _validation_error() -> Exception:
    try:
        _Body.model_validate({"count": "many"})
    except ValueError as exc:
        return exc
    raise AssertionError("validated")


def test_a_validation_error_that_escapes_a_route_is_a_400_naming_the_field(
    services: Services,
) -> None:
    status, body = _get(_app(services, _validation_error()))
    assert status == 400 and body["error"] == "bad_request"
    assert [d["field"] for d in body["details"]] == ["count"]


def test_another_value_error_is_a_500_that_shows_nothing_of_it(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    status, body = _get(_app(services, ValueError("secret detail")))
    assert (status, body) == (
        500, {"error": "internal", "message": "internal error; it has been logged"},
    )  # fmt: skip
    assert "unexpected error" in caplog.text and "secret detail" in caplog.text


def test_a_canonical_error_keeps_its_own_400(services: Services) -> None:
    status, body = _get(_app(services, CanonicalError("NaN is not JSON")))
    assert status == 400 and body["message"] == "invalid value: NaN is not JSON"


def test_a_name_too_long_to_key_is_a_400_with_the_reason_not_an_outage(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    why = "apps 'xxxx'... is too long a name to keep: DynamoDB keys hold at most 1,024 bytes"
    status, body = _get(_app(services, KeyTooLongError(why)))
    assert (status, body) == (400, {"error": "bad_request", "message": why})
    assert "storage error" not in caplog.text  # not logged as the store's failure
