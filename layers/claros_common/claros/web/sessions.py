"""Web sessions: a signed-in person's cookie, kept server-side.

A person signs in with a credential that is theirs alone: their person key (kind
``person``, made when they were added) or, for an admin, the admin key. Agent keys are held
by agents and service keys by nobody in particular, so neither opens a session (an agent
that could would mint keys and answer its own asks); an audit key reads the log only.
The server makes a random session id, sends it in a cookie (HttpOnly, SameSite=Strict,
Path=/; outside localhost also Secure, under the ``__Host-`` prefix) and stores only the
id's sha256, with the key's hash, the person, the workspace and an expiry (12 hours, never
extended). Every request re-checks the key behind the session: a revoked key, or an admin
key whose person is no longer an admin, ends it.

The session acts with the key it was opened with (its ``key_id`` and lineage), so it
counts as derived from that key: the key that asked, and anything minted from it, can
never answer its ask, in the browser either.

CSRF: a state-changing request carried by the cookie must send the session's token (the
``csrf`` form field, or the ``X-CSRF-Token`` header; a hash of the session id, so it needs
no storage and dies with the session), and when the browser says where the request comes
from (Origin, else Referer) it must be this site.

The hand: a cookie is sent to every port of its host (RFC 6265, section 8.5), so on
localhost an agent's own web server (a dev server, a preview) is sent the session cookie
when the person opens it, and the CSRF token is computed from the cookie. So a session has
a second secret, the hand, that never travels in a cookie: sign-in makes it
(``secrets.token_urlsafe(32)``), stores only its sha256 with the session, and hands it to
the page that answers the sign-in, where ``/app/static/claros.js`` keeps it in the app
origin's ``localStorage`` (an origin, unlike a cookie, includes the port). Every
state-changing request carried by the cookie must send it too (the ``hand`` form field,
which claros.js adds to every POST form, or the ``X-Claros-Hand`` header); a session
without one (opened before the hand existed) cannot act. Sign-out is the exception: it
needs the CSRF token only, so a person can always end a session whose cookie got out.
Reading (GET) takes the cookie alone: this closes acting with a leaked cookie, not
reading with one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from claros.auth import KeyRefused, Principal, authenticate, key_principal
from claros.clock import now_ms
from claros.errors import BadRequestError, ForbiddenError, PayloadTooLargeError, UnauthorizedError
from claros.store.base import GLOBAL, DocWrite, Store
from claros.wiring import Services

if TYPE_CHECKING:  # imported where a cookie is made: the authorizer (which only reads
    from aws_lambda_powertools.shared.cookies import Cookie  # them) skips Powertools

__all__ = [
    "COOKIE",
    "HAND_HEADER",
    "HAND_REFUSED",
    "Opened",
    "SECURE_COOKIE",
    "SESSION_TTL_S",
    "SIGN_IN_KINDS",
    "check_csrf",
    "check_hand",
    "check_origin",
    "clear_cookie",
    "close_session",
    "cookie_name",
    "csrf_token",
    "form_fields",
    "hand_hash",
    "is_local_host",
    "load_session",
    "open_session",
    "open_session_with_hand",
    "read_session_id",
    "request_principal",
    "session_cookie",
    "session_hash",
    "session_principal",
]

SESSION_TTL_S = 12 * 3600
COOKIE = "claros_session"
SECURE_COOKIE = "__Host-claros_session"
SIGN_IN_KINDS = frozenset({"admin", "person"})
_NO_SESSION = {
    "agent": "an agent key acts for an agent and never opens a web session (an agent could "
    "then mint keys and answer its own asks)",
    "service": "a service key is tied to nobody",
    "audit": "an audit key reads the log and its records, nothing else",
}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
COLLECTION = "session"
EXPIRY = "session_expiry"  # "<expires_at:013d>:<hash>", oldest first: swept at sign-in
_SWEEP = 25
MAX_FORM_FIELDS = 100
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
HAND_FIELD = "hand"
HAND_HEADER = "X-Claros-Hand"
_MAX_HAND = 128
HAND_REFUSED = "this browser did not sign in here, or its sign-in was cleared: sign in again to act"


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def hand_hash(hand: str) -> str:
    # "replace": a sent value that is no text (a lone surrogate) is just a wrong hand.
    return hashlib.sha256(hand.encode("utf-8", "replace")).hexdigest()


def csrf_token(session_id: str) -> str:
    digest = hashlib.sha256(b"claros-csrf\n" + session_id.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


# --- cookies ----------------------------------------------------------------------------
def _host(headers: Mapping[str, str]) -> str:
    return (headers.get("host") or "").strip().lower()


def is_local_host(headers: Mapping[str, str]) -> bool:
    """The request came to localhost (``claros serve``): cookies go without Secure."""
    host = _host(headers)
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in _LOCAL_HOSTS or name.endswith(".localhost")


def cookie_name(headers: Mapping[str, str]) -> str:
    return COOKIE if is_local_host(headers) else SECURE_COOKIE


def session_cookie(session_id: str, headers: Mapping[str, str]) -> Cookie:
    from aws_lambda_powertools.shared.cookies import Cookie, SameSite

    return Cookie(
        cookie_name(headers),
        session_id,
        path="/",
        secure=not is_local_host(headers),
        http_only=True,
        max_age=SESSION_TTL_S,
        same_site=SameSite.STRICT_MODE,
    )


def clear_cookie(headers: Mapping[str, str]) -> Cookie:
    from aws_lambda_powertools.shared.cookies import Cookie, SameSite

    return Cookie(
        cookie_name(headers),
        "",
        path="/",
        secure=not is_local_host(headers),
        http_only=True,
        max_age=0,
        same_site=SameSite.STRICT_MODE,
    )


def _cookies(event: Mapping[str, Any]) -> list[str]:
    found = list(event.get("cookies") or [])
    if not found:
        header = (event.get("headers") or {}).get("cookie") or ""
        found = [part.strip() for part in header.split(";") if part.strip()]
    return found


def read_session_id(event: Mapping[str, Any]) -> str | None:
    """The session id from the request's cookie of this site's name, if any."""
    name = cookie_name(event.get("headers") or {})
    for cookie in _cookies(event):
        key, _, value = cookie.partition("=")
        if key.strip() == name and value.strip():
            return value.strip()
    return None


# --- the session store ------------------------------------------------------------------
_SESSION_REFUSED = {
    "revoked": "the key this session was opened with is revoked: sign in again",
    "admin": "this session's person is no longer a workspace admin",
    "audit": "this session's audit key's maker is no longer a workspace admin",
    "expired": "the key this session was opened with expired: sign in again",
    "member": "this session's person is no longer a member of the workspace",
}


def _key_principal(store: Store, digest: str, *, note_use: bool = True) -> Principal:
    """The key a session was opened with, re-checked as every bearer key is."""
    try:
        return key_principal(store, digest, note_use=note_use)
    except KeyRefused as exc:
        raise UnauthorizedError(_SESSION_REFUSED[exc.problem]) from None


def _sweep(store: Store, now: int) -> None:
    """Delete a few expired sessions (the oldest first); sign-in pays for it."""
    writes: list[DocWrite] = []
    for doc in store.query_docs(GLOBAL, EXPIRY, limit=_SWEEP):
        expires, _, digest = doc.key.partition(":")
        if int(expires) > now:
            break
        writes += [
            DocWrite(GLOBAL, EXPIRY, doc.key, None),
            DocWrite(GLOBAL, COLLECTION, digest, None),
        ]
    if writes:
        store.write_docs(writes)


class Opened(NamedTuple):
    """A session just opened: its id (the cookie), its hand (for the page's storage, never
    a cookie) and who it is."""

    session_id: str
    hand: str
    principal: Principal


def open_session(store: Store, key: str, *, now: int | None = None) -> tuple[str, Principal]:
    """Sign in with ``key``: (the new session id, who it is). Only a person's key may.
    The session's hand is dropped: such a session reads, and cannot act."""
    opened = open_session_with_hand(store, key, now=now)
    return opened.session_id, opened.principal


def open_session_with_hand(store: Store, key: str, *, now: int | None = None) -> Opened:
    """Sign in with ``key``: the new session's id and hand, and who it is. Only a person's
    key may."""
    principal = authenticate(store, f"Bearer {key.strip()}")
    if principal.kind not in SIGN_IN_KINDS:
        why = _NO_SESSION.get(principal.kind, f"a {principal.kind} key cannot sign in")
        raise ForbiddenError(
            f"{why}: sign in with your person key (made when you were added; an admin may "
            "also use the admin key)"
        )
    now = now or now_ms()
    _sweep(store, now)
    session_id = secrets.token_urlsafe(32)
    hand = secrets.token_urlsafe(32)
    digest = session_hash(session_id)
    expires = now + SESSION_TTL_S * 1000
    doc = {
        "workspace": principal.workspace,
        "person": principal.person,
        "kind": principal.kind,
        "key_hash": hashlib.sha256(key.strip().encode("utf-8")).hexdigest(),
        "hand_hash": hand_hash(hand),
        "created_at": now,
        "expires_at": expires,
    }
    store.write_docs(
        [
            DocWrite(GLOBAL, COLLECTION, digest, doc, 0),
            DocWrite(GLOBAL, EXPIRY, f"{expires:013d}:{digest}", {}, 0),
        ]
    )
    return Opened(session_id, hand, principal)


def load_session(
    store: Store, session_id: str, *, now: int | None = None, note_use: bool = True
) -> Principal:
    """The person behind a session id, or 401 (unknown, signed out, expired, key revoked)."""
    return _load_session(store, session_id, now=now, note_use=note_use)[0]


def _load_session(
    store: Store, session_id: str, *, now: int | None = None, note_use: bool = True
) -> tuple[Principal, Mapping[str, Any]]:
    """The person behind a session id and the session's stored fields, or 401."""
    if len(session_id) > 128:
        raise UnauthorizedError("not a Claros session: sign in again")
    doc = store.get_doc(GLOBAL, COLLECTION, session_hash(session_id))
    if doc is None:
        raise UnauthorizedError("you are signed out (or the session is unknown): sign in again")
    if int(doc.value["expires_at"]) <= (now or now_ms()):
        raise UnauthorizedError("your session expired: sign in again")
    principal = _key_principal(store, str(doc.value["key_hash"]), note_use=note_use)
    if principal.kind not in SIGN_IN_KINDS:  # opened when agent keys still could
        raise UnauthorizedError("sessions are opened with a person key now: sign in again")
    return principal, doc.value


def close_session(store: Store, session_id: str) -> None:
    digest = session_hash(session_id)
    doc = store.get_doc(GLOBAL, COLLECTION, digest)
    if doc is None:
        return
    store.write_docs(
        [
            DocWrite(GLOBAL, COLLECTION, digest, None),
            DocWrite(GLOBAL, EXPIRY, f"{int(doc.value['expires_at']):013d}:{digest}", None),
        ]
    )


# --- CSRF -------------------------------------------------------------------------------
def form_fields(event: Mapping[str, Any], max_bytes: int) -> dict[str, str] | None:
    """An urlencoded form body as {name: first value}, or None when the body is not a form."""
    headers = event.get("headers") or {}
    content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return None
    body = event.get("body") or ""
    data = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")
    if len(data) > max_bytes:
        raise PayloadTooLargeError(f"body is {len(data)} bytes; the limit is {max_bytes}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError("the form is not UTF-8") from exc
    try:
        parsed = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except ValueError as exc:  # more fields than that
        raise BadRequestError(
            f"the form has more than {MAX_FORM_FIELDS} fields; no Claros form has that many"
        ) from exc
    return {name: values[0] for name, values in parsed.items()}


def check_origin(headers: Mapping[str, str]) -> None:
    origin = headers.get("origin")
    source = origin if origin is not None else headers.get("referer")
    if source is None:
        return  # not a browser that says; the token still has to match
    netloc = urlsplit(source).netloc.lower() if source != "null" else "null"
    if netloc != _host(headers):
        raise ForbiddenError(
            f"cross-site request refused: it comes from {source!r}, not this site "
            f"({_host(headers) or 'no Host'})"
        )


def check_csrf(event: Mapping[str, Any], session_id: str, max_bytes: int) -> None:
    headers = event.get("headers") or {}
    check_origin(headers)
    form = form_fields(event, max_bytes)
    sent = headers.get("x-csrf-token") or (form or {}).get("csrf") or ""
    if not sent:
        raise ForbiddenError(
            "CSRF token missing: this request needs the page's form token; reload the page "
            "and try again"
        )
    if not hmac.compare_digest(sent.encode("utf-8"), csrf_token(session_id).encode("utf-8")):
        raise ForbiddenError(
            "CSRF token does not match this session: reload the page and try again"
        )


def check_hand(event: Mapping[str, Any], session: Mapping[str, Any], max_bytes: int) -> None:
    """The request sends the session's hand (``X-Claros-Hand``, or the ``hand`` form
    field): 403 when it is missing or not this session's, or the session has none."""
    headers = event.get("headers") or {}
    sent = headers.get(HAND_HEADER.lower()) or ""
    if not sent:
        sent = (form_fields(event, max_bytes) or {}).get(HAND_FIELD) or ""
    stored = session.get("hand_hash")
    if not sent or len(sent) > _MAX_HAND or not isinstance(stored, str):
        raise ForbiddenError(HAND_REFUSED)
    if not hmac.compare_digest(hand_hash(sent).encode(), stored.encode("utf-8", "replace")):
        raise ForbiddenError(HAND_REFUSED)


def session_principal(
    services: Services, event: Mapping[str, Any], *, hand: bool = True
) -> Principal | None:
    """The signed-in person of a request carrying a session cookie, None without one.

    Raises 401 for a dead session and 403 when a state-changing request fails CSRF or
    (unless ``hand`` is False: sign-out) does not send the session's hand."""
    session_id = read_session_id(event)
    if session_id is None:
        return None
    principal, session = _load_session(
        services.store, session_id, note_use=services.settings.notes_key_use
    )
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", "GET"))
    if method.upper() not in SAFE_METHODS:
        check_csrf(event, session_id, services.settings.max_body_bytes)
        if hand:
            check_hand(event, session, services.settings.max_body_bytes)
    return principal


def request_principal(
    services: Services,
    event: Mapping[str, Any],
    *,
    web: bool,
    csrf: bool = True,
    hand: bool = True,
) -> Principal:
    """Who sends ``event``: its ``Authorization: Bearer`` key; with ``web`` and no
    Authorization header, its session cookie (on a state-changing method CSRF-checked too,
    unless ``csrf`` is False, and needing the session's hand unless ``hand`` is False).
    401 when neither stands.

    The one place a request's credential is read: the API's routes ask it
    (``claros.api.http.caller``, which then checks the route's kinds) and so does the HTTP
    API's Lambda authorizer (``claros.api.authorizer``, authentication only: its answers
    are cached by credential, across routes, so kinds and CSRF stay the route's)."""
    headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
    authorization = headers.get("authorization")
    if web and not authorization:
        if csrf:
            found = session_principal(services, event, hand=hand)
        else:
            session_id = read_session_id(event)
            found = (
                None
                if session_id is None
                else load_session(
                    services.store, session_id, note_use=services.settings.notes_key_use
                )
            )
        if found is not None:
            return found
    return authenticate(services.store, authorization, note_use=services.settings.notes_key_use)
