"""Every route x every key kind: 401 without a valid key, 403 for a kind it does not
accept, anything else for the kinds it does. Walks the routes as declared, so a new route
cannot escape this matrix."""

from __future__ import annotations

import re

import httpx
import pytest

from claros.api.app import FUNCTIONS, build_resolver
from claros.api.http import PERMISSIONS
from claros.auth import KEY_KINDS
from claros.wiring import Services
from tests.api.conftest import Keys, bearer, check_body

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@pytest.fixture(autouse=True)
def _every_route(services: Services) -> None:
    """Declare every function's routes first: PERMISSIONS fills as routes are declared, and
    the local server builds its resolvers only on a thread's first request."""
    build_resolver(services, FUNCTIONS)
    assert len(PERMISSIONS) >= 40, sorted(PERMISSIONS)


def _call(http: httpx.Client, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    url = re.sub(r"\{[^}]+\}", "x", path)
    body = check_body() if path == "/v1/check" else {}
    return http.request(method, url, headers=headers, json=body if method != "GET" else None)


def test_every_route_is_declared_with_kinds(http: httpx.Client) -> None:
    assert PERMISSIONS, "no routes declared"
    for (method, path), kinds in PERMISSIONS.items():
        assert kinds, f"{method} {path} accepts no kind"
        assert kinds <= set(KEY_KINDS), f"{method} {path}: unknown kinds {kinds}"


def test_route_by_kind(http: httpx.Client, keys: Keys) -> None:
    failures = []
    for (method, path), kinds in sorted(PERMISSIONS.items()):
        for kind in KEY_KINDS:
            got = _call(http, method, path, bearer(keys.of(kind))).status_code
            if kind in kinds and got in (401, 403):
                failures.append(f"{method} {path} as {kind}: {got}, expected access")
            if kind not in kinds and got != 403:
                failures.append(f"{method} {path} as {kind}: {got}, expected 403")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer ck_" + "A" * 43},
        {"Authorization": "Bearer not-a-key"},
    ],
    ids=["none", "empty", "basic", "unknown", "malformed"],
)
def test_route_without_valid_key(http: httpx.Client, headers: dict[str, str]) -> None:
    for method, path in sorted(PERMISSIONS):
        response = _call(http, method, path, headers)
        assert response.status_code == 401, f"{method} {path}: {response.status_code}"
        assert response.json()["error"] == "unauthorized"
