"""Routes for Asks (the full queue) and Keys & people, in the web app and as JSON routes.

Pages: ``GET /app/asks`` (every open ask the signed-in person may answer, soonest-expiring
first, page by page; answered through ``POST /app/asks/{ask_id}/answer``) and
``GET /app/keys`` (an admin: every key and member; anyone else: their own keys), with
forms to revoke a key and to add, promote, demote and remove members. Every form carries
the session's CSRF token and a one-use token. The same operations for scripts are under
``/api/keys`` and ``/api/members`` (``claros.api.people``, in the admin function; docs/api.md).
The decisions are ``claros.people``'s.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote, urlencode

from aws_lambda_powertools.event_handler.api_gateway import Response
from pydantic import BaseModel, ConfigDict, Field

from claros.api.http import ClarosResolver, json_response, query_int
from claros.api.people import KEYS, PAGE
from claros.api.web import (
    ADMINS,
    PEOPLE,
    _chrome,
    _form_once,
    _wants_html,
    html_response,
    page,
    read_input,
    redirect,
)
from claros.ask_queue import sees_every_ask
from claros.asks import my_asks_page
from claros.auth import Principal
from claros.clock import now_ms
from claros.people import (
    Actor,
    add_person,
    change_role,
    list_keys,
    list_members,
    remove_member,
    revoke_key,
)
from claros.web.pages import one_use_field
from claros.web.templating import render_page
from claros.web.views import waiting

__all__ = ["register"]

ANSWER = "never answer asks: a person answers with their person key (or an admin key)"


class OnceForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    once: str = Field("", max_length=64)


class MemberForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    email: str = Field(max_length=254)
    once: str = Field("", max_length=64)


class RoleForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    role: Literal["admin", "member"]
    once: str = Field("", max_length=64)


def _query(app: ClarosResolver) -> dict[str, str]:
    return dict(app.current_event.query_string_parameters or {})


def register(app: ClarosResolver) -> None:
    _ask_routes(app)
    _key_pages(app)
    _member_pages(app)


# --- Asks -------------------------------------------------------------------------------
def _ask_routes(app: ClarosResolver) -> None:
    store = app.services.store

    @page(app, "GET", "/app/asks", PEOPLE, ANSWER)
    def asks(principal: Principal) -> Response[str]:
        query = _query(app)
        if query.get("answered") in ("1", "true"):
            return _answered_page(app, principal)
        mine = query.get("mine") in ("1", "true")
        after = query.get("after") or None
        limit = query_int(app, "limit", PAGE, minimum=1, maximum=200)
        items, found = waiting(store, principal, limit=limit, mine=mine, after=after)
        if not _wants_html(app):
            return json_response({"asks": items, "open": found.open, "next": found.next})
        base = {"mine": "1"} if mine else {}
        next_href = "/app/asks?" + urlencode({**base, "after": found.next}) if found.next else None
        flash = ""
        if query.get("answered") and query.get("decision") in ("approved", "denied"):
            flash = f"You {query['decision']} ask {query['answered'][:80]}."
        body = render_page(
            "asks.html",
            _chrome(app, principal, "asks"),
            title="Asks",
            lede="Every open ask you may answer, the soonest to expire first.",
            asks=items,
            open_count=found.open,
            everyone=found.everyone,
            can_see_all=found.everyone or (mine and sees_every_ask(store, principal)),
            mine=mine,
            first_page=after is None,
            first_href="/app/asks" + ("?mine=1" if mine else ""),
            next_href=next_href,
            notice_text=flash,
            now=now_ms(),
            once=one_use_field,
        )
        return html_response(body)


def _answered_page(app: ClarosResolver, principal: Principal) -> Response[str]:
    """The asks routed to the person that are no longer open, newest first, page by page
    (Home's "Recently answered" links here for the rest)."""
    cursor = _query(app).get("cursor") or None
    limit = query_int(app, "limit", PAGE, minimum=1, maximum=200)
    found = my_asks_page(app.services.store, principal, show="answered", limit=limit,
                         cursor=cursor)  # fmt: skip
    if not _wants_html(app):
        return json_response({"asks": found.asks, "next": found.next})
    next_href = (
        "/app/asks?" + urlencode({"answered": "1", "cursor": found.next}) if found.next else None
    )
    body = render_page(
        "asks_answered.html", _chrome(app, principal, "asks"), title="Answered asks",
        lede="The asks routed to you that are no longer open, the newest first.",
        asks=found.asks, next_href=next_href, first_page=cursor is None,
    )  # fmt: skip
    return html_response(body)


# --- Keys & people ----------------------------------------------------------------------
def _keys_page(
    app: ClarosResolver,
    principal: Principal,
    *,
    status: int = 200,
    made: dict[str, str] | None = None,
    notice_text: str = "",
) -> Response[str]:
    store = app.services.store
    after = _query(app).get("after") or None
    found = list_keys(store, principal, after=after, limit=PAGE)
    next_href = "/app/keys?" + urlencode({"after": found.next}) if found.next else None
    body = render_page(
        "keys.html",
        _chrome(app, principal, "keys"),
        title="Keys & people" if principal.is_admin else "Your keys",
        lede=(
            "Every key of the workspace and who holds it; revoke one and it is refused "
            "from its next request."
            if principal.is_admin
            else "The keys that are yours. You may revoke your agent keys."
        ),
        keys=found.keys,
        next_href=next_href,
        first_page=after is None,
        members=list_members(store, principal.workspace) if principal.is_admin else [],
        made=made,
        notice_text=notice_text,
        now=now_ms(),
        once=one_use_field,
        quote=quote,
    )
    return html_response(body, status)


def _key_pages(app: ClarosResolver) -> None:
    services = app.services

    @page(app, "GET", "/app/keys", PEOPLE, KEYS)
    def keys(principal: Principal) -> Response[str]:
        if not _wants_html(app):
            after = _query(app).get("after") or None
            found = list_keys(services.store, principal, after=after)
            return json_response({"keys": found.keys, "next": found.next})
        query = _query(app)
        text = f"Revoked key {query['revoked'][:16]}." if query.get("revoked") else ""
        also = query.get("also", "")
        if text and also.isdigit() and int(also) > 0:
            text += (
                f" {also} key{'s' if int(also) > 1 else ''} minted from it "
                f"{'were' if int(also) > 1 else 'was'} revoked with it."
            )
        return _keys_page(app, principal, notice_text=text)

    @page(app, "POST", "/app/keys/{key_id}/revoke", PEOPLE, KEYS)
    def revoke(principal: Principal, key_id: str) -> Response[str]:
        form = read_input(app, OnceForm, empty_ok=True)
        with _form_once(app, principal, form.once, "the key was revoked: see Keys & people"):
            done = revoke_key(services, Actor.of(principal), key_id)
        if _wants_html(app):
            also = len(done["also_revoked"])
            return redirect("/app/keys?" + urlencode({"revoked": done["key_id"], "also": also}))
        return json_response(done)


def _member_pages(app: ClarosResolver) -> None:
    services = app.services
    sign_in = (
        "Give it to them alone (never to an agent): it signs them in to the web app, "
        "where they answer asks and make their agent keys."
    )

    @page(app, "POST", "/app/members", ADMINS)
    def add(principal: Principal) -> Response[str]:
        form = read_input(app, MemberForm)
        with _form_once(app, principal, form.once):
            done = add_person(services, Actor.of(principal), form.email.strip())
        made = {"what": "Person key", "who": done["email"], "key": done["key"], "about": sign_in}
        return _keys_page(app, principal, status=201, made=made,
                          notice_text=f"Added {done['email']} as a member.")  # fmt: skip

    @page(app, "POST", "/app/members/{email}/role", ADMINS)
    def role(principal: Principal, email: str) -> Response[str]:
        form = read_input(app, RoleForm)
        with _form_once(app, principal, form.once, "the role was changed: see Keys & people"):
            done = change_role(services, Actor.of(principal), email, form.role)
        text = f"{done['email']} is {'an admin' if form.role == 'admin' else 'a member'} now."
        if "key" in done:
            about = (
                "Their admin key: it opens the admin pages (their person key stays a "
                "member's). Give it to them alone."
            )
            made = {"what": "Admin key", "who": done["email"], "key": done["key"], "about": about}
            return _keys_page(app, principal, status=201, made=made, notice_text=text)
        return _keys_page(app, principal, notice_text=text)

    @page(app, "POST", "/app/members/{email}/remove", ADMINS)
    def remove(principal: Principal, email: str) -> Response[str]:
        form = read_input(app, OnceForm, empty_ok=True)
        with _form_once(app, principal, form.once, "the member was removed"):
            done = remove_member(services, Actor.of(principal), email)
        return _keys_page(app, principal, notice_text=f"Removed {done['email']}.")
