"""Routes of the outcome function: what happened after a check."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claros.api.http import (
    OUTCOME_ANSWERS,
    ClarosResolver,
    once,
    once_in_append,
    parse_body,
    routed,
)
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

if TYPE_CHECKING:
    from claros.api.idempotency import KeyedAnswer

__all__ = ["register"]


def register(app: ClarosResolver) -> None:
    services = app.services

    @routed(app, "POST", "/v1/check/{check_id}/outcome", GUARDS)
    def outcome(principal: Principal, check_id: str) -> Any:
        # One outcome per check, refused twice by the store itself: the Idempotency-Key's
        # record rides the outcome's own append (one transaction, not three).
        def run(keyed: KeyedAnswer | None) -> tuple[int, Any]:
            body = parse_body(app, OutcomeRequest)
            return 201, record_outcome(services, principal, check_id, body, keyed)

        route = f"POST /v1/check/{check_id}/outcome"
        return once_in_append(app, principal, route, run, OUTCOME_ANSWERS)

    @routed(app, "POST", "/v1/outcomes", GUARDS)
    def outcome_by_call(principal: Principal) -> Any:
        def run(keyed: KeyedAnswer | None) -> tuple[int, Any]:
            req = parse_body(app, OutcomeByCall)
            return 201, record_outcome_by_call(services, principal, req, keyed)

        return once_in_append(app, principal, "POST /v1/outcomes", run, OUTCOME_ANSWERS)

    @routed(app, "POST", "/v1/unchecked", GUARDS)
    def unchecked(principal: Principal) -> Any:
        def run() -> tuple[int, Any]:
            return 201, record_unchecked(services, principal, parse_body(app, UncheckedRequest))

        return once(app, principal, "POST /v1/unchecked", run, OUTCOME_ANSWERS)
