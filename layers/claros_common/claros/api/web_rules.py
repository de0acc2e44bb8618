"""The Rules page and its forms: edit or close a rule, edit or close a mapping.

Every form goes through the same domain code as the API (``put_rule`` / ``close_rule``,
``put_mapping`` / ``close_mapping``), as the signed-in admin: a rule edited here is a new
version made ``manual`` and confirmed by them. Forms carry the session's CSRF token (checked
by ``page``) and a one-use token, so a reload saves nothing twice. Bad input (text that is
not YAML or JSON, a field the rule does not have, an unknown rule) gives the page back with
the text as typed and one plain sentence next to the form, never a stack of validation
messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlencode

from aws_lambda_powertools.event_handler.api_gateway import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from claros.api.http import ClarosResolver, json_response
from claros.api.web import (
    ADMINS,
    _chrome,
    _form_once,
    _wants_html,
    html_response,
    page,
    read_input,
    redirect,
)
from claros.auth import Principal
from claros.errors import BadRequestError, ClarosError, ConflictError, NotFoundError
from claros.mapping.model import MappingSpec
from claros.mapping.service import (
    close_mapping,
    get_mapping,
    list_apps,
    list_mappings,
    mapping_versions,
    put_mapping,
)
from claros.rules.model import RuleSpec
from claros.rules.service import close_rule, get_rule, list_rules, put_rule
from claros.rules.warnings import saved_rule_warnings
from claros.web import pages
from claros.web.html import NOTHING, Safe, render
from claros.web.plain import plain_problem
from claros.yaml_keys import KeyTwice, unique_key_loader

__all__ = ["register", "rules_page_for"]

MAX_TEXT = 50_000  # characters of YAML or JSON in an edit form


class EditForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    WORDS: ClassVar[dict[str, str]] = {
        "text": f"The text is too long: at most {MAX_TEXT:,} characters.",
        "once": "This form is out of date: reload the page and send it again.",
    }

    text: str = Field(max_length=MAX_TEXT)
    once: str = Field("", max_length=64)


class CloseForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    WORDS: ClassVar[dict[str, str]] = {
        "reason": "The reason is too long: at most 2,000 characters.",
        "once": "This form is out of date: reload the page and send it again.",
    }

    reason: str = Field("", max_length=2000)
    once: str = Field("", max_length=64)


@dataclass(frozen=True)
class Failed:
    """A form sent back: which (``rule:<id>``, ``mapping:<app>/<tool>``, with ``:close`` for
    the close form), what was typed, and why it was refused."""

    target: str
    text: str
    message: str


def _dump(value: Mapping[str, Any]) -> str:
    """A rule or mapping as the YAML an admin edits (keys in the order written)."""
    import yaml  # the rules editor's pages only: no other route (or function) needs it

    return yaml.safe_dump(dict(value), sort_keys=False, allow_unicode=True, width=88)


def _parse(text: str, what: str) -> dict[str, Any]:
    """The typed text as an object: YAML, of which JSON is a part."""
    if not text.strip():
        raise BadRequestError(f"The {what} is empty: type it as YAML or JSON.")
    import yaml

    try:
        value = yaml.load(text, Loader=unique_key_loader())  # noqa: S506 - a SafeLoader
    except KeyTwice as exc:
        raise BadRequestError(
            f"The {what} says {exc.key!r} twice{exc.where}: YAML keeps the last one without "
            "a word, so what you read may not be what is saved. Say each field once."
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" near line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "it cannot be read"
        raise BadRequestError(f"The {what} is not valid YAML or JSON{at}: {problem}.") from None
    if not isinstance(value, dict):
        raise BadRequestError(
            f"The {what} must be a set of fields (id: …, title: …), not a single value or a list."
        )
    return value


def _form(app: ClarosResolver, model: type[EditForm] | type[CloseForm]) -> Any:
    # read_input speaks the form's WORDS when a field is wrong.
    return read_input(app, model, empty_ok=True)


def rules_page_for(
    app: ClarosResolver,
    principal: Principal,
    *,
    flash: Safe = NOTHING,
    failed: Failed | None = None,
) -> str:
    store, workspace = app.services.store, principal.workspace
    found = list_rules(store, workspace, versions=True)
    mappings = []
    for mapping in list_mappings(store, workspace):
        versions = mapping_versions(store, workspace, str(mapping["app"]), str(mapping["tool"]))
        mappings.append({**mapping, "versions": versions})
    if failed is not None and failed.target not in _forms(found, mappings):
        # That form is not on the page (the rule was closed meanwhile): say it on top.
        flash, failed = pages.notice(failed.message, "danger"), None
    return pages.rules_page(
        _chrome(app, principal, "rules"), found, mappings, list_apps(store, workspace),
        saved_rule_warnings(store, workspace, found), flash=flash, failed=failed, dump=_dump,
    )  # fmt: skip


def _forms(rules: list[dict[str, Any]], mappings: list[dict[str, Any]]) -> set[str]:
    """The forms the page shows (``Failed.target`` names): every rule and mapping has an
    edit form, and a close form while it is not closed (templates/rules.html)."""
    out: set[str] = set()
    for rule in rules:
        out.add(f"rule:{rule['id']}")
        if rule.get("status") == "active":
            out.add(f"rule:{rule['id']}:close")
    for mapping in mappings:
        target = f"mapping:{mapping['app']}/{mapping['tool']}"
        out.add(target)
        if mapping.get("status") != "closed":
            out.add(f"{target}:close")
    return out


_DONE = {
    "rule_saved": ("Saved rule {what} as a new version.", "rule-{what}"),
    "rule_unchanged": ("Rule {what} is already this text: no new version.", "rule-{what}"),
    "rule_closed": ("Closed rule {what}: it no longer applies to checks.", "rule-{what}"),
    "mapping_saved": ("Saved the mapping for {what} as a new version.", "mappings"),
    "mapping_unchanged": ("The mapping for {what} is already this text.", "mappings"),
    "mapping_closed": (
        "Closed the mapping for {what}: its tool is checked on the call's arguments alone.",
        "mappings",
    ),
}


def _flash(query: Mapping[str, str]) -> Safe:
    if query.get("confirmed"):
        return pages.notice(
            render("Confirmed: <code>{t}</code> is a read.", t=query["confirmed"][:300]), "ok"
        )
    if query.get("removed"):
        return pages.notice(
            render("Removed: <code>{t}</code> and its tools.", t=query["removed"][:300]), "ok"
        )
    if query.get("saved"):  # a proposed mapping accepted (claros.api.proposals)
        return pages.notice(
            render("Mapping saved: <code>{t}</code>.", t=query["saved"][:300]), "ok"
        )
    done = _DONE.get(query.get("done", ""))
    if done is None:
        return NOTHING
    return pages.notice(done[0].format(what=query.get("what", "")[:300]), "ok")


def _done(kind: str, what: str, anchor: str) -> Response[str]:
    return redirect(f"/app/rules?{urlencode({'done': kind, 'what': what})}#{anchor}")


def _rule_spec(text: str, rule_id: str) -> RuleSpec:
    value = _parse(text, "rule")
    value.setdefault("id", rule_id)
    if value["id"] != rule_id:
        raise BadRequestError(
            f"The rule's id is {value['id']!r}, but this form edits {rule_id!r}: a rule keeps "
            "its id (push a new rule to start another)."
        )
    try:
        return RuleSpec.model_validate(value)
    except ValidationError as exc:
        raise BadRequestError(plain_problem(exc)) from None


def _mapping_spec(text: str, app: str, tool: str) -> MappingSpec:
    value = _parse(text, "mapping")
    value.setdefault("app", app)
    value.setdefault("tool", tool)
    if (value["app"], value["tool"]) != (app, tool):
        raise BadRequestError(
            f"The mapping is for {value['app']} {value['tool']}, but this form edits {app} {tool}."
        )
    try:
        return MappingSpec.model_validate(value)
    except ValidationError as exc:
        raise BadRequestError(plain_problem(exc)) from None


def _refused(
    app: ClarosResolver, principal: Principal, exc: ClarosError, target: str, text: str
) -> Response[str]:
    """The page again, the form as it was sent, the reason next to it (JSON clients get
    the error as the API gives it)."""
    if not _wants_html(app):
        raise exc
    message = exc.message[:1].upper() + exc.message[1:]
    message += "" if message.endswith(".") else "."
    if isinstance(exc, NotFoundError | ConflictError):
        # No such rule or mapping, or it changed meanwhile (closed already, the form sent
        # twice): the form may be gone from the page, so the reason goes on top.
        flash = pages.notice(message, "danger")
        return html_response(rules_page_for(app, principal, flash=flash), exc.status)
    body = rules_page_for(app, principal, failed=Failed(target, text, message))
    return html_response(body, exc.status)


def register(app: ClarosResolver) -> None:
    @page(app, "GET", "/app/rules", ADMINS)
    def rules(principal: Principal) -> Response[str]:
        query = app.current_event.query_string_parameters or {}
        return html_response(rules_page_for(app, principal, flash=_flash(query)))

    _rule_routes(app)
    _mapping_routes(app)


def _rule_routes(app: ClarosResolver) -> None:
    services = app.services

    @page(app, "POST", "/app/rules/{rule_id}/edit", ADMINS)
    def edit_rule(principal: Principal, rule_id: str) -> Response[str]:
        text = ""
        try:
            form = _form(app, EditForm)
            text = form.text
            get_rule(services.store, principal.workspace, rule_id)  # 404 for an unknown rule
            spec = _rule_spec(text, rule_id)
            with _form_once(app, principal, form.once, "the rule was saved: see the Rules page"):
                state, changed = put_rule(services, principal, spec, "manual")
        except ClarosError as exc:
            return _refused(app, principal, exc, f"rule:{rule_id}", text)
        if not _wants_html(app):
            return json_response({**state, "changed": changed})
        return _done("rule_saved" if changed else "rule_unchanged", rule_id, f"rule-{rule_id}")

    @page(app, "POST", "/app/rules/{rule_id}/close", ADMINS)
    def close(principal: Principal, rule_id: str) -> Response[str]:
        reason = ""
        try:
            form = _form(app, CloseForm)
            reason = form.reason
            with _form_once(app, principal, form.once, "the rule was closed: see the Rules page"):
                state = close_rule(services, principal, rule_id, form.reason.strip())
        except ClarosError as exc:
            return _refused(app, principal, exc, f"rule:{rule_id}:close", reason)
        if not _wants_html(app):
            return json_response(state)
        return _done("rule_closed", rule_id, f"rule-{rule_id}")


def _mapping_routes(app: ClarosResolver) -> None:
    services = app.services

    # Path parameters arrive as keywords; `app` would shadow the resolver, hence **path.
    @page(app, "POST", "/app/mappings/{app}/{tool}/edit", ADMINS)
    def edit_mapping(principal: Principal, **path: str) -> Response[str]:
        app_name, tool = path["app"], path["tool"]
        text = ""
        try:
            form = _form(app, EditForm)
            text = form.text
            get_mapping(services.store, principal.workspace, app_name, tool)
            spec = _mapping_spec(text, app_name, tool)
            with _form_once(app, principal, form.once, "the mapping was saved: see the Rules page"):
                state, changed = put_mapping(services, principal, spec)
        except ClarosError as exc:
            return _refused(app, principal, exc, f"mapping:{app_name}/{tool}", text)
        if not _wants_html(app):
            return json_response({**state, "changed": changed})
        kind = "mapping_saved" if changed else "mapping_unchanged"
        return _done(kind, f"{app_name} {tool}", "mappings")

    @page(app, "POST", "/app/mappings/{app}/{tool}/close", ADMINS)
    def close_map(principal: Principal, **path: str) -> Response[str]:
        app_name, tool = path["app"], path["tool"]
        reason = ""
        try:
            form = _form(app, CloseForm)
            reason = form.reason
            closed = "the mapping was closed: see the Rules page"
            with _form_once(app, principal, form.once, closed):
                state = close_mapping(services, principal, app_name, tool, form.reason.strip())
        except ClarosError as exc:
            return _refused(app, principal, exc, f"mapping:{app_name}/{tool}:close", reason)
        if not _wants_html(app):
            return json_response(state)
        return _done("mapping_closed", f"{app_name} {tool}", "mappings")
