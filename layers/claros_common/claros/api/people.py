"""JSON routes of Keys & people, for scripts (the admin function): ``/api/keys`` and
``/api/members`` (docs/api.md). The web app's pages of the same (``claros.api.web_people``,
the web function) import this module's names; the decisions are ``claros.people``'s."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from claros.api.http import ClarosResolver, json_response, parse_body, query_int, routed
from claros.auth import PERSON_KINDS, Principal
from claros.errors import BadRequestError
from claros.people import (
    Actor,
    add_person,
    change_role,
    list_keys,
    list_members,
    remove_member,
    revoke_key,
)

__all__ = ["KEYS", "PAGE", "register"]

ADMINS = frozenset({"admin"})
PEOPLE = PERSON_KINDS
KEYS = (
    "never list or revoke keys: a person does, with their person key (or an admin with the "
    "admin key)"
)
PAGE = 50


class MemberAdd(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    email: str = Field(max_length=254)


class RoleChange(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    role: Literal["admin", "member"]


def register(app: ClarosResolver) -> None:
    services = app.services
    store = services.store

    @routed(app, "GET", "/api/keys", PEOPLE, refusal=KEYS)
    def keys(principal: Principal) -> Any:
        limit = query_int(app, "limit", PAGE, minimum=1, maximum=200)
        after = (app.current_event.query_string_parameters or {}).get("after") or None
        found = list_keys(store, principal, after=after, limit=limit)
        return {"keys": found.keys, "next": found.next}

    @routed(app, "POST", "/api/keys/{key_id}/revoke", PEOPLE, refusal=KEYS)
    def revoke(principal: Principal, key_id: str) -> Any:
        return revoke_key(services, Actor.of(principal), key_id)

    @routed(app, "GET", "/api/members", ADMINS)
    def members(principal: Principal) -> Any:
        return {"members": list_members(store, principal.workspace)}

    @routed(app, "POST", "/api/members", ADMINS)
    def add(principal: Principal) -> Any:
        body = parse_body(app, MemberAdd)
        done = add_person(services, Actor.of(principal), body.email)
        return json_response(done, 201, headers={"Cache-Control": "no-store"})

    @routed(app, "PUT", "/api/members/{email}", ADMINS)
    def role(principal: Principal, email: str) -> Any:
        body = parse_body(app, RoleChange)
        done = change_role(services, Actor.of(principal), email, body.role)
        return json_response(done, headers={"Cache-Control": "no-store"})

    @routed(app, "DELETE", "/api/members/{email}", ADMINS)
    def remove(principal: Principal, email: str) -> Any:
        if len(email) > 300:
            raise BadRequestError("not an email address")
        return remove_member(services, Actor.of(principal), email)
