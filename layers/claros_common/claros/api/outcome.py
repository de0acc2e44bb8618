"""Routes of the outcome function: what happened after a check."""

from __future__ import annotations

from typing import Any

from claros.api.http import ClarosResolver, once, parse_body, routed
from claros.auth import GUARD_KINDS as GUARDS
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
        def run() -> tuple[int, Any]:
            body = parse_body(app, OutcomeRequest)
            return 201, record_outcome(services, principal, check_id, body)

        return once(app, principal, f"POST /v1/check/{check_id}/outcome", run)

    @routed(app, "POST", "/v1/outcomes", GUARDS)
    def outcome_by_call(principal: Principal) -> Any:
        def run() -> tuple[int, Any]:
            return 201, record_outcome_by_call(services, principal, parse_body(app, OutcomeByCall))

        return once(app, principal, "POST /v1/outcomes", run)

    @routed(app, "POST", "/v1/unchecked", GUARDS)
    def unchecked(principal: Principal) -> Any:
        def run() -> tuple[int, Any]:
            return 201, record_unchecked(services, principal, parse_body(app, UncheckedRequest))

        return once(app, principal, "POST /v1/unchecked", run)
