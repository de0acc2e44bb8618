"""The HTTP API's Lambda authorizer (REQUEST, payload 2.0, simple responses).

It answers one question, with the same code the routes use
(``claros.web.sessions.request_principal``): does the request carry a credential that
stands, a bearer key or a live web session? Requests that do not never reach a function.
What the credential may do (the route's key kinds, CSRF on a cookie's state-changing
request) stays the route's check: API Gateway caches the answer by credential for every
route behind the authorizer, so it must not depend on the route. The routes also re-check
the credential itself on every request, so a key revoked within the cache's TTL is refused
by the function at once.

API Gateway cannot put a body on an authorizer's refusal (HTTP APIs have no gateway
responses): a request without the identity source gets 401 ``{"message":"Unauthorized"}``
and a refused one 403 ``{"message":"Forbidden"}`` from API Gateway itself
(docs/deploy.md). The reason is logged here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

# Before pydantic (the settings) is imported: no plugin scan, no importlib.metadata, as
# claros.api.entry does for the other functions (why: there).
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from claros import lazy_packages  # noqa: E402

lazy_packages.install(lazy_packages.STDLIB)  # not Powertools': the authorizer uses none

from claros.errors import UnauthorizedError  # noqa: E402
from claros.web.sessions import request_principal  # noqa: E402
from claros.wiring import Services  # noqa: E402

__all__ = ["authorize", "authorizer_handler"]

log = logging.getLogger("claros.authorizer")


def authorize(services: Services, event: Mapping[str, Any]) -> dict[str, Any]:
    """The simple response for ``event``: ``isAuthorized``, and for an allowed request the
    caller in ``context`` (strings only; it reaches the function as
    ``requestContext.authorizer.lambda``)."""
    try:
        principal = request_principal(services, event, web=True, csrf=False)
    except UnauthorizedError as exc:
        route = event.get("routeKey", "")
        log.info("refused %s: %s", route, exc.message)
        return {"isAuthorized": False, "context": {"error": exc.code, "message": exc.message}}
    return {
        "isAuthorized": True,
        "context": {
            "workspace": principal.workspace,
            "kind": principal.kind,
            "person": principal.person or "",
            "keyId": principal.key_id,
        },
    }


LambdaHandler = Callable[[Mapping[str, Any], Any], dict[str, Any]]


def authorizer_handler() -> LambdaHandler:
    """functions/authorizer/app.py's handler: services built on the first invocation and
    kept for the container's life (as claros.api.lambda_entry does)."""
    built: dict[str, Services] = {}

    def lambda_handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        if "services" not in built:
            from claros.wiring import build_services

            built["services"] = build_services()
        return authorize(built["services"], event)

    return lambda_handler
