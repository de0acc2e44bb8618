"""Routes of the check function: ``POST /v1/check`` and the ask a guard waits on."""

from __future__ import annotations

from typing import Any

from claros.api.http import ClarosResolver, once, parse_body, routed
from claros.asks import ask_view, get_ask
from claros.auth import Principal
from claros.checks import CheckRequest, record_check
from claros.mapping.service import ToolsRequest, list_apps, register_tools

__all__ = ["GUARDS", "register"]

# The kinds a guard may run with: a person's agent key, a service key, an admin's key.
GUARDS = frozenset({"agent", "service", "admin"})


def register(app: ClarosResolver) -> None:
    @routed(app, "POST", "/v1/check", GUARDS)
    def check(principal: Principal) -> Any:
        def run() -> tuple[int, Any]:
            answer = record_check(app.services, principal, parse_body(app, CheckRequest))
            app.services.metric(f"Checks{str(answer['result']).capitalize()}", 1)
            return 200, answer

        return once(app, principal, "POST /v1/check", run)

    @routed(app, "POST", "/v1/apps/{app}/tools", GUARDS)
    def register(principal: Principal, **path: str) -> Any:
        body = parse_body(app, ToolsRequest)
        return register_tools(app.services, principal, path["app"], body)

    @routed(app, "GET", "/v1/apps", GUARDS)
    def apps(principal: Principal) -> Any:
        return {"apps": list_apps(app.services.store, principal.workspace)}

    @routed(app, "GET", "/v1/asks/{ask_id}", GUARDS)
    def ask(principal: Principal, ask_id: str) -> Any:
        found, _ = get_ask(app.services.store, principal.workspace, ask_id)
        return ask_view(found)
