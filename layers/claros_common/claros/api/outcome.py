"""Routes of the outcome function: what happened after a check."""

from __future__ import annotations

from typing import Any

from claros.api.check import GUARDS
from claros.api.http import ClarosResolver, json_response, parse_body, routed
from claros.auth import Principal
from claros.outcomes import (
    OutcomeByCall,
    OutcomeRequest,
    UncheckedRequest,
    record_outcome,
    record_outcome_by_call,
    record_unchecked,
)

__all__ = ["register"]


def register(app: ClarosResolver) -> None:
    services = app.services

    @routed(app, "POST", "/v1/check/{check_id}/outcome", GUARDS)
    def outcome(principal: Principal, check_id: str) -> Any:
        body = parse_body(app, OutcomeRequest)
        return json_response(record_outcome(services, principal, check_id, body), 201)

    @routed(app, "POST", "/v1/outcomes", GUARDS)
    def outcome_by_call(principal: Principal) -> Any:
        body = parse_body(app, OutcomeByCall)
        return json_response(record_outcome_by_call(services, principal, body), 201)

    @routed(app, "POST", "/v1/unchecked", GUARDS)
    def unchecked(principal: Principal) -> Any:
        body = parse_body(app, UncheckedRequest)
        return json_response(record_unchecked(services, principal, body), 201)
