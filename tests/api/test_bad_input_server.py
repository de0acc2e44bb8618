"""Bad input to the server answered with a reason, never a 500, a traceback or a double
write: a checkpoint that cannot be signed after a committed append, out-of-range query
numbers, oversized forms, names with "/" in the path, and what the local server meets at
the socket (short bodies, idle connections, gone clients, unknown methods, huge headers,
raw UTF-8 paths)."""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from claros.api.app import build_resolver
from claros.config import Settings
from claros.evidence.verify import verify_workspace
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.base import NewRecord
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule
from tests.events import load_event
from tests.web.conftest import HTML, Browserish, sign_in  # noqa: F401 - fixture

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def _head(services: Services) -> int:
    head = services.store.head(WORKSPACE)
    return head.seq if head else 0


def _exchange(server: LocalServer, raw: bytes, *, timeout: float = 10) -> str:
    """Send raw bytes, read until the server closes the connection."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as sock:
        sock.sendall(raw)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _json_body(reply: str) -> str:
    return reply.partition("\r\n\r\n")[2]


# --- 1. a checkpoint that cannot be signed does not fail a committed append ---------------
@pytest.fixture
def loose_key(settings: Settings) -> Path:
    """The workspace's ledger key, on disk with mode 0644 (FileSigner refuses to use it)."""
    FileSigner(settings.data_dir).active_key(WORKSPACE)
    (path,) = (Path(settings.data_dir) / "ledger-keys" / WORKSPACE).glob("*.key")
    path.chmod(0o644)
    return path


def test_a_check_whose_checkpoint_cannot_be_signed_is_answered_and_recorded_once(
    http: httpx.Client,
    keys: Keys,
    services: Services,
    loose_key: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted: list[tuple[str, float]] = []
    services.metric = lambda name, value: counted.append((name, value))
    for n in range(4):  # checkpoint_every is 5: the fifth entry signs inline
        body = check_body(agent={"name": "t", "call_id": f"c{n}"})
        assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 200
    headers = bearer(keys.agent) | {"Idempotency-Key": "fifth"}
    with caplog.at_level(logging.ERROR, logger="claros.checkpoints"):
        first = http.post("/v1/check", json=check_body(), headers=headers)
    assert first.status_code == 200, first.text
    assert first.json()["seq"] == 5
    assert any("CHECKPOINT NOT SIGNED" in r.getMessage() for r in caplog.records)
    assert ("CheckpointSignFailed", 1) in counted
    again = http.post("/v1/check", json=check_body(), headers=headers)
    assert again.status_code == 200, again.text
    assert again.json()["check_id"] == first.json()["check_id"]
    assert _head(services) == 5
    assert services.store.latest_checkpoint(WORKSPACE) is None

    # Where signing is the request's purpose, it is a 503 with the reason.
    now = http.post("/v1/ledger/checkpoints", headers=bearer(keys.admin))
    assert now.status_code == 503, now.text
    assert now.json()["error"] == "unavailable"
    assert "readable by others" in now.json()["message"]
    assert now.headers["retry-after"]

    # With the key fixed, the tail is signed later and the chain holds.
    loose_key.chmod(0o600)
    assert http.post("/v1/ledger/checkpoints", headers=bearer(keys.admin)).status_code == 201
    report = verify_workspace(services.store, WORKSPACE)
    assert report.ok and report.checkpoints_verified == 1, report.failures


# --- 2. query numbers are bounded ------------------------------------------------------
@SQLITE
@pytest.mark.parametrize(
    "path", ["/v1/ledger/entries", "/v1/ledger/checkpoints", "/api/evidence/stream"]
)
@pytest.mark.parametrize("since", [str(2**63), str(2**53), "9" * 5000, "-1", "1e3", "٣"])
def test_since_out_of_range_is_a_400_naming_it(
    http: httpx.Client, keys: Keys, path: str, since: str
) -> None:
    response = http.get(path, params={"since": since}, headers=bearer(keys.admin))
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "bad_request"
    assert "query parameter since must be" in response.json()["message"]


@SQLITE
def test_the_largest_since_is_served(http: httpx.Client, keys: Keys) -> None:
    response = http.get(
        "/v1/ledger/entries", params={"since": str(2**53 - 1)}, headers=bearer(keys.admin)
    )
    assert response.status_code == 200, response.text


# --- 3. and 5. forms with too many fields; the sign-in page's errors ---------------------
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MANY_FIELDS = "&".join(f"f{i}=1" for i in range(150))


@SQLITE
def test_a_form_with_too_many_fields_is_a_400(http: httpx.Client) -> None:
    device = http.post("/v1/device/code", content=MANY_FIELDS, headers=FORM)
    assert device.status_code == 400, device.text
    assert "more than 100 fields" in device.json()["message"]
    page = http.post("/app/signin", content=MANY_FIELDS + "&next=/app/rules", headers=FORM | HTML)
    assert page.status_code == 400, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert "more than 100 fields" in page.text and 'action="/app/signin"' in page.text


@SQLITE
def test_a_signed_in_form_with_too_many_fields_is_the_error_page(
    sign_in: Callable[[str], Browserish],  # noqa: F811 - the fixture
    keys: Keys,
) -> None:
    browser = sign_in(keys.admin)
    fields = {f"f{i}": "1" for i in range(150)} | {"days": "30"}
    answer = browser.post_form("/app/evidence/retention", fields)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert "more than 100 fields" in answer.text


@SQLITE
def test_sign_in_with_a_bad_key_and_padding_shows_the_real_error(http: httpx.Client) -> None:
    body = "key=ck_bad&next=%2Fapp%2Frules&pad=" + "x" * 20_000
    page = http.post("/app/signin", content=body, headers=FORM | HTML)
    assert page.status_code == 401, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert "not a Claros key" in page.text
    assert 'name="next" value="/app/rules"' in page.text


@SQLITE
def test_an_oversize_form_on_the_web_app_gets_the_error_page(server: LocalServer) -> None:
    body = b"key=x&pad=" + b"x" * 1_000_001
    reply = _exchange(
        server,
        b"POST /app/signin HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body),
    )
    assert reply.startswith("HTTP/1.1 413")
    assert "text/html" in reply.partition("\r\n\r\n")[0]
    assert "the limit is 1000000" in reply


# --- 6. names with "/" in the path --------------------------------------------------------
def test_an_app_and_a_tool_named_with_a_slash_register_and_map(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    tools = [{"name": "orders/read", "read": True}, {"name": "refund/create", "read": False}]
    registered = http.post(
        "/v1/apps/team%2Fshop/tools", json={"tools": tools}, headers=bearer(keys.agent)
    )
    assert registered.status_code == 200, registered.text
    assert registered.json() == {"app": "team/shop", "tools": 2, "reads": 1,
                                 "writes": ["refund/create"], "held": [], "suspended": [],
                                 "restored": []}  # fmt: skip
    mapping = {
        "app": "team/shop",
        "tool": "refund/create",
        "fetch": {"tool": "orders/read", "arguments": {"id": "$order"}, "into": "order"},
    }
    path = "/api/mappings/team%2Fshop/refund%2Fcreate"
    saved = http.put(path, json={"mapping": mapping}, headers=bearer(keys.admin))
    assert saved.status_code == 200, saved.text
    assert (saved.json()["app"], saved.json()["tool"]) == ("team/shop", "refund/create")
    got = http.get(path, headers=bearer(keys.admin))
    assert got.status_code == 200 and got.json()["version"] == 1
    # The mapping is used: a check of that tool asks for the order first.
    body = check_body(app="team/shop", tool="refund/create", arguments={"order": "7"})
    need = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert need.status_code == 200, need.text
    assert need.json()["need"][0]["tool"] == "orders/read"
    # A path that says another mapping than the body is still refused.
    other = http.put(
        "/api/mappings/team%2Fshop/other", json={"mapping": mapping}, headers=bearer(keys.admin)
    )
    assert other.status_code == 400
    assert "but the path says team/shop other" in other.json()["message"]
    # Names are percent-encoded in the doc key and ref_id, so no two (app, tool) meet.
    assert [e.ref_id for e in services.store.entries(WORKSPACE)] == [
        "team%2Fshop:refund%2Fcreate@1"
    ]


def test_names_with_colons_keep_their_mappings_apart(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    # App "a:b" + tool "c" and app "a" + tool "b:c" would share the key "a:b:c".
    pairs = [("a:b", "c", "read_one"), ("a", "b:c", "read_two")]
    for app, tool, read in pairs:
        tools = [{"name": read, "read": True}, {"name": tool, "read": False}]
        done = http.post(f"/v1/apps/{quote(app, safe='')}/tools", json={"tools": tools},
                         headers=bearer(keys.agent))  # fmt: skip
        assert done.status_code == 200, done.text
        mapping = {"app": app, "tool": tool,
                   "fetch": {"tool": read, "arguments": {"id": "$id"}}}  # fmt: skip
        path = f"/api/mappings/{quote(app, safe='')}/{quote(tool, safe='')}"
        saved = http.put(path, json={"mapping": mapping}, headers=bearer(keys.admin))
        assert saved.status_code == 200 and saved.json()["version"] == 1, saved.text
    for app, tool, read in pairs:
        body = check_body(app=app, tool=tool, arguments={"id": "7"})
        need = http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()
        assert need["need"][0]["tool"] == read


@SQLITE
@pytest.mark.parametrize("decoded_raw_path", [False, True], ids=["encoded", "decoded"])
def test_the_lambda_event_gets_the_same_decoded_names(
    services: Services, keys: Keys, decoded_raw_path: bool
) -> None:
    """API Gateway gives the parameters decoded in pathParameters; its rawPath may be
    encoded or decoded. Either way the route sees app "team/shop", as locally."""
    event = load_event("check-register-tools", keys.agent, app="team/shop")
    assert event["rawPath"] == "/v1/apps/team%2Fshop/tools"
    if decoded_raw_path:
        event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/apps/team/shop/tools"
    result = build_resolver(services, ["check"]).resolve(event, None)
    assert result["statusCode"] == 200, result["body"]
    assert '"app":"team/shop"' in result["body"]


# --- 7. a rule's close reason is bounded --------------------------------------------------
def test_a_close_reason_over_2000_characters_is_a_400(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    put_rule(http, keys.admin)
    before = _head(services)
    response = http.post(
        "/api/rules/refund-half/close", json={"reason": "x" * 2001}, headers=bearer(keys.admin)
    )
    assert response.status_code == 400, response.text
    assert response.json()["details"][0]["field"] == "reason"
    assert _head(services) == before
    ok = http.post(
        "/api/rules/refund-half/close", json={"reason": "x" * 2000}, headers=bearer(keys.admin)
    )
    assert ok.status_code == 200, ok.text


# --- 4. the local server at the socket ---------------------------------------------------
@pytest.fixture
def quick_server(services: Services) -> Iterator[LocalServer]:
    """A server that closes a connection silent for half a second."""
    srv = LocalServer(services, "127.0.0.1", 0, connection_timeout_s=0.5).start()
    try:
        yield srv
    finally:
        srv.stop()


@SQLITE
def test_a_body_shorter_than_its_content_length_times_out_with_a_408(
    quick_server: LocalServer, keys: Keys
) -> None:
    started = time.monotonic()
    reply = _exchange(
        quick_server,
        b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + keys.agent.encode() + b"\r\n"
        b"Content-Length: 100\r\n\r\n{}",
    )
    assert reply.startswith("HTTP/1.1 408")
    assert '"error":"request_timeout"' in reply
    assert time.monotonic() - started < 5


@SQLITE
def test_a_body_cut_short_by_the_client_is_a_400(server: LocalServer, keys: Keys) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + keys.agent.encode() + b"\r\n"
            b"Content-Length: 100\r\n\r\n{}"
        )
        sock.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400")
    assert b"the body ended after 2 of its 100 bytes" in reply


@SQLITE
def test_an_idle_keep_alive_connection_is_closed(quick_server: LocalServer, keys: Keys) -> None:
    with socket.create_connection((quick_server.host, quick_server.port), timeout=10) as sock:
        sock.sendall(
            b"GET /v1/ledger/pubkey HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + keys.agent.encode() + b"\r\n\r\n"
        )
        started = time.monotonic()
        reply = b""
        while chunk := sock.recv(65536):  # the server closes it: recv gives b""
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200")
    assert 0.4 < time.monotonic() - started < 5


@SQLITE
def test_a_client_gone_mid_stream_costs_one_quiet_log_line(
    server: LocalServer,
    keys: Keys,
    services: Services,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    big = "x" * 200_000
    records = [NewRecord("note", f"n{i}", {"workspace": WORKSPACE, "text": big}) for i in range(4)]
    for _ in range(10):  # ~8 MB of export: far more than the socket buffers hold
        services.store.append_many(WORKSPACE, records[:])
        records = [NewRecord("note", r.ref_id + "x", r.record) for r in records]
    caplog.set_level(logging.INFO, logger="claros.local")
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(
            b"GET /api/evidence/export HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + keys.admin.encode() + b"\r\n\r\n"
        )
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        # Reset, not a polite close: the server's next write fails.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.monotonic() + 10
    while not any("went away" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "the server never noticed the client left"
        time.sleep(0.05)
    time.sleep(0.2)
    served = [r for r in caplog.records if r.name == "claros.local"]
    assert not [r for r in served if r.exc_info or r.levelno >= logging.WARNING]
    assert "Traceback" not in capfd.readouterr().err
    # The server still serves.
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/v1/ledger/pubkey", headers=bearer(keys.agent)).status_code == 200


@SQLITE
def test_options_and_trace_get_a_json_405_with_allow(http: httpx.Client) -> None:
    for method in ("OPTIONS", "TRACE"):
        response = http.request(method, "/api/rules")
        assert response.status_code == 405, response.text
        assert response.headers["allow"] == "GET, POST"
        assert response.json()["error"] == "method_not_allowed"
        assert "/api/rules takes GET, POST" in response.json()["message"]
    nowhere = http.request("OPTIONS", "/v1/nothing")
    assert nowhere.status_code == 404 and nowhere.json()["error"] == "not_found"


@SQLITE
def test_an_unknown_method_gets_a_json_501(http: httpx.Client) -> None:
    response = http.request("BREW", "/v1/check")
    assert response.status_code == 501
    assert response.json() == {
        "error": "not_implemented",
        "message": "method 'BREW' is not supported",
    }


@SQLITE
def test_headers_over_64_kib_get_a_json_431(http: httpx.Client) -> None:
    response = http.get("/v1/ledger/pubkey", headers={"X-Big": "a" * 70_000})
    assert response.status_code == 431
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "headers_too_large"


@SQLITE
def test_a_raw_utf8_path_is_read_as_utf8(server: LocalServer, keys: Keys) -> None:
    reply = _exchange(
        server,
        "GET /v1/asks/é HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".encode()
        + b"Authorization: Bearer "
        + keys.agent.encode()
        + b"\r\n\r\n",
    )
    assert reply.startswith("HTTP/1.1 404")
    assert "no ask 'é'" in _json_body(reply)
    encoded = _exchange(
        server,
        b"GET /v1/asks/%C3%A9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Authorization: Bearer " + keys.agent.encode() + b"\r\n\r\n",
    )
    assert "no ask 'é'" in _json_body(encoded)
    broken = _exchange(server, b"GET /v1/asks/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n")
    assert broken.startswith("HTTP/1.1 400")
    assert "the request path is not UTF-8" in broken
