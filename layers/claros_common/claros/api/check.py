"""Routes of the check function: ``POST /v1/check``."""

from __future__ import annotations

from typing import Any

from claros.api.http import ClarosResolver, parse_body, routed
from claros.auth import Principal
from claros.checks import CheckRequest, record_check

__all__ = ["register"]

GUARDS = frozenset({"agent", "service", "admin"})


def register(app: ClarosResolver) -> None:
    @routed(app, "POST", "/v1/check", GUARDS)
    def check(principal: Principal) -> Any:
        return record_check(app.services, principal, parse_body(app, CheckRequest))
