"""Sessions: who may sign in, the cookie's flags, what is stored, and how a session ends."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from claros.auth import hash_key
from claros.clock import now_ms
from claros.errors import ForbiddenError, UnauthorizedError
from claros.local import LocalServer
from claros.store.base import GLOBAL, DocWrite, Store
from claros.web import sessions
from tests.web.conftest import ADMIN, HTML, WORKSPACE, Browserish, Keys, signed_in_hand

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def _cookie_parts(response: httpx.Response) -> tuple[str, str, set[str], dict[str, str]]:
    [header] = response.headers.get_list("set-cookie")
    first, *rest = [part.strip() for part in header.split(";")]
    name, _, value = first.partition("=")
    flags = {p for p in rest if "=" not in p}
    values = {k.lower(): v for k, _, v in (p.partition("=") for p in rest if "=" in p)}
    return name, value, flags, values


def test_sign_in_sets_an_httponly_strict_cookie_on_localhost(
    http: httpx.Client, server: LocalServer, keys: Keys
) -> None:
    answer = http.post(
        "/app/signin", data={"key": keys.admin}, headers={**HTML, "origin": server.url}
    )
    assert signed_in_hand(answer)[1] == "/app"  # a page that keeps the hand, then goes on
    name, value, flags, values = _cookie_parts(answer)
    assert name == "claros_session" and len(value) >= 43
    assert flags == {"HttpOnly"}  # no Secure on plain-HTTP localhost
    assert values == {"path": "/", "max-age": str(sessions.SESSION_TTL_S), "samesite": "Strict"}


def test_outside_localhost_the_cookie_is_secure_with_the_host_prefix(
    http: httpx.Client, keys: Keys
) -> None:
    host = "claros.example.com"
    answer = http.post(
        "/app/signin",
        data={"key": keys.admin},
        headers={**HTML, "host": host, "origin": f"https://{host}"},
    )
    assert signed_in_hand(answer)[1] == "/app"
    name, value, flags, values = _cookie_parts(answer)
    assert name == "__Host-claros_session"
    assert flags == {"HttpOnly", "Secure"}
    assert values["samesite"] == "Strict" and values["path"] == "/" and "domain" not in values
    # The plain name is not accepted there (a sibling site could have planted it).
    planted = http.get("/app", headers={"host": host, "cookie": f"claros_session={value}", **HTML})
    assert planted.status_code == 303 and "/app/signin" in planted.headers["location"]
    ok = http.get("/app", headers={"host": host, "cookie": f"{name}={value}", **HTML})
    assert ok.status_code == 200


def test_only_the_session_ids_hash_is_stored(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store, tmp_path: Path
) -> None:
    browser = sign_in(keys.admin)
    session_id = browser.client.cookies["claros_session"]
    [doc] = store.query_docs(GLOBAL, "session")
    assert doc.key == hashlib.sha256(session_id.encode()).hexdigest()
    assert doc.value["key_hash"] == hash_key(keys.admin)
    assert doc.value["person"] == ADMIN and doc.value["workspace"] == WORKSPACE
    assert doc.value["expires_at"] - doc.value["created_at"] == sessions.SESSION_TTL_S * 1000
    assert doc.value["hand_hash"] == hashlib.sha256(browser.hand.encode()).hexdigest()
    files = sorted(tmp_path.rglob("claros.db*"))
    assert files, "the SQLite store's files"
    database = b"".join(f.read_bytes() for f in files)
    assert session_id.encode() not in database
    assert keys.admin.encode() not in database
    assert browser.hand.encode() not in database


@pytest.mark.parametrize(
    ("kind", "status", "reason"),
    [
        ("service", 403, "a service key is tied to nobody"),
        ("audit", 403, "an audit key reads the log"),
        ("agent", 403, "an agent key acts for an agent and never opens a web session"),
        ("person", 200, ""),
        ("other_workspace_admin", 200, ""),
    ],
)
def test_who_may_sign_in(
    http: httpx.Client, server: LocalServer, keys: Keys, kind: str, status: int, reason: str
) -> None:
    answer = http.post(
        "/app/signin", data={"key": keys.of(kind)}, headers={**HTML, "origin": server.url}
    )
    assert answer.status_code == status
    if reason:
        assert reason in answer.text and "set-cookie" not in answer.headers
        assert 'role="alert"' in answer.text  # the form again, with why
    as_json = http.post("/app/signin", json={"key": keys.of(kind)})
    assert as_json.status_code == status


def test_a_bad_key_is_refused_with_a_reason(http: httpx.Client, server: LocalServer) -> None:
    headers = {**HTML, "origin": server.url}
    unknown = http.post("/app/signin", data={"key": "ck_" + "A" * 43}, headers=headers)
    assert unknown.status_code == 401 and "unknown or revoked key" in unknown.text
    empty = http.post("/app/signin", json={})
    assert empty.status_code == 400 and empty.json()["message"] == "give your key"


def test_signing_in_with_the_bearer_header_gives_a_session(http: httpx.Client, keys: Keys) -> None:
    answer = http.post("/app/signin", json={}, headers={"authorization": f"Bearer {keys.person}"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["kind"] == "person" and body["csrf"] and body["expires_in"] == 43200
    assert len(body["hand"]) >= 43 and body["hand"] != body["csrf"]
    assert "claros_session" in answer.headers["set-cookie"]


def test_sign_out_ends_the_session(sign_in: Callable[[str], Browserish], keys: Keys) -> None:
    browser = sign_in(keys.admin)
    session_id = browser.client.cookies["claros_session"]
    out = browser.post_form("/app/signout", {})
    assert out.status_code == 303 and out.headers["location"] == "/app/signin?signed_out=1"
    assert "Max-Age=0" in out.headers["set-cookie"]
    replay = httpx.get(f"{browser.origin}/app", headers={"cookie": f"claros_session={session_id}"})
    assert replay.status_code == 401
    assert "signed out" in replay.json()["message"]


def _age(store: Store, session_id: str, expires_at: int) -> None:
    doc = store.get_doc(GLOBAL, "session", sessions.session_hash(session_id))
    assert doc is not None
    store.write_docs(
        [DocWrite(GLOBAL, "session", doc.key, {**doc.value, "expires_at": expires_at}, doc.rev)]
    )


def test_an_expired_session_sends_the_browser_to_sign_in(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store
) -> None:
    browser = sign_in(keys.admin)
    session_id = browser.client.cookies["claros_session"]
    _age(store, session_id, now_ms() - 1)
    page = browser.get("/app/rules")
    assert page.status_code == 303
    assert page.headers["location"] == "/app/signin?next=%2Fapp%2Frules&why=expired"
    assert "Max-Age=0" in page.headers["set-cookie"]
    as_json = httpx.get(
        f"{browser.origin}/api/rules", headers={"cookie": f"claros_session={session_id}"}
    )
    assert as_json.status_code == 401 and "expired" in as_json.json()["message"]
    signin = browser.client.get(page.headers["location"], headers=HTML)
    assert "Your session ended" in signin.text


def test_a_revoked_key_or_a_demoted_admin_ends_the_session(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store
) -> None:
    browser = sign_in(keys.admin)
    assert browser.get("/app/evidence").status_code == 200
    member = store.get_doc(WORKSPACE, "member", ADMIN)
    assert member is not None
    store.write_docs(
        [DocWrite(WORKSPACE, "member", ADMIN, {**member.value, "role": "member"}, member.rev)]
    )
    assert browser.get("/app/evidence").status_code == 303
    revoked = sign_in(keys.person)
    key = store.get_doc(GLOBAL, "key", hash_key(keys.person))
    assert key is not None
    store.write_docs(
        [DocWrite(GLOBAL, "key", key.key, {**key.value, "revoked_at": now_ms()}, key.rev)]
    )
    assert revoked.get("/app").status_code == 303


def test_expired_sessions_are_swept_at_sign_in(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store
) -> None:
    old = sign_in(keys.admin).client.cookies["claros_session"]
    _age(store, old, now_ms() - 1)
    index = store.query_docs(GLOBAL, "session_expiry")
    doc = store.get_doc(GLOBAL, "session", sessions.session_hash(old))
    assert doc is not None
    [entry] = index
    store.write_docs(
        [
            DocWrite(GLOBAL, "session_expiry", entry.key, None),
            DocWrite(GLOBAL, "session_expiry", f"{now_ms() - 1:013d}:{doc.key}", {}, 0),
        ]
    )
    sign_in(keys.admin)
    assert store.get_doc(GLOBAL, "session", sessions.session_hash(old)) is None
    assert len(store.query_docs(GLOBAL, "session")) == 1


def test_open_and_load_directly(store: Store, keys: Keys) -> None:
    session_id, principal = sessions.open_session(store, keys.admin, now=1_000_000)
    assert principal.person == ADMIN and principal.key_id == hash_key(keys.admin)[:16]
    loaded = sessions.load_session(store, session_id, now=1_000_000 + 1000)
    assert loaded == principal
    with pytest.raises(UnauthorizedError, match="expired"):
        sessions.load_session(store, session_id, now=1_000_000 + sessions.SESSION_TTL_S * 1000)
    with pytest.raises(UnauthorizedError, match="signed out"):
        sessions.load_session(store, "x" * 43)
    with pytest.raises(ForbiddenError, match="service key"):
        sessions.open_session(store, keys.service)
