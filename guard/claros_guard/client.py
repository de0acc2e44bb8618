"""A small HTTP client for the Claros API, shared by the client-side commands."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import httpx

from claros_guard.login import CredentialsError, usable_connection

if TYPE_CHECKING:
    from claros_guard.keepalive import Answer

__all__ = [
    "MAX_ANSWER_BYTES",
    "AnswerTooLarge",
    "ApiError",
    "Client",
    "ClientError",
    "bounded_request",
]


class ClientError(Exception):
    """A usage or connection problem: the command exits 2."""


class ApiError(Exception):
    """Claros answered with an error: the message is its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def error_reason(response: httpx.Response | Answer, *, max_details: int | None = None) -> str:
    """What Claros said was wrong, with the places it named: ``message (field: problem)``."""
    try:
        body = response.json()
    except (ValueError, RecursionError):
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


CONNECT_TIMEOUT = 10.0
# The most of one answer a command reads (a page of the ledger stops near 4 MB).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
_FRAMING = ("content-encoding", "content-length", "transfer-encoding")


class AnswerTooLarge(httpx.HTTPError):
    """An answer over ``MAX_ANSWER_BYTES``, not read further."""


def bounded_request(
    http: httpx.Client, timeout: float, method: str, path: str, **kwargs: Any
) -> httpx.Response:
    """``http.request``, but the whole answer within ``timeout`` (httpx's own timeout is
    per read: an answer sent a byte at a time held a command for ever) and at most
    ``MAX_ANSWER_BYTES`` of it. Read in a thread this one waits on; past the timeout,
    ``httpx.ReadTimeout`` (the thread, a daemon, ends at its next read's timeout or with
    the command)."""
    ended: list[httpx.Response | BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            ended.append(_read(http, method, path, **kwargs))
        except BaseException as exc:  # handed to the waiting thread
            ended.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="claros-request", daemon=True).start()
    if not done.wait(timeout):
        raise httpx.ReadTimeout(f"no whole answer within {timeout:g} s")
    if isinstance(ended[0], BaseException):
        raise ended[0]
    return ended[0]


def _read(http: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    too_large = f"over {MAX_ANSWER_BYTES} bytes; not read further"
    with http.stream(method, path, **kwargs) as got:
        declared = got.headers.get("content-length", "")
        if declared.isdigit() and len(declared) < 20 and int(declared) > MAX_ANSWER_BYTES:
            raise AnswerTooLarge(too_large)
        parts: list[bytes] = []
        held = 0
        for part in got.iter_bytes():
            held += len(part)
            if held > MAX_ANSWER_BYTES:
                raise AnswerTooLarge(too_large)
            parts.append(part)
        kept = [(k, v) for k, v in got.headers.multi_items() if k.lower() not in _FRAMING]
        return httpx.Response(
            got.status_code, headers=kept, content=b"".join(parts), request=got.request
        )


class Client:
    """``timeout``: how long Claros may take to answer one request, the whole answer
    (httpx's own timeout is per read: an answer sent a byte at a time held a command for
    ever); connecting may take at most ``CONNECT_TIMEOUT`` of it, so a server that is not
    there fails fast. An answer is read up to ``MAX_ANSWER_BYTES``."""

    def __init__(self, url: str | None, key: str | None, *, timeout: float = 30) -> None:
        # Given, else $CLAROS_URL / $CLAROS_KEY, else the key `claros login` saved.
        try:
            url, key = usable_connection(url, key)
        except CredentialsError as exc:
            raise ClientError(str(exc)) from None
        self.timeout = timeout
        self.http = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
        )

    @property
    def url(self) -> str:
        return str(self.http.base_url).rstrip("/")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = bounded_request(self.http, self.timeout, method, path, **kwargs)
        except AnswerTooLarge as exc:
            raise ClientError(f"{self.url} answered {method} {path} with {exc}") from exc
        except httpx.TimeoutException as exc:
            raise ClientError(
                f"Claros at {self.url} did not answer in time ({self.timeout:g} s)"
            ) from exc
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach Claros at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise ApiError(response.status_code, error_reason(response))
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer's JSON; ClientError when it is none (not Claros at that URL)."""
        response = self.request(method, path, **kwargs)
        try:
            return response.json()
        except (ValueError, RecursionError):
            raise self.unlike(f"{method} {path} gave no JSON", response.text) from None

    def unlike(self, what: str, answer: Any = None) -> ClientError:
        """The error for an answer Claros would not give: another server at that URL?"""
        if answer is None:
            return ClientError(f"{self.url} did not answer like Claros: {what}")
        shown = " ".join(str(answer).split())
        shown = shown[:80] + ("..." if len(shown) > 80 else "")
        return ClientError(f"{self.url} did not answer like Claros: {what} ({shown!r})")
