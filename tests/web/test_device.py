"""Device sign-in: codes expire in 10 minutes, work once, and give the approver's CLI an
agent key; polling is paced; starting sign-ins is rate-limited per address."""

from __future__ import annotations

import re

import httpx
import pytest

from claros.auth import Principal, authenticate, create_key
from claros.errors import BadRequestError, ConflictError, NotFoundError
from claros.local import LocalServer
from claros.store.base import GLOBAL, Store
from claros.web import device
from claros.web.device import DeviceFlowError, TooManyRequestsError
from tests.web.conftest import PERSON, WORKSPACE, Keys, bearer

T0 = 1_800_000_000_000
DANA = Principal(WORKSPACE, "person", PERSON, "0" * 16)  # her sign-in key approves
SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def _start(store: Store, now: int = T0, address: str = "203.0.113.9") -> dict[str, object]:
    return device.start_device(store, client="claros-cli", name="laptop", address=address, now=now)


def _poll_error(store: Store, device_code: object, now: int) -> DeviceFlowError:
    with pytest.raises(DeviceFlowError) as caught:
        device.poll_device(store, str(device_code), now=now)
    return caught.value


def test_a_code_gives_the_approvers_cli_one_agent_key(store: Store) -> None:
    started = _start(store)
    assert re.fullmatch(r"[B-Z]{4}-[B-Z]{4}", str(started["user_code"]))
    assert started["expires_in"] == 600 and started["interval"] == 5
    view = device.device_view(store, str(started["user_code"]).lower(), now=T0)
    assert view["status"] == "pending" and view["name"] == "laptop"
    assert "device_code" not in view and "secret_hash" not in view
    assert _poll_error(store, started["device_code"], T0 + 5000).code == "authorization_pending"
    # Her real sign-in key approves: a key minted from a key id that names no key (as DANA's
    # does) is refused, as one minted from a revoked key is.
    dana = authenticate(store, f"Bearer {create_key(store, WORKSPACE, 'person', person=PERSON)}")
    device.answer_device(store, dana, str(started["user_code"]), "approve", now=T0 + 6000)
    got = device.poll_device(store, str(started["device_code"]), now=T0 + 11_000)
    assert got["kind"] == "agent" and got["person"] == PERSON and got["workspace"] == WORKSPACE
    principal = authenticate(store, f"Bearer {got['key']}")
    assert (principal.kind, principal.person, principal.workspace) == ("agent", PERSON, WORKSPACE)
    # Once: the code is gone, and so is its secret.
    with pytest.raises(NotFoundError, match="unknown, used or expired"):
        device.poll_device(store, str(started["device_code"]), now=T0 + 16_000)
    with pytest.raises(NotFoundError):
        device.device_view(store, str(started["user_code"]))
    assert store.query_docs(GLOBAL, "device_secret") == []


def test_a_code_expires_after_ten_minutes(store: Store) -> None:
    started = _start(store)
    code = str(started["user_code"])
    late = T0 + device.DEVICE_TTL_S * 1000
    assert device.device_view(store, code, now=late)["status"] == "expired"
    with pytest.raises(ConflictError, match="expired"):
        device.answer_device(store, DANA, code, "approve", now=late)
    assert _poll_error(store, started["device_code"], late).code == "expired_token"
    with pytest.raises(NotFoundError):
        device.poll_device(store, str(started["device_code"]), now=late + 1)


def test_an_approval_not_collected_in_time_expires_too(store: Store) -> None:
    started = _start(store)
    device.answer_device(store, DANA, str(started["user_code"]), "approve", now=T0 + 1000)
    late = T0 + device.DEVICE_TTL_S * 1000 + 1
    assert _poll_error(store, started["device_code"], late).code == "expired_token"


def test_a_denied_code_says_so_once(store: Store) -> None:
    started = _start(store)
    device.answer_device(store, DANA, str(started["user_code"]), "deny", now=T0 + 1000)
    assert _poll_error(store, started["device_code"], T0 + 6000).code == "access_denied"
    with pytest.raises(NotFoundError):
        device.poll_device(store, str(started["device_code"]), now=T0 + 12_000)


def test_a_code_is_answered_once(store: Store) -> None:
    code = str(_start(store)["user_code"])
    device.answer_device(store, DANA, code, "approve", now=T0 + 1000)
    with pytest.raises(ConflictError, match="answered already"):
        device.answer_device(store, DANA, code, "deny", now=T0 + 2000)


def test_polling_too_fast_slows_the_cli_down(store: Store) -> None:
    started = _start(store)
    first = _poll_error(store, started["device_code"], T0 + 5000)
    assert first.code == "authorization_pending" and first.interval == 5
    fast = _poll_error(store, started["device_code"], T0 + 6000)
    assert fast.code == "slow_down" and fast.interval == 10
    assert fast.to_json()["interval"] == 10
    again = _poll_error(store, started["device_code"], T0 + 12_000)
    assert again.code == "slow_down" and again.interval == 15
    paced = _poll_error(store, started["device_code"], T0 + 28_000)
    assert paced.code == "authorization_pending"


@pytest.mark.parametrize("typed", ["bcdf-ghjk", "BCDF GHJK", " BCDFGHJK "])
def test_typed_codes_are_normalized(typed: str) -> None:
    assert device.normalize_user_code(typed) == "BCDFGHJK"


@pytest.mark.parametrize("typed", ["", "BCDF-GHJ", "BCDF-GHJKL", "ABCD-EFGH", "BCDF-GHJ1"])
def test_malformed_codes_are_refused(typed: str) -> None:
    with pytest.raises(BadRequestError, match="8 letters"):
        device.normalize_user_code(typed)


@SQLITE
def test_an_address_may_start_ten_sign_ins_per_ten_minutes(store: Store) -> None:
    for i in range(device.CODES_PER_WINDOW):
        _start(store, T0 + i)
    with pytest.raises(TooManyRequestsError) as caught:
        _start(store, T0 + 100)
    assert caught.value.status == 429 and caught.value.retry_after_s == 599
    _start(store, T0 + 100, address="198.51.100.1")  # another address is not held up
    _start(store, T0 + device.WINDOW_S * 1000)  # a new window


@SQLITE
def test_expired_codes_are_swept_when_codes_are_made(store: Store) -> None:
    old = _start(store)
    _start(store, T0 + device.DEVICE_TTL_S * 1000 + 1)
    with pytest.raises(NotFoundError):
        device.device_view(store, str(old["user_code"]))
    assert len(store.query_docs(GLOBAL, "device_secret")) == 1


# --- over HTTP --------------------------------------------------------------------------
@SQLITE
def test_the_flow_over_http(http: httpx.Client, server: LocalServer, keys: Keys) -> None:
    started = http.post("/v1/device/code", json={"name": "dana-laptop"})
    assert started.status_code == 201, started.text
    body = started.json()
    assert body["verification_uri"] == f"{server.url}/app/device"
    assert body["verification_uri_complete"].endswith(f"/app/device?code={body['user_code']}")
    assert started.headers["cache-control"] == "no-store"
    pending = http.post("/v1/device/token", json={"device_code": body["device_code"]})
    assert pending.status_code == 400
    assert pending.json()["error"] == "authorization_pending"
    page = http.get(f"/app/device?code={body['user_code']}", headers=bearer(keys.person))
    assert page.status_code == 200 and body["user_code"] in page.text
    assert "dana-laptop" in page.text
    answer = http.post(
        "/app/device",
        json={"user_code": body["user_code"], "decision": "approve"},
        headers=bearer(keys.person),
    )
    assert answer.status_code == 200 and answer.json()["status"] == "approved"
    got = http.post("/v1/device/token", json={"device_code": body["device_code"]})
    assert got.status_code == 200, got.text
    assert got.json()["person"] == PERSON
    me = http.get("/api/me/timeline", headers=bearer(got.json()["key"]))
    assert me.status_code == 200 and me.json()["person"] == PERSON
    again = http.post("/v1/device/token", json={"device_code": body["device_code"]})
    assert again.status_code == 404


@SQLITE
def test_the_rate_limit_answers_429_with_retry_after(http: httpx.Client) -> None:
    for _ in range(device.CODES_PER_WINDOW):
        assert http.post("/v1/device/code", json={}).status_code == 201
    refused = http.post("/v1/device/code")
    assert refused.status_code == 429
    assert refused.json()["error"] == "too_many_requests"
    assert 1 <= int(refused.headers["retry-after"]) <= 600


@SQLITE
@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/device/code", {"client": "x" * 65}, 400),
        ("/v1/device/code", {"surprise": 1}, 400),
        ("/v1/device/token", {}, 400),
        ("/v1/device/token", {"device_code": "nope"}, 404),
    ],
)
def test_bad_requests_get_a_reason(
    http: httpx.Client, path: str, body: dict[str, object], status: int
) -> None:
    answer = http.post(path, json=body)
    assert answer.status_code == status and answer.json()["message"]


@SQLITE
def test_service_keys_cannot_approve(http: httpx.Client, keys: Keys) -> None:
    code = http.post("/v1/device/code", json={}).json()["user_code"]
    answer = http.post(
        "/app/device", json={"user_code": code, "decision": "approve"}, headers=bearer(keys.service)
    )
    assert answer.status_code == 403
