"""Routes of the prune function: retention and pruning. In AWS it runs under the one role
(<stack>-<region>-prune, named in template.yaml) that the ledger table lets delete entries."""

from __future__ import annotations

from typing import Any

from claros.api.http import ClarosResolver, parse_body, routed
from claros.auth import Principal
from claros.evidence.retention import get_retention, prune, set_retention

__all__ = ["register"]

ADMINS = frozenset({"admin"})


def register(app: ClarosResolver) -> None:
    services = app.services
    store = services.store

    @routed(app, "GET", "/api/evidence/retention", ADMINS)
    def retention(principal: Principal) -> Any:
        return get_retention(store, principal.workspace)

    @routed(app, "PUT", "/api/evidence/retention", ADMINS)
    def put_retention(principal: Principal) -> Any:
        # The function's only body, and its only pydantic: imported here, so a cold start
        # that reads the retention or prunes does not pay for it (this route's first call
        # does, as the function's start did before).
        from claros.evidence.retention_request import RetentionRequest

        body = parse_body(app, RetentionRequest)
        return set_retention(store, principal, body.days)

    @routed(app, "POST", "/api/evidence/prune", ADMINS)
    def prune_now(principal: Principal) -> Any:
        return prune(services, principal.workspace)
