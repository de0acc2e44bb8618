"""Activity and one page per check (``/app/activity``, ``/app/checks/{check_id}``), with
the check page's forms (file an override, answer the ask): the pages that show
``GET /api/checks`` and ``GET /api/checks/{check_id}`` (``claros.api.checks``, the admin
function's).

The pages ask the JSON routes in-process as the signed-in person (``call_route``), so the
page and the API always show the same data under the same rules of who sees what.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlencode

from aws_lambda_powertools.event_handler.api_gateway import Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from claros import jsonutil
from claros.activity import (
    COUNT_LIMIT,
    OUTCOMES,
    RESULTS,
)
from claros.api.http import ClarosResolver, json_response
from claros.api.web import (
    PEOPLE,
    _chrome,
    _form_once,
    _wants_html,
    call_route,
    html_response,
    page,
    read_input,
    redirect,
)
from claros.ask_answer import AnswerRequest
from claros.asks import answer_ask
from claros.auth import Principal
from claros.check_view import check_detail
from claros.errors import (
    BadRequestError,
    ClarosError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    UnavailableError,
)
from claros.overrides import OverrideRequest, record_override
from claros.rules.service import list_rules
from claros.web import pages
from claros.web.templating import render_page

__all__ = ["register"]

OVERRIDE = (
    "never file overrides: an override is a person's verdict on a check, filed with their "
    "person key (or an admin key)"
)
ANSWER = "never answer asks: a person answers with their person key (or an admin key)"
VERDICTS = ("wrong_stop", "right_stop", "missed")


class OverrideForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    verdict: Literal["wrong_stop", "right_stop", "missed"]
    note: str | None = Field(None, max_length=2000)
    rule_id: str | None = Field(None, max_length=64)
    once: str = Field("", max_length=64)

    @field_validator("note", "rule_id")
    @classmethod
    def _blank(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


class CheckAnswerForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    decision: Literal["approve", "deny"]
    note: str | None = Field(None, max_length=2000)
    once: str = Field("", max_length=64)

    @field_validator("note")
    @classmethod
    def _blank(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None


_FLASH = {
    "override": "Your override was filed; it is in the ledger.",
    "approved": "You approved the ask.",
    "denied": "You denied the ask.",
}


def _query(app: ClarosResolver) -> dict[str, str]:
    return dict(app.current_event.query_string_parameters or {})


def _relayed(route: str, status: int | None, body: Any) -> ClarosError:
    message = body.get("message") if isinstance(body, dict) else None
    text = str(message or f"{route} answered {status}")
    errors: dict[int, type[ClarosError]] = {
        400: BadRequestError, 403: ForbiddenError, 404: NotFoundError, 409: ConflictError,
    }  # fmt: skip
    return errors.get(int(status or 503), UnavailableError)(text)


FILTERS = ("app", "tool", "agent", "person", "result", "rule", "outcome", "since", "until", "q")


def register(app: ClarosResolver) -> None:
    _page_routes(app)
    _form_routes(app)


def _activity_page(app: ClarosResolver, principal: Principal) -> Response[str]:
    params = {k: v for k, v in _query(app).items() if v != ""}
    done = call_route(app, principal, "GET", "/api/checks", query=params)
    error = ""
    body: dict[str, Any] = {}
    if done.status == 200 and isinstance(done.body, dict):
        body = done.body
    elif done.status in (400, 403):
        # A bad filter: the form back, as the person filled it, with the reason.
        error = str(_relayed(done.route, done.status, done.body))
    else:
        raise _relayed(done.route, done.status, done.body)
    kept = {k: v for k, v in params.items() if k != "cursor"}
    next_href = None
    if body.get("next"):
        next_href = "/app/activity?" + urlencode({**kept, "cursor": body["next"]})
    lede = (
        "Every check of the workspace, newest first."
        if principal.is_admin
        else "Your checks and your agents', newest first."
    )
    html = render_page(
        "activity.html", _chrome(app, principal, "activity"), title="Activity", lede=lede,
        data=body, error=error, filters={k: params.get(k, "") for k in FILTERS},
        results=RESULTS, outcomes=OUTCOMES, count_limit=COUNT_LIMIT, next_href=next_href,
        paged="cursor" in params, first_href="/app/activity?" + urlencode(kept),
        result_href=lambda r: "/app/activity?" + urlencode({**kept, "result": r}),
    )  # fmt: skip
    return html_response(html, int(done.status or 400) if error else 200)


def _check_page(
    app: ClarosResolver,
    principal: Principal,
    check_id: str,
    *,
    notice: str = "",
    status: int = 200,
) -> Response[str]:
    # The same domain call as GET /api/checks/{check_id}, as JSON sees it (call_route
    # serves routes without path parameters).
    detail = jsonutil.loads(jsonutil.dumps(check_detail(app.services.store, principal, check_id)))
    rule_ids = {str(r["id"]) for r in detail["rules"]}
    if principal.is_admin:
        rule_ids |= {str(r["id"]) for r in list_rules(app.services.store, principal.workspace)}
    flash = _FLASH.get(_query(app).get("done", ""), "")
    html = render_page(
        "check.html", _chrome(app, principal, "activity"),
        title=f"{detail['call']['app']} · {detail['call']['tool']}",
        d=detail, notice=notice or flash, tone="danger" if notice else "ok",
        verdicts=VERDICTS, rule_ids=sorted(rule_ids), once=pages.one_use_field,
    )  # fmt: skip
    return html_response(html, status)


def _page_routes(app: ClarosResolver) -> None:
    @page(app, "GET", "/app/activity", PEOPLE)
    def activity(principal: Principal) -> Response[str]:
        return _activity_page(app, principal)

    @page(app, "GET", "/app/checks/{check_id}", PEOPLE)
    def check_page(principal: Principal, check_id: str) -> Response[str]:
        return _check_page(app, principal, check_id)


def _form_routes(app: ClarosResolver) -> None:
    services = app.services
    store = services.store

    @page(app, "POST", "/app/checks/{check_id}/override", PEOPLE, OVERRIDE)
    def override(principal: Principal, check_id: str) -> Response[str]:
        form = read_input(app, OverrideForm)
        # Only a check the person may see may get their verdict (404 otherwise, as GET).
        check_detail(store, principal, check_id)
        try:
            if form.verdict == "missed" and not form.rule_id:
                raise BadRequestError("A missed report names the rule that should have fired.")
            with _form_once(app, principal, form.once, "the override was filed: see below"):
                done = record_override(
                    services, principal, check_id,
                    OverrideRequest(verdict=form.verdict, note=form.note, rule_id=form.rule_id),
                )  # fmt: skip
        except (BadRequestError, ConflictError, ForbiddenError) as exc:
            if not _wants_html(app):
                raise
            return _check_page(app, principal, check_id, notice=exc.message, status=exc.status)
        if _wants_html(app):
            return redirect(f"/app/checks/{check_id}?done=override#overrides")
        return json_response(done, 201)

    @page(app, "POST", "/app/checks/{check_id}/answer", PEOPLE, ANSWER)
    def answer(principal: Principal, check_id: str) -> Response[str]:
        form = read_input(app, CheckAnswerForm)
        detail = check_detail(store, principal, check_id)
        if not detail["ask"]:
            raise NotFoundError(f"check {check_id} has no ask")
        ask_id = str(detail["ask"]["ask_id"])
        try:
            with _form_once(app, principal, form.once, "the ask was answered: see below"):
                result = answer_ask(
                    services, principal, ask_id,
                    AnswerRequest(decision=form.decision, note=form.note),
                )  # fmt: skip
        except (BadRequestError, ConflictError, ForbiddenError) as exc:
            if not _wants_html(app):
                raise
            return _check_page(app, principal, check_id, notice=exc.message, status=exc.status)
        if _wants_html(app):
            return redirect(f"/app/checks/{check_id}?done={result['status']}#ask")
        return json_response(result)
