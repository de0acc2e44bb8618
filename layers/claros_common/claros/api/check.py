"""Routes of the check function: ``POST /v1/check`` and the ask a guard waits on."""

from __future__ import annotations

from typing import Any

from claros.api.http import CHECK_ANSWERS, ClarosResolver, once, parse_body, routed
from claros.asks import ask_view, visible_ask
from claros.auth import ALL_KINDS, GUARD_KINDS, Principal
from claros.checks import CheckRequest, record_check
from claros.mapping.service import list_apps, register_tools
from claros.mapping.tools_request import ToolsRequest

__all__ = ["GUARDS", "register"]

GUARDS = GUARD_KINDS  # agent, service, admin: never a person key (claros.auth says why)
CHECKS = (
    "never make checks: a guard runs with an agent or service key; a person key signs in "
    "to the web app and answers asks"
)


def register(app: ClarosResolver) -> None:
    @routed(app, "POST", "/v1/check", GUARDS, refusal=CHECKS)
    def check(principal: Principal) -> Any:
        def run() -> tuple[int, Any]:
            answer = record_check(app.services, principal, parse_body(app, CheckRequest))
            app.services.metric(f"Checks{str(answer['result']).capitalize()}", 1)
            return 200, answer

        # Kept where only the check role writes: a planted answer would be a check's
        # verdict that no check gave (claros.api.idempotency).
        return once(app, principal, "POST /v1/check", run, CHECK_ANSWERS)

    @routed(app, "POST", "/v1/apps/{app}/tools", GUARDS, refusal=CHECKS)
    def register(principal: Principal, **path: str) -> Any:
        body = parse_body(app, ToolsRequest)
        return register_tools(app.services, principal, path["app"], body)

    @routed(app, "GET", "/v1/apps", GUARDS, refusal=CHECKS)
    def apps(principal: Principal) -> Any:
        return {"apps": list_apps(app.services.store, principal.workspace)}

    @routed(app, "GET", "/v1/asks/{ask_id}", GUARDS, refusal=CHECKS)
    def ask(principal: Principal, ask_id: str) -> Any:
        return ask_view(visible_ask(app.services.store, principal, ask_id))

    @routed(app, "GET", "/v1/me", ALL_KINDS)
    def me(principal: Principal) -> Any:
        """What the caller's key is: the guard and the hooks ask it before they use a key,
        and refuse to run with one that can approve (admin, person)."""
        return {
            "kind": principal.kind,
            "workspace": principal.workspace,
            "person": principal.person,
            "key_id": principal.key_id,
        }
