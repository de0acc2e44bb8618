"""A small HTTP client for the Claros API, shared by the client-side commands."""

from __future__ import annotations

from typing import Any

import httpx

from claros_guard.login import resolve_connection

__all__ = ["ApiError", "Client", "ClientError"]


class ClientError(Exception):
    """A usage or connection problem: the command exits 2."""


class ApiError(Exception):
    """Claros answered with an error: the message is its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def error_reason(response: httpx.Response, *, max_details: int | None = None) -> str:
    """What Claros said was wrong, with the places it named: ``message (field: problem)``."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if not isinstance(body, dict):
        return str(body)[:300]
    message = str(body.get("message") or body.get("error") or body)
    details = body.get("details")
    if isinstance(details, list) and details:
        where = "; ".join(
            f"{d.get('field')}: {d.get('problem')}"
            for d in details[:max_details]
            if isinstance(d, dict)
        )
        message = f"{message} ({where})"
    return message


class Client:
    def __init__(self, url: str | None, key: str | None, *, timeout: float = 30) -> None:
        # Given, else $CLAROS_URL / $CLAROS_KEY, else the key `claros login` saved.
        url, key = resolve_connection(url, key)
        if not url:
            raise ClientError("no Claros URL: pass --url or set CLAROS_URL")
        if not key:
            raise ClientError("no key: pass --key, set CLAROS_KEY or run claros login")
        self.http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach Claros at {self.http.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise ApiError(response.status_code, error_reason(response))
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()
