"""The sample Lambda events in ``events/`` (not a test module).

Each HTTP event is an API Gateway HTTP API (payload 2.0) request for one route, named
``<function>-<route name>.json``; ``sam local invoke <Function> -e events/<name>.json``
takes them as they are once ``REPLACE_WITH_KEY`` is replaced by a Claros key.
``checkpoint-stream.json`` is a DynamoDB stream batch of ledger entries and
``checkpoint-schedule.json`` the EventBridge event of the checkpoint schedule.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = [
    "EVENTS",
    "KEY_PLACEHOLDER",
    "AUTHORIZER_HOST",
    "authorizer_event",
    "event_names",
    "events_in_order",
    "load_event",
    "route_of",
]

EVENTS = Path(__file__).resolve().parent.parent / "events"
KEY_PLACEHOLDER = "REPLACE_WITH_KEY"
AUTHORIZER_HOST = "abc123.execute-api.us-east-1.amazonaws.com"
_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def event_names() -> list[str]:
    return sorted(p.stem for p in EVENTS.glob("*.json"))


def events_in_order() -> list[str]:
    """Every sample, in an order where they fit together: the tool list registered first
    (the mapping's read tool is one of them), the app removed last."""
    first, last = ["check-register-tools"], ["admin-remove-app", "web-app-remove-app"]
    return [*first, *(n for n in event_names() if n not in first + last), *last]


def route_of(event: dict[str, Any]) -> tuple[str, str]:
    """(method, path as API Gateway writes it) of an HTTP event."""
    method, _, path = str(event["routeKey"]).partition(" ")
    return method, path


def load_event(name: str, key: str | None = None, **path_params: str) -> dict[str, Any]:
    """``events/<name>.json``, with the bearer key and path parameters filled in.

    ``key`` replaces the placeholder in the ``authorization`` header; each keyword names a
    path parameter of the route (``check_id="chk_..."``) and rewrites ``pathParameters``,
    ``rawPath`` and ``requestContext.http.path`` together.
    """
    path = EVENTS / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no sample event {path}; there are: {', '.join(event_names())}")
    event: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if key is not None:
        headers = event.get("headers") or {}
        if KEY_PLACEHOLDER not in headers.get("authorization", ""):
            raise ValueError(f"{name} has no 'Bearer {KEY_PLACEHOLDER}' header to fill in")
        headers["authorization"] = headers["authorization"].replace(KEY_PLACEHOLDER, key)
    if path_params:
        _fill_path(name, event, path_params)
    return event


def _fill_path(name: str, event: dict[str, Any], values: dict[str, str]) -> None:
    if "routeKey" not in event:
        raise ValueError(f"{name} is not an HTTP event; it has no path parameters")
    _, template = route_of(event)
    params = dict(event.get("pathParameters") or {})
    unknown = set(values) - set(_PARAM.findall(template))
    if unknown:
        raise ValueError(f"{name}: the route {template} has no parameter {sorted(unknown)}")
    params.update(values)
    raw = _PARAM.sub(lambda m: quote(params[m.group(1)], safe=""), template)
    event["pathParameters"] = params
    event["rawPath"] = raw
    event["requestContext"]["http"]["path"] = raw


def authorizer_event(
    route: str = "POST /v1/check",
    authorization: str | None = None,
    cookies: list[str] | None = None,
) -> dict[str, Any]:
    """A REQUEST authorizer event, payload 2.0, as API Gateway sends it."""
    method, path = route.split(" ", 1)
    headers = {
        "host": AUTHORIZER_HOST,
        "user-agent": "claros-guard",
        "content-type": "application/json",
    }
    identity = []
    if authorization is not None:
        headers["authorization"] = authorization
        identity.append(authorization)
    event: dict[str, Any] = {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": f"arn:aws:execute-api:us-east-1:123456789012:abc123/$default/{method}{path}",
        "identitySource": identity,
        "routeKey": route,
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "domainName": AUTHORIZER_HOST,
            "domainPrefix": "abc123",
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "198.51.100.7",
                "userAgent": "claros-guard",
            },
            "requestId": "req-1",
            "routeKey": route,
            "stage": "$default",
            "time": "01/Dec/2026:12:00:00 +0000",
            "timeEpoch": 1796126400000,
        },
    }
    if cookies is not None:
        event["cookies"] = cookies
        headers["cookie"] = "; ".join(cookies)
    return event
