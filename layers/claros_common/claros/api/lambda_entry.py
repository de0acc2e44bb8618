"""Lambda entry points: ``functions/<name>/app.py`` is ``lambda_handler = handler_for(name)``.

The resolver and clients are built on the first invocation (not at import time) and kept
for the container's life.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from claros.api.app import build_resolver
from claros.api.checkpoint import on_schedule, on_stream
from claros.api.http import ClarosResolver
from claros.wiring import Services, build_services

__all__ = ["handler_for"]

LambdaHandler = Callable[[Mapping[str, Any], Any], Any]


def handler_for(name: str) -> LambdaHandler:
    logger = Logger()
    tracer = Tracer()
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
            state["services"], state["app"] = services, build_resolver(services, [name])
        return state["services"], state["app"]

    @logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
    # Responses hold ledger records (tool-call arguments) and pages up to MB in size: they
    # must not go into X-Ray metadata (64 KB segment limit, and not a place for that data).
    @tracer.capture_lambda_handler(capture_response=False)
    @metrics.log_metrics
    def lambda_handler(event: Mapping[str, Any], context: Any) -> Any:
        services, app = resolver()
        records = event.get("Records")
        if records and records[0].get("eventSource") == "aws:dynamodb":
            signed = on_stream(services, event)
            metrics.add_metric("CheckpointsSigned", "Count", len(signed))
            return {"signed": [cp.seq for cp in signed]}
        if event.get("source") == "aws.events" or event.get("detail-type") == "Scheduled Event":
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
