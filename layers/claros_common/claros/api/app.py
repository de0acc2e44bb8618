"""One resolver builder for every function and for the local server (every route).

Lambda functions build theirs with ``claros.api.entry`` (each imports only its own route
modules, ``ROUTE_MODULES``); this module imports them all, for the local server and the
all-routes ``claros.api.lambda_entry``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from claros.api import (
    admin,
    check,
    checkpoint,
    checks,
    evidence,
    export,
    outcome,
    people,
    proposals,
    proposals_api,
    prune,
    tampering,
    web,
)
from claros.api.errors_http import install_error_handlers
from claros.api.http import ClarosResolver
from claros.wiring import Services

__all__ = ["FUNCTIONS", "build_resolver"]

# Function name (functions/<name>/ and template.yaml) -> the route modules it serves.
FUNCTIONS: dict[str, tuple[Callable[[ClarosResolver], None], ...]] = {
    "check": (check.register,),
    "outcome": (outcome.register,),
    "evidence": (evidence.register,),
    "checkpoint": (checkpoint.register,),
    # The admin API (/api/*) and the web app (/app/*, device sign-in) are two functions:
    # the JSON routes' cold start does not pay for the pages' templates and forms.
    "admin": (
        admin.register,
        tampering.register,
        people.register,
        checks.register,
        proposals_api.register,
    ),
    "web": (web.register, proposals.register),
    "export": (export.register,),
    "prune": (prune.register,),
}


def build_resolver(services: Services, functions: Iterable[str]) -> ClarosResolver:
    app = ClarosResolver(services)
    for name in functions:
        for register in FUNCTIONS[name]:
            register(app)
    install_error_handlers(app)
    return app
