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

    def __init__(self, status: int, message: str, details: Any = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.details = details


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
            try:
                body = response.json()
                message, details = body.get("message", response.text), body.get("details")
            except ValueError:
                message, details = response.text or response.reason_phrase, None
            raise ApiError(response.status_code, message, details)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()
