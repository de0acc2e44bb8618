"""``POST /api/mappings/proposals {app, tool}``: a proposed mapping's draft for a write tool
(admins; docs/rules.md, "Proposed mappings"), in the admin function. The web app's pages of
proposals are ``claros.api.proposals``'s (the web function)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claros.api.http import ClarosResolver, json_response, parse_body, routed
from claros.auth import Principal
from claros.names import NAME

__all__ = ["register"]

ADMINS = frozenset({"admin"})


class ProposalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    app: str = Field(pattern=NAME)
    tool: str = Field(pattern=NAME)


def register(app: ClarosResolver) -> None:
    services = app.services

    @routed(app, "POST", "/api/mappings/proposals", ADMINS)
    def create(principal: Principal) -> Any:
        # The mapper, its Bedrock client, the proposer (15 ms): this route's requests only.
        from claros.mapping.proposals import propose

        body = parse_body(app, ProposalRequest)
        return json_response(propose(services, principal, body.app, body.tool), 201)
