"""Routes of the admin function: rules, asks, overrides, coverage, timeline, settings."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from claros.api.http import ClarosResolver, json_response, once, parse_body, query_int, routed
from claros.ask_answer import AnswerRequest
from claros.asks import answer_ask, my_asks_page
from claros.auth import PERSON_KINDS, Principal
from claros.coverage import coverage
from claros.errors import BadRequestError, ConflictError
from claros.mapping.model import MappingSpec
from claros.mapping.service import close_mapping, get_mapping, list_mappings, put_mapping
from claros.mapping.tools import confirm_tool, remove_app
from claros.overrides import OverrideRequest, record_override
from claros.rules.model import RuleSpec
from claros.rules.service import close_rule, get_rule, list_rules, put_rule
from claros.rules.warnings import rule_warnings
from claros.timeline import timeline
from claros.webhook import get_webhook, set_webhook

__all__ = ["register"]

ADMINS = frozenset({"admin"})
# A person's own credentials (THREATS.md §1): asks and overrides are a person's, never an
# agent's, whose key acts for them.
PEOPLE = PERSON_KINDS
ANSWER = "never answer asks: a person answers with their person key (or an admin key)"
OVERRIDE = (
    "never file overrides: an override is a person's verdict on a check, filed with their "
    "person key (or an admin key)"
)
# What a person's keys may read of theirs: the asks routed to them, their timeline.
READERS = PERSON_KINDS | {"agent"}


class RuleWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    rule: RuleSpec
    made_by: Literal["expert", "override", "precedents", "manual"] = "manual"


class MappingWrite(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    mapping: MappingSpec
    # Saved from this proposal (POST /api/mappings/proposals): the version's confirm
    # record then says made_by: proposed, and which proposer drafted it.
    proposal: str | None = Field(None, max_length=64)


class CloseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    reason: str = Field("", max_length=2000)  # as an ask's or an override's note


def _flag(app: ClarosResolver, name: str) -> bool:
    value = (app.current_event.query_string_parameters or {}).get(name, "")
    if value not in ("", "0", "1", "true", "false"):
        raise BadRequestError(f"query parameter {name} must be 1 or 0")
    return value in ("1", "true")


def register(app: ClarosResolver) -> None:  # noqa: C901 - one small handler per route
    services = app.services
    store = services.store

    @routed(app, "GET", "/api/rules", ADMINS)
    def rules(principal: Principal) -> Any:
        return {"rules": list_rules(store, principal.workspace, versions=_flag(app, "versions"))}

    @routed(app, "POST", "/api/rules", ADMINS)
    def create_rule(principal: Principal) -> Any:
        body = parse_body(app, RuleWrite)
        if store.get_doc(principal.workspace, "rule", body.rule.id) is not None:
            raise ConflictError(f"rule {body.rule.id!r} exists; edit it with PUT")
        state, _ = put_rule(services, principal, body.rule, body.made_by)
        return json_response(_warned(state, body.rule, principal), 201)

    @routed(app, "GET", "/api/rules/{rule_id}", ADMINS)
    def rule(principal: Principal, rule_id: str) -> Any:
        return get_rule(store, principal.workspace, rule_id, versions=True)

    @routed(app, "PUT", "/api/rules/{rule_id}", ADMINS)
    def edit_rule(principal: Principal, rule_id: str) -> Any:
        body = parse_body(app, RuleWrite)
        if body.rule.id != rule_id:
            raise BadRequestError(f"rule.id is {body.rule.id!r} but the path says {rule_id!r}")
        state, changed = put_rule(services, principal, body.rule, body.made_by)
        return _warned({**state, "changed": changed}, body.rule, principal)

    def _warned(state: dict[str, Any], spec: RuleSpec, principal: Principal) -> dict[str, Any]:
        """The saved rule, with a warning for each field it reads that nothing provides."""
        warnings = rule_warnings(store, principal.workspace, spec)
        return {**state, "warnings": warnings} if warnings else state

    @routed(app, "POST", "/api/rules/{rule_id}/close", ADMINS)
    def close(principal: Principal, rule_id: str) -> Any:
        body = parse_body(app, CloseRequest) if app.current_event.body else CloseRequest()
        return close_rule(services, principal, rule_id, body.reason)

    @routed(app, "GET", "/api/mappings", ADMINS)
    def mappings(principal: Principal) -> Any:
        return {"mappings": list_mappings(store, principal.workspace)}

    # Path parameters arrive as keywords; `app` would shadow the resolver, hence **path.
    @routed(app, "GET", "/api/mappings/{app}/{tool}", ADMINS)
    def mapping(principal: Principal, **path: str) -> Any:
        return get_mapping(store, principal.workspace, path["app"], path["tool"])

    @routed(app, "PUT", "/api/mappings/{app}/{tool}", ADMINS)
    def put(principal: Principal, **path: str) -> Any:
        app_name, tool = path["app"], path["tool"]
        body = parse_body(app, MappingWrite)
        if (body.mapping.app, body.mapping.tool) != (app_name, tool):
            raise BadRequestError(
                f"mapping is for {body.mapping.app} {body.mapping.tool} but the path says "
                f"{app_name} {tool}"
            )
        confirm = None
        if body.proposal is not None:
            # A proposal's module (the mapper, Bedrock, the proposer) is for the routes
            # that use one: a mapping written without a proposal does not import it.
            from claros.mapping.proposals import confirm_of

            confirm = confirm_of(store, principal, body.proposal, app_name, tool)
        state, changed = put_mapping(services, principal, body.mapping, confirm)
        return {**state, "changed": changed}

    @routed(app, "POST", "/api/mappings/{app}/{tool}/close", ADMINS)
    def close_map(principal: Principal, **path: str) -> Any:
        body = parse_body(app, CloseRequest) if app.current_event.body else CloseRequest()
        return close_mapping(services, principal, path["app"], path["tool"], body.reason)

    @routed(app, "POST", "/api/apps/{app}/tools/{tool}/confirm", ADMINS)
    def confirm(principal: Principal, **path: str) -> Any:
        return confirm_tool(services, principal, path["app"], path["tool"])

    @routed(app, "DELETE", "/api/apps/{app}", ADMINS)
    def remove(principal: Principal, **path: str) -> Any:
        return remove_app(services, principal, path["app"])

    @routed(app, "GET", "/api/asks", READERS)
    def asks(principal: Principal) -> Any:
        # The asks routed to the caller (?mine=1, the only view a person has), newest
        # first: open ones unless ?all=1 (every one) or ?answered=1 (no longer open), a
        # page at a time (?cursor= the previous page's next).
        _flag(app, "mine")
        everything, answered = _flag(app, "all"), _flag(app, "answered")
        if everything and answered:
            raise BadRequestError("give all=1 or answered=1, not both")
        show = "all" if everything else "answered" if answered else "open"
        limit = query_int(app, "limit", 50, minimum=1, maximum=200)
        cursor = (app.current_event.query_string_parameters or {}).get("cursor") or None
        found = my_asks_page(store, principal, show=show, limit=limit, cursor=cursor)
        return {"asks": found.asks, "next": found.next}

    @routed(app, "POST", "/api/asks/{ask_id}/answer", PEOPLE, refusal=ANSWER)
    def answer(principal: Principal, ask_id: str) -> Any:
        return answer_ask(services, principal, ask_id, parse_body(app, AnswerRequest))

    @routed(app, "POST", "/api/checks/{check_id}/override", PEOPLE, refusal=OVERRIDE)
    def override(principal: Principal, check_id: str) -> Any:
        def run() -> tuple[int, Any]:
            body = parse_body(app, OverrideRequest)
            return 201, record_override(services, principal, check_id, body)

        return once(app, principal, f"POST /api/checks/{check_id}/override", run)

    @routed(app, "GET", "/api/coverage", ADMINS)
    def agent_coverage(principal: Principal) -> Any:
        days = query_int(app, "days", 30, minimum=1, maximum=3660)
        return coverage(store, principal.workspace, days=days)

    @routed(app, "GET", "/api/me/timeline", READERS)
    def my_timeline(principal: Principal) -> Any:
        limit = query_int(app, "limit", 50, minimum=1, maximum=500)
        before = (app.current_event.query_string_parameters or {}).get("before") or None
        return timeline(store, principal, limit=limit, before=before)

    @routed(app, "GET", "/api/settings/ask-webhook", ADMINS)
    def webhook(principal: Principal) -> Any:
        hook = get_webhook(store, principal.workspace)
        return {"url": hook["url"] if hook else None, "configured": bool(hook)}

    @routed(app, "PUT", "/api/settings/ask-webhook", ADMINS)
    def put_webhook(principal: Principal) -> Any:
        # Here: its HttpUrl imports pydantic.networks and importlib.metadata (the module).
        from claros.webhook_settings import WebhookSettings

        hook = parse_body(app, WebhookSettings)
        set_webhook(store, principal.workspace, hook)
        return {"url": str(hook.url), "configured": True}

    @routed(app, "DELETE", "/api/settings/ask-webhook", ADMINS)
    def delete_webhook(principal: Principal) -> Any:
        set_webhook(store, principal.workspace, None)
        return {"url": None, "configured": False}
