"""Routes of the web app (/app) and of device sign-in (/v1/device/*), in the admin function.

Pages are server-rendered HTML with plain forms. A page accepts a signed-in person's
session cookie (state-changing forms carry the session's CSRF token and its hand, which
claros.js keeps in the origin's storage: claros.web.sessions) or, for scripts, a bearer
key. Browsers (``Accept: text/html`` or a form post) get HTML, redirects and error
pages; other clients get JSON, with the API's error shape.

Parts of Evidence that other routes serve (retention, the AIUC-1 pack, oversight) are
asked in-process, as the signed-in person, through a resolver holding every function's
routes; a route this server lacks shows as "not available". Downloads that other functions
serve (the export, the printable report) are plain links: GET routes take the cookie too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Literal, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from aws_lambda_powertools.event_handler.api_gateway import Response
from aws_lambda_powertools.shared.cookies import Cookie
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from claros import jsonutil
from claros.api.http import (
    PAGES,
    PERMISSIONS,
    WEB,
    ClarosResolver,
    Handler,
    caller,
    declare,
    json_response,
    parse_json,
    public,
    template_only,
    validate_object,
    validation_details,
)
from claros.ask_answer import AnswerRequest
from claros.asks import answer_ask
from claros.auth import AUDIT_DAYS, MAX_AUDIT_DAYS, PERSON_KINDS, Principal, create_key
from claros.checkpoints import sign_checkpoint
from claros.clock import now_ms, utc_now
from claros.errors import (
    BadRequestError,
    ClarosError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    UnavailableError,
)
from claros.evidence.activity import DAY_MS, load_versions
from claros.evidence.retention import FLOOR_DAYS, MAX_DAYS, get_retention, set_retention
from claros.evidence.windowed import HOME_PARTS, window_bucket, window_counters
from claros.mapping.tools import APPS, confirm_tool, remove_app
from claros.rules.service import list_rules
from claros.store.base import ConflictError as StoreConflictError
from claros.store.base import DocWrite, StoreError
from claros.tamper import report as tampering_report
from claros.timeline import timeline
from claros.web import pages, sessions
from claros.web.evidence_page import EvidenceData, Fetched, evidence_page
from claros.web.html import Safe, render
from claros.web.plain import plain_problem
from claros.web.views import (
    WINDOWS,
    agents_of,
    answered_asks,
    checks_by_day,
    near_misses,
    waiting,
)

__all__ = ["register"]

log = logging.getLogger("claros.web")

M = TypeVar("M", bound=BaseModel)
ADMINS = frozenset({"admin"})
# A person's own credentials (THREATS.md §1): an agent or service key never reaches a page.
PEOPLE = PERSON_KINDS
WEB_APP = "never use the web app: sign in with your person key (or an admin key)"
MINT = (
    "never mint keys: a person makes agent keys signed in with their person key (or with "
    "an admin key)"
)
ANSWER = "never answer asks: a person answers with their person key (or an admin key)"
DEVICE = "never approve device sign-ins: a person approves with their person key (or an admin key)"
HTML = "text/html; charset=utf-8"
PAGE_HEADERS = pages.PAGE_HEADERS


# --- inputs -----------------------------------------------------------------------------
class AnswerForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    WORDS: ClassVar[dict[str, str]] = {
        "decision": "Choose Approve or Deny.",
        "note": "The note is too long: at most 2,000 characters.",
    }

    decision: Literal["approve", "deny"]
    note: str | None = Field(None, max_length=2000)
    once: str = Field("", max_length=64)  # the Asks page's one-use token
    back: Literal["home", "asks"] = "home"  # where the answer was given, to go back to

    @field_validator("note")
    @classmethod
    def _blank(cls, note: str | None) -> str | None:
        return note.strip() or None if note is not None else None


class SignInForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    WORDS: ClassVar[dict[str, str]] = {
        "key": "That is not a Claros key: a key starts with ck_ and is about 45 characters.",
        "next": "The page to go back to is too long: sign in from the sign-in page itself.",
    }

    key: str | None = Field(None, max_length=200)
    next: str | None = Field(None, max_length=500)


class RetentionForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    WORDS: ClassVar[dict[str, str]] = {
        "days": f"Retention must be a whole number of days, at least {FLOOR_DAYS} (six "
        f"months) and at most {MAX_DAYS:,}.",
    }

    days: int = Field(ge=FLOOR_DAYS, le=MAX_DAYS)


class VerifyForm(BaseModel):
    """ "Verify everything now" carries nothing but its CSRF token."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class KeyForm(BaseModel):
    """The form that makes an audit key (Evidence) or an agent key (Home)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    WORDS: ClassVar[dict[str, str]] = {
        "label": "The label is too long: at most 100 characters.",
        "once": "This form is out of date: reload the page and send it again.",
    }

    label: str = Field("", max_length=100)
    # The form's one-use token (pages.one_use_field): a reload does not make a second key.
    once: str = Field("", max_length=64)
    days: str = Field("", max_length=12)  # an audit key's life; empty: the default


def _audit_days(raw: str) -> int | None:
    raw = raw.strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_AUDIT_DAYS:
        raise BadRequestError(
            f"An audit key lives a whole number of days, from 1 to {MAX_AUDIT_DAYS}."
        )
    return int(raw)


FORMS_SENT = "form_sent"


@contextlib.contextmanager
def _form_once(
    app: ClarosResolver,
    principal: Principal,
    once: str,
    why: str = "a key is shown only once: make another if you need one",
) -> Iterator[None]:
    """Run the form's action once: a form sent again (a reload of the page a key was shown
    on, a second click) is refused with ``why``. If the action fails, the form is given
    back, so sending it again does the action (or says again why it cannot) instead of
    claiming it was already sent."""
    if not once:
        yield
        return
    store = app.services.store
    try:
        store.write_docs([DocWrite(principal.workspace, FORMS_SENT, once, {"at": now_ms()}, 0)])
    except StoreConflictError:
        raise ConflictError(f"this form was already sent, and {why}") from None
    try:
        yield
    except Exception:
        # Best effort: if the store cannot take this either, the form stays spent and a
        # reload of the page gives a fresh one.
        with contextlib.suppress(StoreError):
            store.write_docs([DocWrite(principal.workspace, FORMS_SENT, once, None)])
        raise


class ConfirmForm(BaseModel):
    """The Rules page's "Confirm it is a read" button."""

    model_config = ConfigDict(extra="ignore", defer_build=True)
    WORDS: ClassVar[dict[str, str]] = {
        "once": "This form is out of date: reload the page and send it again.",
    }

    once: str = Field("", max_length=64)


class DeviceAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    WORDS: ClassVar[dict[str, str]] = {
        "user_code": "Type the code your terminal shows, like BCDF-GHJK.",
        "decision": "Choose Approve or Deny.",
    }

    user_code: str = Field(min_length=1, max_length=20)
    decision: Literal["approve", "deny"]


class DeviceCodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    client: str = Field("claros-cli", min_length=1, max_length=64)
    name: str = Field("", max_length=128)


class DeviceTokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    device_code: str = Field(min_length=1, max_length=128)


def _headers(app: ClarosResolver) -> Mapping[str, str]:
    return app.current_event.headers


def _is_form(app: ClarosResolver) -> bool:
    content_type = (_headers(app).get("content-type") or "").split(";")[0].strip().lower()
    return content_type == "application/x-www-form-urlencoded"


def _wants_html(app: ClarosResolver) -> bool:
    return _is_form(app) or "text/html" in (_headers(app).get("accept") or "")


def read_input(app: ClarosResolver, model: type[M], *, empty_ok: bool = False) -> M:
    """The request's form fields or JSON object, validated by ``model`` (400 with a reason)."""
    form = sessions.form_fields(app.current_event, app.services.settings.max_body_bytes)
    if form is not None:
        fields = {k: v for k, v in form.items() if k not in ("csrf", "hand")}
        try:
            return model.model_validate(fields)
        except ValidationError as exc:
            # A person reads this: the form's own words, never the library's (the JSON
            # answer below keeps the field-by-field details scripts use).
            words = getattr(model, "WORDS", None)
            raise BadRequestError(
                plain_problem(exc, words), details=validation_details(exc)
            ) from exc
    value: Any
    if empty_ok and not (app.current_event.body or "").strip():
        value = {}
    else:
        value = parse_json(app.current_event, app.services.settings)
    return validate_object(value, model)


# --- responses --------------------------------------------------------------------------
def html_response(
    body: str, status: int = 200, *, cookies: list[Cookie] | None = None
) -> Response[str]:
    return Response(status, HTML, body, headers=dict(PAGE_HEADERS), cookies=cookies or [])


def redirect(location: str, *, cookies: list[Cookie] | None = None) -> Response[str]:
    headers = {"Location": location, "Cache-Control": "no-store"}
    return Response(303, HTML, "", headers=headers, cookies=cookies or [])


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a path of this app, never another site, and nothing
    but printable ASCII (a link's path and query are percent-encoded), so no line break or
    control character reaches the Location header the value goes into."""
    if not value or not all("!" <= c <= "~" for c in value):
        return "/app"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not parts.path.startswith("/app") or "\\" in value:
        return "/app"
    return value


def _chrome(app: ClarosResolver, principal: Principal | None, active: str = "") -> pages.Chrome:
    session_id = sessions.read_session_id(app.current_event)
    csrf = sessions.csrf_token(session_id) if session_id and principal else None
    return pages.Chrome(principal, csrf, active)


def _error(app: ClarosResolver, principal: Principal | None, exc: ClarosError) -> Response[str]:
    event = app.current_event
    if exc.status == 401:
        cookies = [sessions.clear_cookie(event.headers)] if sessions.read_session_id(event) else []
        method = event.request_context.http.method
        back = event.path if method == "GET" else "/app"
        why = "expired" if "expired" in exc.message else "signin"
        query = urlencode({"next": back, "why": why})
        return redirect(f"/app/signin?{query}", cookies=cookies)
    if exc.status == 403 and exc.message == sessions.HAND_REFUSED:
        # The session reads, and cannot act from here: the way on is signing in again
        # (the sign-in page shows its form, signed in or not, for this reason).
        again = "/app/signin?" + urlencode({"next": "/app", "why": "hand"})
        body = pages.error_page(
            _chrome(app, principal), 403, exc.message, action=(again, "Sign in again")
        )
        return html_response(body, 403)
    return html_response(
        pages.error_page(_chrome(app, principal), exc.status, exc.message), exc.status
    )


def page(
    app: ClarosResolver,
    method: str,
    path: str,
    kinds: frozenset[str],
    refusal: str | None = None,
    *,
    hand: bool = True,
) -> Callable[[Handler], Handler]:
    """A web route: declared with its kinds like ``routed``, reached by bearer key or session
    cookie (on POST CSRF-checked and, unless ``hand`` is False, needing the session's hand);
    errors become pages for browsers, JSON for the rest."""
    rule = declare(method, path, kinds)
    WEB.add((method, path))
    if method == "GET":
        PAGES.add((method, path))

    def decorate(fn: Handler) -> Handler:
        @functools.wraps(fn)
        def handler(**params: str) -> Any:
            principal: Principal | None = None
            try:
                principal = caller(app, kinds, web=True, refusal=refusal, hand=hand)
                return fn(principal, **params)
            except ClarosError as exc:
                if not _wants_html(app):
                    raise
                return _error(app, principal, exc)

        app.route(rule, method)(handler)
        return fn

    return decorate


# --- in-process calls to other functions' routes ----------------------------------------
_internal: weakref.WeakKeyDictionary[ClarosResolver, ClarosResolver] = weakref.WeakKeyDictionary()
_internal_lock = threading.Lock()


def _everything(app: ClarosResolver) -> ClarosResolver:
    """A resolver with every function's routes (built once per resolver, i.e. per thread)."""
    with _internal_lock:
        found = _internal.get(app)
        if found is None:
            from claros.api.app import FUNCTIONS, build_resolver  # app.py imports this module

            found = build_resolver(app.services, FUNCTIONS)
            _internal[app] = found
    return found


def serves(app: ClarosResolver, method: str, path: str) -> bool:
    """Whether this server has the route (any function's)."""
    _everything(app)
    return (method, path) in PERMISSIONS


def call_route(
    app: ClarosResolver,
    principal: Principal,
    method: str,
    path: str,
    *,
    query: Mapping[str, str] | None = None,
    body: Mapping[str, Any] | None = None,
) -> Fetched:
    """Ask another route in-process as ``principal`` (its kinds still apply)."""
    route = f"{method} {path}"
    if not serves(app, method, path):
        return Fetched(route)
    outer = app.current_event
    headers = {
        k: v
        for k, v in outer.headers.items()
        if k not in ("authorization", "cookie", "content-type", "content-length")
    }
    headers["accept"] = "application/json"
    if body is not None:
        headers["content-type"] = "application/json"
    context = dict(outer.raw_event.get("requestContext") or {})
    context["http"] = {**(context.get("http") or {}), "method": method, "path": path}
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": headers,
        "queryStringParameters": dict(query) if query else None,
        "requestContext": context,
        "body": jsonutil.dumps(dict(body)) if body is not None else None,
        "isBase64Encoded": False,
    }
    internal = _everything(app)
    with internal.acting_as(principal):
        result = internal.resolve(event, app.lambda_context)
    status = int(result.get("statusCode", 500))
    try:
        parsed = jsonutil.loads(result.get("body") or "null")
    except ValueError:
        parsed = None
    return Fetched(route, status, parsed)


# --- the routes -------------------------------------------------------------------------
def register(app: ClarosResolver) -> None:
    _sign_in_routes(app)
    _home_routes(app)
    _admin_routes(app)
    _evidence_routes(app)
    _device_routes(app)
    from claros.api import web_people  # it builds on this module's helpers

    web_people.register(app)
    from claros.api import web_activity  # it imports this module: Activity and check pages

    web_activity.register(app)
    _more_routes(app)

    @public(app, "GET", "/app/static/{name}", reason="the app's CSS and JS, before sign-in")
    def static(name: str) -> Response[str | bytes]:
        content_type = pages.STATIC.get(name)
        if content_type is None:
            raise NotFoundError(f"no static file {name!r}")
        headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
        return Response(200, content_type, pages.static_file(name).decode(), headers=headers)


def _more_routes(app: ClarosResolver) -> None:
    """Pages in modules of their own (they import this one)."""
    from claros.api import web_rules

    web_rules.register(app)
    app.page_not_found = functools.partial(_page_not_found, app)
    # In AWS, API Gateway answers a path no route names itself (JSON): this catch-all
    # sends the rest of /app here, to the page above.
    template_only("GET", "/app/{proxy+}", reason="any other /app path: the 404 page")


SIGN_OUT_BY_LINK = (
    "Sign out with the Sign out button at the top of a page: opening a link or typing the "
    "address does not sign you out."
)


def _page_not_found(app: ClarosResolver) -> Response[str] | None:
    """An /app path no route serves: the web app's error page (signed in or not), not the
    API's "no route" JSON; a client that asks for JSON only gets the same answer as JSON.
    ``GET /app/signout`` is one: signing out changes state, so it is a form's POST (with
    the CSRF token), never a link's GET."""
    event = app.current_event
    path = event.path
    if not (path == "/app" or path.startswith("/app/")):
        return None
    accept = _headers(app).get("accept") or ""
    json_only = "application/json" in accept and "text/html" not in accept
    principal: Principal | None = None
    try:
        principal = caller(app, PEOPLE, web=True)
    except ClarosError:
        pass  # signed out (or a key that may not use the app): the page without tabs
    if path.rstrip("/") == "/app/signout":
        status, message = 405, SIGN_OUT_BY_LINK
    else:
        status = 404
        message = "There is no such page. Check the address, or start again from Home."
    if json_only:
        code = "not_found" if status == 404 else "method_not_allowed"
        response = json_response({"error": code, "message": f"no page {path}: {message}"}, status)
    else:
        chrome = _chrome(app, principal)
        response = html_response(pages.error_page(chrome, status, message), status)
    if status == 405:
        response.headers["Allow"] = "POST"
    return response


_SIGN_IN_NOTES = {
    "signed_out": "You are signed out.",
    "expired": "Your session ended. Sign in again.",
    "signin": "Sign in to continue.",
    "hand": "This browser has no sign-in of its own here, so it can read but not act: "
    "sign in again to approve, answer or change anything.",
}


def _form_next(app: ClarosResolver) -> str:
    """The sign-in form's ``next``, when the form can be read at all (a form too large or
    malformed to read is what the page is already saying)."""
    try:
        form = sessions.form_fields(app.current_event, app.services.settings.max_body_bytes)
    except ClarosError:
        return "/app"
    return safe_next((form or {}).get("next"))


def _sign_in_routes(app: ClarosResolver) -> None:
    services = app.services

    @public(app, "GET", "/app/signin", reason="the sign-in form")
    def signin_form() -> Response[str]:
        event = app.current_event
        query = event.query_string_parameters or {}
        target = safe_next(query.get("next"))
        session_id = sessions.read_session_id(event)
        if session_id and query.get("why") != "hand":
            try:
                sessions.load_session(services.store, session_id)
                return redirect(target)
            except ClarosError:
                pass
        note = _SIGN_IN_NOTES.get(
            "signed_out" if "signed_out" in query else query.get("why", ""), ""
        )
        return html_response(pages.signin_page(next_path=target, note=note))

    @public(app, "POST", "/app/signin", reason="turns a person's key into a session")
    def signin() -> Response[str]:
        event = app.current_event
        form = _is_form(app)
        try:
            sessions.check_origin(event.headers)
            body = read_input(app, SignInForm, empty_ok=True)
            header = event.headers.get("authorization") or ""
            key = body.key or (header.partition(" ")[2].strip() if header else "")
            if not key:
                raise BadRequestError("give your key")
            session_id, hand, principal = sessions.open_session_with_hand(services.store, key)
        except ClarosError as exc:
            if not form:
                raise
            page_ = pages.signin_page(next_path=_form_next(app), error=exc.message)
            return html_response(page_, exc.status)
        cookie = sessions.session_cookie(session_id, event.headers)
        if form:
            # Not a redirect: a page whose claros.js keeps the hand in this origin's
            # storage (never a cookie: cookies reach every port of the host), then goes on.
            signed_in = pages.signed_in_page(next_path=safe_next(body.next), hand=hand)
            return html_response(signed_in, cookies=[cookie])
        answer = {
            "person": principal.person,
            "workspace": principal.workspace,
            "kind": principal.kind,
            "csrf": sessions.csrf_token(session_id),
            "hand": hand,
            "expires_in": sessions.SESSION_TTL_S,
        }
        response = json_response(answer)
        response.cookies.append(cookie)
        return response

    # Sign-out needs the CSRF token, not the hand: a person can always end a session,
    # even one whose cookie got out from a browser that lost its hand.
    @page(app, "POST", "/app/signout", PEOPLE, WEB_APP, hand=False)
    def signout(principal: Principal) -> Response[str]:
        event = app.current_event
        session_id = sessions.read_session_id(event)
        if session_id:
            sessions.close_session(services.store, session_id)
        cookie = sessions.clear_cookie(event.headers)
        if _wants_html(app):
            return redirect("/app/signin?signed_out=1", cookies=[cookie])
        response = json_response({"signed_out": True})
        response.cookies.append(cookie)
        return response


def _home_days(text: str | None) -> int:
    """Home's window (?days=): one of WINDOWS, 30 when not given."""
    if text is None or text == "":
        return 30
    if not text.isascii() or not text.isdigit() or int(text) not in WINDOWS:
        shown = ", ".join(str(d) for d in WINDOWS)
        raise BadRequestError(f"The window must be {shown} days; {text[:20]!r} is not one of them.")
    return int(text)


def _home_routes(app: ClarosResolver) -> None:
    services = app.services
    store = services.store

    @page(app, "GET", "/app", PEOPLE, WEB_APP)
    def home(principal: Principal) -> Response[str]:
        query = app.current_event.query_string_parameters or {}
        before = query.get("before") or None
        flash = Safe("")
        if query.get("answered") and query.get("decision") in ("approved", "denied"):
            flash = pages.notice(
                render("You {d} ask <code>{a}</code>.", d=query["decision"], a=query["answered"]),
                "ok",
            )
        asks, queue = waiting(store, principal)
        days = _home_days(query.get("days"))
        now = now_ms()
        # An admin's Home shows the workspace's agents (the demo's act for its members,
        # not for the admin); a member's, the agents acting for them.
        wide = principal.is_admin
        since_ms = now - days * 86_400_000
        window = window_bucket(store, principal.workspace, since_ms, now + 1,
                               only=HOME_PARTS)  # fmt: skip
        answered = answered_asks(store, principal)
        body = pages.home_page(
            _chrome(app, principal, "home"),
            asks=asks,
            asks_open=queue.open,
            asks_more="/app/asks?mine=1" if queue.next else "",
            answered=answered.asks,
            answered_more="/app/asks?answered=1" if answered.next else "",
            since=dt.datetime.fromtimestamp(since_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M"),
            agents=agents_of(store, principal, days=days, now=now, workspace_wide=wide,
                             bucket=window),
            timeline=timeline(store, principal, limit=25, before=before),
            now=now,
            days=days,
            workspace_wide=wide,
            by_day=checks_by_day(store, principal, now=now, workspace_wide=wide),
            near=near_misses(window, principal, workspace_wide=wide),
            flash=flash,
        )  # fmt: skip
        return html_response(body)

    @page(app, "POST", "/app/keys", PEOPLE, MINT)
    def agent_key(principal: Principal) -> Response[str]:
        """A person makes an agent key of their own, signed in to the web app with their
        person key (or with an admin key). Never with an agent or service key: an agent
        holding one must not mint more. The new key records this one as its parent."""
        form = read_input(app, KeyForm, empty_ok=True)
        if not principal.person:
            raise ForbiddenError("an agent key belongs to a person")
        with _form_once(app, principal, form.once):
            key = create_key(store, principal.workspace, "agent", person=principal.person,
                             made_by=principal.person, label=form.label, parent=principal,
                             with_member=False)  # fmt: skip
        if _wants_html(app):
            body = pages.agent_key_page(_chrome(app, principal, "home"), key=key, label=form.label)
            return html_response(body, 201)  # pages are never cached
        answer = {"key": key, "kind": "agent", "label": form.label, "person": principal.person}
        return json_response(answer, 201, headers={"Cache-Control": "no-store"})

    @page(app, "POST", "/app/asks/{ask_id}/answer", PEOPLE, ANSWER)
    def answer(principal: Principal, ask_id: str) -> Response[str]:
        form = read_input(app, AnswerForm)
        with _form_once(app, principal, form.once, "the ask was answered: see Asks"):
            result = answer_ask(
                services, principal, ask_id, AnswerRequest(decision=form.decision, note=form.note)
            )
        if _wants_html(app):
            query = urlencode({"answered": ask_id, "decision": result["status"]})
            if form.back == "asks":
                return redirect(f"/app/asks?{query}")
            return redirect(f"/app?{query}#asks")
        return json_response(result)


# The saved-checkpoints file of claros_guard.verify (SAVED_FORMAT), which the server
# package does not import.
SAVED_CHECKPOINTS = "claros-checkpoints/1"


def _admin_routes(app: ClarosResolver) -> None:
    services = app.services

    @page(app, "POST", "/app/apps/{app}/tools/{tool}/confirm", ADMINS)
    def confirm(principal: Principal, **path: str) -> Response[str]:
        form = read_input(app, ConfirmForm, empty_ok=True)
        with _form_once(app, principal, form.once, "the tool was confirmed: see the Rules page"):
            done = confirm_tool(services, principal, path["app"], path["tool"])
        if _wants_html(app):
            query = urlencode({"confirmed": f"{done['app']} {done['tool']}"})
            return redirect(f"/app/rules?{query}#tools")
        return json_response(done)

    @page(app, "GET", "/app/apps/{app}", ADMINS)
    def app_tools(principal: Principal, **path: str) -> Response[str]:
        """One app's registered tools (the Rules page lists the apps, one row each)."""
        doc = services.store.get_doc(principal.workspace, APPS, path["app"])
        if doc is None:
            raise NotFoundError(f"app {path['app']!r} has registered no tools")
        body = pages.app_page(_chrome(app, principal, "rules"), path["app"], doc.value)
        return html_response(body)

    @page(app, "POST", "/app/apps/{app}/remove", ADMINS)
    def remove(principal: Principal, **path: str) -> Response[str]:
        form = read_input(app, ConfirmForm, empty_ok=True)
        with _form_once(app, principal, form.once, "the app was removed: see the Rules page"):
            done = remove_app(services, principal, path["app"])
        if _wants_html(app):
            return redirect(f"/app/rules?{urlencode({'removed': done['app']})}#tools")
        return json_response(done)

    @page(app, "GET", "/app/evidence", ADMINS)
    def evidence(principal: Principal) -> Response[str]:
        query = app.current_event.query_string_parameters or {}
        flash = Safe("")
        if query.get("retention") == "saved":
            flash = pages.notice("Retention saved.", "ok")
        elif query.get("verified") == "ok":
            flash = pages.notice("Verified everything: the whole chain holds.", "ok")
        elif query.get("verified") == "failed":
            flash = pages.notice("Verified everything: the chain does not verify.", "danger")
        return html_response(
            evidence_page(
                _chrome(app, principal, "evidence"), _evidence(app, principal), flash=flash
            )
        )


def _evidence_routes(app: ClarosResolver) -> None:
    services = app.services
    store = services.store

    @page(app, "GET", "/app/evidence/checkpoints", ADMINS)
    def checkpoints(principal: Principal) -> Response[str]:
        """Today's checkpoints, in the file ``claros verify --save`` writes (so
        ``claros verify --checkpoints`` reads it). Locally the unsigned tail is signed
        first; in AWS only the checkpoint function signs, so the file ends at its last."""
        workspace = principal.workspace
        head = store.head(workspace)
        latest = store.latest_checkpoint(workspace)
        if (
            services.settings.inline_checkpoints
            and head
            and (latest is None or latest.seq < head.seq)
        ):
            sign_checkpoint(store, services.signer, head)
        now = utc_now()
        body = {
            "format": SAVED_CHECKPOINTS,
            "workspace": workspace,
            "saved_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "source": _base_url(app),
            "public_keys": [k.to_json() for k in store.public_keys(workspace)],
            "checkpoints": [cp.to_json() for cp in store.checkpoints(workspace)],
        }
        name = f"claros-checkpoints-{now.date().isoformat()}.json"
        headers = {
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "no-store",
        }
        return json_response(body, headers=headers)

    @page(app, "POST", "/app/evidence/verify", ADMINS)
    def verify_everything(principal: Principal) -> Response[str]:
        """Verify everything now: the whole chain again, not only its new segments."""
        from claros.evidence.verified import verify_now  # this route's only

        read_input(app, VerifyForm, empty_ok=True)
        state = verify_now(store, principal.workspace, keep=services.settings.keeps_verified_state)
        if _wants_html(app):
            verdict = "ok" if not state["failures"] else "failed"
            return redirect(f"/app/evidence?verified={verdict}#chain")
        return json_response(state)

    @page(app, "POST", "/app/evidence/retention", ADMINS)
    def retention(principal: Principal) -> Response[str]:
        form = read_input(app, RetentionForm)
        # The domain call, not the route: in AWS the retention routes live in the prune
        # function, while setting retention needs only what this function may do.
        saved = set_retention(app.services.store, principal, form.days)
        if _wants_html(app):
            return redirect("/app/evidence?retention=saved#retention")
        return json_response(saved)

    @page(app, "POST", "/app/evidence/audit-keys", ADMINS)
    def audit_key(principal: Principal) -> Response[str]:
        form = read_input(app, KeyForm, empty_ok=True)
        if not principal.person:
            raise ForbiddenError("an audit key is made by a workspace admin")
        days = _audit_days(form.days)
        with _form_once(app, principal, form.once):
            key = create_key(
                store,
                principal.workspace,
                "audit",
                made_by=principal.person,
                label=form.label,
                parent=principal,
                expires_days=days,
            )
        if _wants_html(app):
            body = pages.audit_key_page(
                _chrome(app, principal, "evidence"), key=key, label=form.label
            )
            return html_response(body, 201)
        answer = {"key": key, "kind": "audit", "label": form.label, "made_by": principal.person,
                  "expires_days": days or AUDIT_DAYS}  # fmt: skip
        return json_response(answer, 201, headers={"Cache-Control": "no-store"})


_RELAYED: dict[int, type[ClarosError]] = {
    400: BadRequestError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
}


def _relayed(done: Fetched) -> ClarosError:
    """Another route's error, as ours (a 5xx there is a 503 here)."""
    message = done.body.get("message") if isinstance(done.body, dict) else None
    text = str(message or f"{done.route} answered {done.status}")
    return _RELAYED.get(int(done.status or 503), UnavailableError)(text)


def _direct(route: str, compute: Callable[[], Any]) -> Fetched:
    try:
        return Fetched(route, 200, compute())
    except ClarosError as exc:
        return Fetched(route, exc.status, exc.to_json())


def _evidence(app: ClarosResolver, principal: Principal) -> EvidenceData:
    # The Evidence page's own computations, imported by its first request only (the
    # AIUC-1 pack, oversight and the verified report are 10 ms of the admin function's
    # cold start that no other page or route uses).
    from claros.evidence.aiuc1 import aiuc1_pack
    from claros.evidence.oversight import oversight
    from claros.evidence.verified import state_json

    store, workspace = app.services.store, principal.workspace
    fast = app.services.settings.fast_approval_s
    now = utc_now()
    workflows = sorted({str(r["rule"]["workflow_id"]) for r in list_rules(store, workspace)})
    end = now_ms()
    window = window_counters(store, workspace, load_versions(store, workspace),
                             start=end - 90 * DAY_MS, end=end + 1, fast_seconds=fast)  # fmt: skip
    return EvidenceData(
        workspace=workspace,
        # The verified-through state brought up to the head (claros.evidence.verified);
        # AWS: unacknowledged tampering fails the verify shown here too.
        verify=_verify_shown(app, workspace),
        verified=state_json(store, workspace),
        checkpoint=store.latest_checkpoint(workspace),
        public_keys=len(store.public_keys(workspace)),
        available={
            "export": serves(app, "GET", "/api/evidence/export"),
            "stream": serves(app, "GET", "/api/evidence/stream"),
            "report": serves(app, "GET", "/api/evidence/report"),
        },
        presigned_export=bool(app.services.settings.export_bucket),
        # Domain calls, not routes: in AWS those routes live in other functions.
        retention=_direct("GET /api/evidence/retention", lambda: get_retention(store, workspace)),
        # Both over the same 90 days: the window is counted once.
        aiuc1=_direct(
            "GET /api/evidence/aiuc1",
            lambda: aiuc1_pack(
                store,
                workspace,
                days=90,
                fast_seconds=fast,
                now=end,
                counters=window,
                keep_state=app.services.settings.keeps_verified_state,
            ),  # fmt: skip
        ),
        oversight=_direct(
            "GET /api/evidence/oversight",
            lambda: oversight(
                store, workspace, days=90, fast_seconds=fast, now=end, counter=window.oversight
            ),
        ),
        workflows=workflows,
        month=now.strftime("%Y-%m"),
        today=now.date().isoformat(),
    )


def _verify_shown(app: ClarosResolver, workspace: str) -> dict[str, Any]:
    from claros.evidence.verified import verified_report  # the Evidence page's only

    store, tamper = app.services.store, app.services.tamper
    report = verified_report(store, workspace, keep=app.services.settings.keeps_verified_state)
    if tamper is not None:
        report.failures.extend(tampering_report(store, tamper, workspace)[1])
    return report.to_json()


def _base_url(app: ClarosResolver) -> str:
    headers = _headers(app)
    host = headers.get("host") or app.current_event.request_context.domain_name
    proto = headers.get("x-forwarded-proto") or (
        "http" if sessions.is_local_host(headers) else "https"
    )
    return f"{proto}://{host}"


def _device_routes(app: ClarosResolver) -> None:
    store = app.services.store

    @public(app, "POST", "/v1/device/code", reason="a CLI without a key starts device sign-in")
    def device_code() -> Response[str]:
        # Device sign-in's code: imported by these routes' requests, not by every page's
        # cold start (claros login is rare; the web function's first request is a page).
        from claros.web.device import start_device

        body = read_input(app, DeviceCodeRequest, empty_ok=True)
        address = app.current_event.request_context.http.source_ip or "unknown"
        started = start_device(store, client=body.client, name=body.name, address=address)
        base = _base_url(app)
        started["verification_uri"] = f"{base}/app/device"
        started["verification_uri_complete"] = (
            f"{base}/app/device?code={quote(started['user_code'])}"
        )
        return json_response(started, 201, headers={"Cache-Control": "no-store"})

    @public(app, "POST", "/v1/device/token", reason="the CLI polls with its device code")
    def device_token() -> Response[str]:
        from claros.web.device import poll_device

        body = read_input(app, DeviceTokenRequest)
        return json_response(
            poll_device(store, body.device_code), headers={"Cache-Control": "no-store"}
        )

    @page(app, "GET", "/app/device", PEOPLE, DEVICE)
    def device(principal: Principal) -> Response[str]:
        code = (app.current_event.query_string_parameters or {}).get("code", "")[:20]
        chrome = _chrome(app, principal)
        if not code:
            return html_response(pages.device_page(chrome, view=None))
        from claros.web.device import device_view

        try:
            view = device_view(store, code)
        except (BadRequestError, NotFoundError) as exc:
            if not _wants_html(app):
                raise
            body = pages.device_page(chrome, view=None, code=code, error=exc.message)
            return html_response(body, exc.status)
        return html_response(pages.device_page(chrome, view=view, now=now_ms()))

    @page(app, "POST", "/app/device", PEOPLE, DEVICE)
    def device_answer(principal: Principal) -> Response[str]:
        from claros.web.device import answer_device

        form = read_input(app, DeviceAnswer)
        view = answer_device(store, principal, form.user_code, form.decision)
        if _wants_html(app):
            return html_response(pages.device_page(_chrome(app, principal), view=view))
        return json_response(view)
