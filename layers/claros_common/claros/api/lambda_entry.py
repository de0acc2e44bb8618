"""Lambda entry points: ``functions/<name>/app.py`` is ``lambda_handler = handler_for(name)``.

The resolver and clients are built on the first invocation (not at import time) and kept
for the container's life.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer

from claros.api.app import build_resolver
from claros.api.checkpoint import on_schedule, on_stream
from claros.api.http import ClarosResolver
from claros.wiring import Services, build_services

__all__ = ["handler_for"]

LambdaHandler = Callable[[Mapping[str, Any], Any], Any]


def handler_for(name: str) -> LambdaHandler:
    logger = Logger()
    tracer = Tracer()
    metrics = Metrics(namespace="Claros")
    state: dict[str, Any] = {}

    def resolver() -> tuple[Services, ClarosResolver]:
        if "app" not in state:
            services = build_services()
            state["services"], state["app"] = services, build_resolver(services, [name])
        return state["services"], state["app"]

    @logger.inject_lambda_context(correlation_id_path="requestContext.requestId")
    @tracer.capture_lambda_handler
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
        return app.resolve(event, context)

    return lambda_handler
