"""Errors the API answers with: each maps to one HTTP status, in one place (api/app.py)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "BadRequestError",
    "ClarosError",
    "ConflictError",
    "ForbiddenError",
    "NotFoundError",
    "PayloadTooLargeError",
    "UnauthorizedError",
    "UnavailableError",
]


class ClarosError(Exception):
    """An error a client caused or can act on; ``status`` is its HTTP status."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return body


class BadRequestError(ClarosError):
    status, code = 400, "bad_request"


class UnauthorizedError(ClarosError):
    status, code = 401, "unauthorized"


class ForbiddenError(ClarosError):
    status, code = 403, "forbidden"


class NotFoundError(ClarosError):
    status, code = 404, "not_found"


class ConflictError(ClarosError):
    status, code = 409, "conflict"


class PayloadTooLargeError(ClarosError):
    status, code = 413, "payload_too_large"


class UnavailableError(ClarosError):
    status, code = 503, "unavailable"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
