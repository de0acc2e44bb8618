"""The one place that maps errors to HTTP statuses, for every resolver (each function's
and the local server's)."""

from __future__ import annotations

import logging
import sys

from aws_lambda_powertools.event_handler.api_gateway import Response

from claros.api.http import ClarosResolver, json_response, validation_details
from claros.canonical import CanonicalError
from claros.errors import ClarosError
from claros.signing import SigningError
from claros.store.base import (
    ChainBusyError,
    ConflictError,
    KeyTooLongError,
    RecordTooLargeError,
    StorageUnavailableError,
    StoreError,
)

__all__ = ["install_error_handlers"]

log = logging.getLogger("claros.api")


def _error(status: int, code: str, message: str, **extra: object) -> Response[str]:
    body: dict[str, object] = {"error": code, "message": message, **extra}
    return json_response(body, status)


def _store_error(app: ClarosResolver, exc: StoreError) -> Response[str]:
    if isinstance(exc, KeyTooLongError):
        return _error(400, "bad_request", str(exc))  # a name too long to keep: the request's
    if isinstance(exc, StorageUnavailableError):
        app.services.metric("Overloaded", 1)  # the 503 rate is a metric
        # A full or read-only disk, an I/O error: the reason is the operator's to fix and
        # the client's to wait for, so both see it. Nothing was written.
        log.error("storage unavailable: %s", exc)
        response = _error(503, "unavailable", str(exc))
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response
    log.exception("storage error")
    return _error(503, "unavailable", "storage is unavailable; retry shortly")


def install_error_handlers(app: ClarosResolver) -> None:
    @app.exception_handler(ClarosError)
    def claros_error(exc: ClarosError) -> Response[str]:
        response = json_response(exc.to_json(), exc.status)
        retry = getattr(exc, "retry_after_s", None)
        if retry is not None:
            response.headers["Retry-After"] = str(retry)
        return response

    @app.exception_handler(ValueError)
    def invalid(exc: ValueError) -> Response[str]:
        # pydantic's ValidationError is a ValueError. Told apart by its class only when
        # pydantic is loaded: the functions whose routes validate no body never import it
        # (a cold-start cost), and then raise none. Any other ValueError is unexpected.
        core = sys.modules.get("pydantic_core")
        if core is not None and isinstance(exc, core.ValidationError):
            details = validation_details(exc)
            return _error(400, "bad_request", "invalid request", details=details)
        return _unexpected(exc)

    @app.exception_handler(CanonicalError)
    def not_canonical(exc: CanonicalError) -> Response[str]:
        return _error(400, "bad_request", f"invalid value: {exc}")

    @app.exception_handler(ConflictError)
    def conflict(exc: ConflictError) -> Response[str]:
        return _error(409, "conflict", str(exc))

    @app.exception_handler(ChainBusyError)
    def busy(exc: ChainBusyError) -> Response[str]:
        # Overload: the 503 rate is a metric (Powertools in AWS, a counter locally).
        app.services.metric("Overloaded", 1)
        response = _error(503, "unavailable", f"the ledger is busy, retry: {exc}")
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(RecordTooLargeError)
    def too_large(exc: RecordTooLargeError) -> Response[str]:
        return _error(413, "payload_too_large", str(exc))

    @app.exception_handler(SigningError)
    def signing_error(exc: SigningError) -> Response[str]:
        # Only where signing is the request's purpose (a checkpoint, an export, a report):
        # a checkpoint signed after an append never fails it (claros.checkpoints.record).
        log.error("signing failed: %s", exc)
        response = _error(503, "unavailable", f"the ledger cannot sign right now: {exc}")
        response.headers["Retry-After"] = "30"
        return response

    app.exception_handler(StoreError)(lambda exc: _store_error(app, exc))

    @app.not_found
    def not_found(exc: Exception) -> Response[str]:
        event = app.current_event
        page = app.page_not_found() if app.page_not_found is not None else None
        if page is not None:
            return page
        return _error(
            404, "not_found", f"no route {event.request_context.http.method} {event.path}"
        )

    app.exception_handler(Exception)(_unexpected)


def _unexpected(exc: Exception) -> Response[str]:
    # Never a traceback to the client; the log has it.
    log.exception("unexpected error")
    return _error(500, "internal", "internal error; it has been logged")
