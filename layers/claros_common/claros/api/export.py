"""Routes of the export function, which signs: the evidence export and the monthly report.

Locally the export streams to the client (chunked, bounded memory); in AWS, where a
Lambda answers at most 6 MB, it is written to the export bucket and answered with a
presigned URL.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from claros.api.http import ClarosResolver, json_response, query_int, routed
from claros.api.streaming import streamed
from claros.auth import Principal
from claros.errors import BadRequestError
from claros.evidence.export import S3Exports, export_lines, export_name, prepare_export
from claros.evidence.report import build_report, render_html, sign_report
from claros.web.headers import PAGE_HEADERS

__all__ = ["register"]

ADMINS = frozenset({"admin"})
EXPORTERS = frozenset({"admin", "audit"})


def _s3_exports(bucket: str) -> S3Exports:
    import boto3  # AWS only: the export bucket is set by the template
    from botocore.config import Config

    return S3Exports(boto3.client("s3", config=Config(signature_version="s3v4")), bucket)


def register(app: ClarosResolver) -> None:
    services = app.services
    uploads: dict[str, S3Exports] = {}  # the S3 client, made on first use

    @routed(app, "GET", "/api/evidence/export", EXPORTERS)
    def export(principal: Principal) -> Any:
        plan = prepare_export(services, principal.workspace)
        name = export_name(principal.workspace, plan.exported_at)
        lines = export_lines(services, plan)
        bucket = services.settings.export_bucket
        if bucket:
            if bucket not in uploads:
                uploads[bucket] = _s3_exports(bucket)
            key = f"{principal.workspace}/{plan.exported_at}-{plan.last_seq}/{name}"
            done = uploads[bucket].upload(key, name, lines)
            return json_response(
                {**done, "workspace": principal.workspace, "last_seq": plan.last_seq}
            )
        headers = {
            "Content-Disposition": f'attachment; filename="{name}"',
            "x-claros-last-seq": str(plan.last_seq),
        }
        return streamed(lines, "application/x-ndjson", headers)

    @routed(app, "GET", "/api/evidence/report", ADMINS)
    def report(principal: Principal) -> Any:
        query = app.current_event.query_string_parameters or {}
        fmt = query.get("format") or "json"
        if fmt not in ("json", "html"):
            raise BadRequestError(f"query parameter format must be json or html, not {fmt!r}")
        fast = query_int(app, "fast_seconds", services.settings.fast_approval_s, maximum=86_400)
        built = build_report(
            services,
            principal.workspace,
            query.get("workflow_id") or "",
            query.get("month") or "",
            fast_seconds=fast,
        )
        signed = sign_report(services, principal.workspace, built)
        if fmt == "html":
            # The app's page headers: the report is a page of the web app (never framed).
            return Response(
                200, "text/html; charset=utf-8", render_html(signed), headers=dict(PAGE_HEADERS)
            )
        return json_response(signed)
