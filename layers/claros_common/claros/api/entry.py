"""Lambda entry points: ``functions/<name>/app.py`` is ``lambda_handler = handler_for(name)``.

Each function imports only its own route modules (``ROUTE_MODULES``), so a cold start
pays for what that function serves; ``claros.api.lambda_entry`` (every route) stays as the
all-routes entry and the baseline of bench/coldstart.py. The resolver and clients are
built on the first invocation (not at import time) and kept for the container's life.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any, cast

# Before pydantic is imported: its plugin loader would scan every installed distribution's
# entry points (importlib.metadata) when the first model class is built, a cold-start cost
# for nothing, since Claros uses no pydantic plugins. template.yaml sets it for every
# function too; setdefault leaves a value the operator set.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from aws_lambda_powertools import Logger, Metrics, Tracer  # noqa: E402
from aws_lambda_powertools.metrics import MetricUnit  # noqa: E402

from claros import lazy_packages  # noqa: E402

# Before claros.api.http imports Powertools' event handler: its package __init__ (every
# resolver Powertools has) then runs only if a name of its own is asked for.
lazy_packages.install()

from claros.api.errors_http import install_error_handlers  # noqa: E402
from claros.api.http import ClarosResolver  # noqa: E402
from claros.wiring import Services, build_services  # noqa: E402

__all__ = ["ROUTE_MODULES", "build_function_resolver", "handler_for", "make_handler"]

LambdaHandler = Callable[[Mapping[str, Any], Any], Any]
# What the X-Ray SDK patches: botocore, so every DynamoDB, KMS, S3 and Bedrock call.
TRACED = ("botocore",)

# Function name (functions/<name>/ and template.yaml) -> the modules of the routes it
# serves, each with a ``register(app)``; claros.api.app.FUNCTIONS says the same with the
# modules imported (tests/aws/test_layer.py keeps the two alike).
ROUTE_MODULES: dict[str, tuple[str, ...]] = {
    "check": ("claros.api.check",),
    "outcome": ("claros.api.outcome",),
    "evidence": ("claros.api.evidence",),
    "checkpoint": ("claros.api.checkpoint",),
    "admin": (
        "claros.api.admin",
        "claros.api.tampering",
        "claros.api.people",
        "claros.api.checks",
        "claros.api.proposals_api",
    ),
    "web": ("claros.api.web", "claros.api.proposals"),
    "export": ("claros.api.export",),
    "prune": ("claros.api.prune",),
}


def build_function_resolver(services: Services, name: str) -> ClarosResolver:
    app = ClarosResolver(services)
    for module in ROUTE_MODULES[name]:
        importlib.import_module(module).register(app)
    install_error_handlers(app)
    return app


def handler_for(name: str) -> LambdaHandler:
    """The function's handler, with its route modules imported now (the cold start pays
    for them once, before the first request, like the rest of the entry module)."""
    for module in ROUTE_MODULES[name]:
        importlib.import_module(module)
    return make_handler(lambda services: build_function_resolver(services, name))


def make_handler(build: Callable[[Services], ClarosResolver]) -> LambdaHandler:
    """A Lambda handler serving the resolver ``build`` makes on the first invocation (with
    the services, kept for the container's life), and the checkpoint function's stream
    and schedule events."""
    logger = Logger()
    # Only the AWS calls: the Tracer's default patches every library the X-Ray SDK knows
    # that is installed, and in the layer that imports httpx (the ask webhook's, sent on a
    # thread after the answer, outside any trace) and sqlite3 (a store Lambda never opens)
    # at every cold start (tests/aws/test_lean_imports.py; docs/deploy.md has the cost).
    tracer = Tracer(patch_modules=TRACED)
    # The template sets POWERTOOLS_METRICS_NAMESPACE; an explicit namespace would override it.
    metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Claros")
    state: dict[str, Any] = {}

    def count(name: str, value: float) -> None:
        unit = MetricUnit.Seconds if name.endswith("Seconds") else MetricUnit.Count
        metrics.add_metric(name=name, unit=unit, value=value)

    def resolver() -> tuple[Services, ClarosResolver]:
        if "app" not in state:
            services = build_services()
            services.metric = count
            if hasattr(services.store, "on_retry"):
                services.store.on_retry = lambda: count("AppendRetries", 1)
            state["services"], state["app"] = services, build(services)
        return state["services"], state["app"]

    @logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
    # Responses hold ledger records (tool-call arguments) and pages up to MB in size: they
    # must not go into X-Ray metadata (64 KB segment limit, and not a place for that data).
    @tracer.capture_lambda_handler(capture_response=False)
    @metrics.log_metrics
    def lambda_handler(event: Mapping[str, Any], context: Any) -> Any:
        services, app = resolver()
        records = event.get("Records")
        # A stream batch: records from DynamoDB, or none (never an API request: those carry
        # requestContext, and a hand-made invoke without one must not reach the router).
        if isinstance(records, list) and all(
            isinstance(r, Mapping) and r.get("eventSource") == "aws:dynamodb" for r in records
        ):
            from claros.api.checkpoint import on_stream  # the checkpoint function's only

            signed = on_stream(services, event)
            metrics.add_metric("CheckpointsSigned", "Count", len(signed))
            return {"signed": [cp.seq for cp in signed]}
        if event.get("source") == "aws.events" or event.get("detail-type") == "Scheduled Event":
            from claros.api.checkpoint import on_schedule

            signed = on_schedule(services)
            metrics.add_metric("CheckpointsSigned", "Count", len(signed))
            return {"signed": [cp.seq for cp in signed]}
        response = app.resolve(event, context)
        # One metric per request, so log_metrics always has something to publish (Powertools
        # warns on every invocation otherwise) and 4xx/5xx rates are graphable.
        status = int(response.get("statusCode", 500))
        metrics.add_metric(name=f"Http{status // 100}xx", unit=MetricUnit.Count, value=1)
        return response

    return cast(LambdaHandler, lambda_handler)
