"""An agent (or anyone with a key) asks for a record by an id too long to be one.

Ids in a route's path (``/v1/asks/{ask_id}``, ``/api/checks/{check_id}``, an app's or a
rule's name, ...) become the store's keys. On DynamoDB a sort key holds at most 1,024 bytes
and a partition key 2,048: a longer id made the read a ValidationException, answered 503
"storage is unavailable; retry shortly". Bad input was reported as an outage: the guard
retries a 503 (and, run ``--fail-open``, lets the write through), an alarm on 5xx fires,
and the error is logged as the store's. On SQLite the same request was a 404 or a 400.

Every route with a path parameter, called with each parameter 1,100 bytes long by a key
of a kind the route accepts, is answered below 500 on both stores."""

from __future__ import annotations

import re

import httpx
import pytest

from claros.api.app import FUNCTIONS, build_resolver
from claros.api.http import PERMISSIONS
from claros.auth import KEY_KINDS
from claros.wiring import Services
from tests.api.conftest import Keys, bearer

pytestmark = pytest.mark.parametrize("store", ["sqlite", "dynamodb"], indirect=True)

LONG_IDS = {
    "ascii": "a" * 1100,  # 1,100 bytes
    "four-byte": "\U0001d538" * 300,  # 300 characters, 1,200 UTF-8 bytes
}


# A body each route takes, so that the request reaches the lookup of its id (an empty body
# would be refused first, for what it lacks).
BODIES: dict[str, dict[str, object]] = {
    "answer": {"decision": "approve"},
    "override": {"verdict": "wrong_stop"},
    "acknowledge": {"note": "seen"},
    "outcome": {"status": "ok"},
    "edit": {"text": "id: x"},
    "role": {"role": "member"},
    "tools": {"tools": [{"name": "order_read", "read": True}]},
}


def _body(method: str, path: str) -> dict[str, object] | None:
    if method in ("GET", "DELETE"):
        return None
    return BODIES.get(path.rsplit("/", 1)[-1], {})


@pytest.mark.parametrize("shape", sorted(LONG_IDS))
def test_a_long_id_in_any_path_is_bad_input_not_an_outage(
    http: httpx.Client, keys: Keys, services: Services, shape: str
) -> None:
    build_resolver(services, FUNCTIONS)  # PERMISSIONS fills as routes are declared
    routes = [(m, p, k) for (m, p), k in sorted(PERMISSIONS.items()) if "{" in p]
    assert len(routes) >= 10, routes
    long_id = LONG_IDS[shape]
    outages = []
    for method, path, kinds in routes:
        kind = next(k for k in KEY_KINDS if k in kinds)
        url = re.sub(r"\{[^}]+\}", httpx.URL(path="/" + long_id).raw_path.decode()[1:], path)
        got = http.request(method, url, headers=bearer(keys.of(kind)), json=_body(method, path))
        if got.status_code >= 500:
            outages.append(f"{method} {path} as {kind}: {got.status_code} {got.text[:120]}")
    assert not outages, "\n".join(outages)
