"""Routes of the prune function: retention and pruning. In AWS it runs under the one role
(<stack>-<region>-prune, named in template.yaml) that the ledger table lets delete entries."""

from __future__ import annotations

from typing import Any

from claros.api.http import ClarosResolver, parse_body, routed
from claros.auth import Principal
from claros.evidence.retention import RetentionRequest, get_retention, prune, set_retention

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
        body = parse_body(app, RetentionRequest)
        return set_retention(store, principal, body.days)

    @routed(app, "POST", "/api/evidence/prune", ADMINS)
    def prune_now(principal: Principal) -> Any:
        return prune(services, principal.workspace)
