"""Pages of proposed mappings (docs/rules.md, "Proposed mappings"), in the web function.

- ``POST /api/mappings/proposals {app, tool}``: a draft for a write tool (admins), is
  ``claros.api.proposals_api``'s (the admin function).
- ``POST /app/mappings/propose`` (the Rules page's "Propose" button): the proposal page.
- ``POST /app/mappings/proposals/{proposal_id}/accept``: the (edited) draft saved as a
  mapping version whose confirm record says it was proposed.
"""

from __future__ import annotations

from typing import Any
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
from claros.errors import BadRequestError
from claros.mapping.model import MappingSpec
from claros.mapping.service import put_mapping
from claros.names import NAME
from claros.web.templating import render_page

__all__ = ["register"]


class ProposeForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    app: str = Field(pattern=NAME)
    tool: str = Field(pattern=NAME)


class AcceptForm(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    mapping: str = Field(min_length=1, max_length=100_000)  # YAML or JSON, as edited
    once: str = Field("", max_length=64)


def draft_yaml(mapping: dict[str, Any]) -> str:
    """The draft as the file an admin would push (``claros mappings push``)."""
    import yaml  # the proposal pages only: the admin function's other routes do without it

    return yaml.safe_dump(mapping, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _edited(text: str, app: str, tool: str) -> MappingSpec:
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadRequestError(f"the mapping is not YAML or JSON: {exc}") from None
    if isinstance(value, dict) and isinstance(value.get("mappings"), list):
        value = value["mappings"][0] if len(value["mappings"]) == 1 else value
    if not isinstance(value, dict):
        raise BadRequestError("the mapping must be one object (app, tool, fetch, ...)")
    try:
        spec = MappingSpec.model_validate(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in first["loc"]) or "mapping"
        raise BadRequestError(f"mapping.{where}: {first['msg']}") from None
    if (spec.app, spec.tool) != (app, tool):
        raise BadRequestError(f"the mapping is for {spec.app} {spec.tool}, not {app} {tool}")
    return spec


def register(app: ClarosResolver) -> None:
    services = app.services
    store = services.store
    # claros.mapping.proposals (the mapper, its Bedrock client, the proposer: 15 ms) is
    # imported by these routes' requests, not by the web function's every cold start.

    @page(app, "POST", "/app/mappings/propose", ADMINS)
    def propose_page(principal: Principal) -> Response[str]:
        from claros.mapping.proposals import propose

        form = read_input(app, ProposeForm)
        proposal = propose(services, principal, form.app, form.tool)
        if not _wants_html(app):
            return json_response(proposal, 201)
        return html_response(_page(app, principal, proposal, draft_yaml(proposal["mapping"])))

    @page(app, "POST", "/app/mappings/proposals/{proposal_id}/accept", ADMINS)
    def accept(principal: Principal, proposal_id: str) -> Response[str]:
        from claros.mapping.proposals import confirm_of, get_proposal

        proposal = get_proposal(store, principal.workspace, proposal_id)
        form = read_input(app, AcceptForm)
        try:
            spec = _edited(form.mapping, proposal["app"], proposal["tool"])
        except BadRequestError as exc:
            if not _wants_html(app):
                raise
            page_ = _page(app, principal, proposal, form.mapping, error=exc.message)
            return html_response(page_, 400)
        with _form_once(app, principal, form.once, "the mapping was saved: see the Rules page"):
            confirm = confirm_of(store, principal, proposal_id, spec.app, spec.tool)
            state, changed = put_mapping(services, principal, spec, confirm)
        if _wants_html(app):
            query = urlencode({"saved": f"{spec.app} {spec.tool} v{state['version']}"})
            return redirect(f"/app/rules?{query}#mappings")
        return json_response({**state, "changed": changed})


def _page(
    app: ClarosResolver,
    principal: Principal,
    proposal: dict[str, Any],
    text: str,
    *,
    error: str = "",
) -> str:
    from claros.web.pages import one_use_field

    return render_page(
        "proposal.html",
        _chrome(app, principal, "rules"),
        title="Proposed mapping",
        lede=f"A draft of which facts {proposal['app']} · {proposal['tool']} needs and where "
        "the guard reads them. Edit it, then save it: the version records that it was "
        "proposed, by which proposer, and that you confirmed it.",
        proposal=proposal,
        text=text,
        error=error,
        once=one_use_field(),
    )
