"""The Claros API as the guard and the hooks use it (async, keep-alive, bounded).

Failures are typed: ``ClarosUnavailableError`` when Claros cannot be reached, times out or
answers 5xx, 408 or 429 (``--fail-open`` may forward then), or a 409
``idempotency_in_progress`` (the same request is still running, or was cut off by a crash:
"retry later", not "recorded"); ``ClarosRefusedError`` on any other 4xx (never forwarded).

A check answered 503 with ``Retry-After`` (Claros overloaded; nothing was written) is sent
again after the wait Claros asked for, within a budget (``CHECK_RETRY_BUDGET_S``, at most
``CHECK_RETRIES`` times); past it the check fails as unavailable, saying how long it
tried, and the write is blocked (or forwarded with ``--fail-open``). A 503 without
``Retry-After``, a 502 or a 504 is not retried: a gateway's timeout may have come after
Claros recorded the check.

Reports (an outcome, a write let through unchecked) are ``Report`` values: the route, the
body and the ``Idempotency-Key`` they are first sent with, kept as they are so that a
report sent again (from the spool, after an outage) is the same request and Claros records
it once. Names go into paths percent-encoded, one segment each: an app may be ``team/shop``.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

import anyio
import httpx

from claros_guard.client import error_reason
from claros_guard.errors import (
    ClarosOverloadedError,
    ClarosRefusedError,
    ClarosUnavailableError,
    ConfigError,
    GuardError,
)
from claros_guard.keepalive import (
    Answer,
    AnswerTooLarge,
    KeepAlivePool,
    Outgoing,
    RequestTooLarge,
    encoded,
    proxied,
)
from claros_guard.login import CredentialsError, usable_connection

__all__ = [
    "MAX_ANSWER_BYTES",
    "ClarosApi",
    "HttpClarosApi",
    "Report",
    "call_outcome_report",
    "is_need",
    "new_idempotency_key",
    "outcome_key",
    "outcome_report",
    "segment",
    "unchecked_report",
]

DEFAULT_TIMEOUT = 10.0
# The check API's body limit (docs/api.md, "Errors and limits"). A body over it is never
# sent: Claros would refuse it unread, and a large one breaks the connection before that
# 413 can be read, which looked like an outage and let --fail-open forward the write.
MAX_BODY_BYTES = 1_000_000
# The most of one answer from Claros the guard reads (its answers are a few KB; a tool
# registration's, with every mapping, stays well under a megabyte). Past it the answer is
# dropped and the request fails as unavailable: an endless answer held every byte in
# memory until the timeout.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
# An overloaded Claros (503 + Retry-After) is asked again at most this many times, and
# never past this many seconds after the first try: an agent's tool call waits that long
# at worst before it is blocked (or forwarded with --fail-open).
CHECK_RETRIES = 3
CHECK_RETRY_BUDGET_S = 8.0


# What a request to Claros gives back: the lean client's answer, or httpx's (a proxy, a
# test's transport). The guard reads both alike.
Response = httpx.Response | Answer


def retry_after(response: Response) -> float | None:
    """Seconds from a ``Retry-After`` header in seconds (the form Claros sends); None for
    no header or a form that is not a number of seconds."""
    value = (response.headers.get("Retry-After") or "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < 3600 else None


def segment(name: str) -> str:
    """A name as one path segment: app and tool names may hold ``/``, ``:`` or ``@``."""
    return quote(name, safe="")


@dataclass(frozen=True)
class Report:
    """A report for Claros, as sent the first time and every time after."""

    route: str  # /v1/unchecked, /v1/outcomes or /v1/check/{check_id}/outcome
    body: dict[str, Any]
    key: str  # the Idempotency-Key
    what: str = field(default="report", compare=False)  # for log lines

    @property
    def ident(self) -> tuple[str, str]:
        """Two reports with the same ident are one report (Claros keeps the first)."""
        return self.route, self.key

    def with_outcome(self, status: str | None, summary: str | None) -> Report:
        body = {k: v for k, v in self.body.items() if k not in ("status", "summary")}
        if status is not None:
            body["status"] = status
        body["summary"] = summary
        return Report(self.route, body, self.key, self.what)


def outcome_report(check_id: str, status: str, summary: str | None, what: str) -> Report:
    route = f"/v1/check/{segment(check_id)}/outcome"
    body = {"status": status, "summary": summary}
    return Report(route, body, f"outcome-{check_id}", what)


def call_outcome_report(tool_use_id: str, status: str, summary: str | None) -> Report:
    body = {"tool_use_id": tool_use_id, "status": status, "summary": summary}
    return Report("/v1/outcomes", body, outcome_key(tool_use_id), "outcome")


def unchecked_report(body: Mapping[str, Any], what: str, key: str | None = None) -> Report:
    """A write let through unchecked. ``status`` left out of the body is "not known"
    (Claros takes ``ok``, ``error`` or none). Its arguments' long strings are cut: it is a
    record that the call ran, which must fit the API's body limit (else it could never be
    sent, and it would hold up the spool behind it); nothing is decided on it. A call
    being checked is never cut (a rule would decide on text that is not what runs)."""
    body = dict(body)
    if "arguments" in body:
        body["arguments"] = trimmed(body["arguments"])
    return Report("/v1/unchecked", body, key or new_idempotency_key(), what)


MAX_REPORTED_STRING = 2000


def trimmed(value: Any) -> Any:
    """``value`` with every string longer than ``MAX_REPORTED_STRING`` cut, saying so."""
    if isinstance(value, str) and len(value) > MAX_REPORTED_STRING:
        cut = len(value) - MAX_REPORTED_STRING
        return value[:MAX_REPORTED_STRING] + f"…[{cut} more characters]"
    if isinstance(value, dict):
        return {str(k): trimmed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trimmed(v) for v in value]
    return value


class ClarosApi(Protocol):
    """What the policy needs from Claros (a fake implements it in unit tests)."""

    async def check(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    async def ask(self, ask_id: str) -> dict[str, Any]: ...

    async def send_report(self, report: Report) -> None: ...

    async def register_tools(self, app: str, tools: list[dict[str, Any]]) -> dict[str, Any]: ...


def is_need(answer: Mapping[str, Any]) -> bool:
    """Whether a check's answer asks the guard for reads. The spec's need answer is
    ``{"allowed": false, "need": [...]}``; the server also sends ``result: "need"``, which
    counts on its own (an empty list under it is then Claros's mistake, not an answer)."""
    if answer.get("result") == "need":
        return True
    need = answer.get("need")
    return answer.get("allowed") is False and isinstance(need, list) and bool(need)


def _reason(response: Response) -> str:
    return error_reason(response, max_details=3)


# The code of Claros's 409 for a request still running under the same Idempotency-Key
# (the other 409s, code "conflict", mean "recorded already").
IN_PROGRESS = "idempotency_in_progress"


def _code(response: Response) -> str:
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return ""
    return str(body.get("error") or "") if isinstance(body, dict) else ""


class HttpClarosApi:
    """The real thing, over kept-alive HTTP/1.1 connections (``claros_guard.keepalive``)."""

    def __init__(
        self,
        url: str | None,
        key: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        retries: int = CHECK_RETRIES,
        retry_budget_s: float = CHECK_RETRY_BUDGET_S,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.retries = retries
        self.retry_budget_s = retry_budget_s
        self._timeout = timeout
        self._sleep = sleep
        self._clock = clock
        # Given, else $CLAROS_URL / $CLAROS_KEY, else the key `claros login` saved.
        try:
            self.url, self.key = usable_connection(url, key)
        except CredentialsError as exc:
            raise ConfigError(str(exc)) from None
        auth = {"Authorization": f"Bearer {self.key}"}
        # The lean client (claros_guard.keepalive) where it goes; httpx through a proxy
        # from the environment, or a transport given (tests).
        self._pool: KeepAlivePool | None = None
        self._http: httpx.AsyncClient | None = None
        if transport is None and not proxied(self.url):
            self._pool = KeepAlivePool(
                self.url, auth, timeout=timeout, connect_timeout=min(timeout, 5.0),
                max_body=MAX_BODY_BYTES, max_answer=MAX_ANSWER_BYTES,
            )  # fmt: skip
        else:
            self._http = httpx.AsyncClient(
                base_url=self.url,
                headers=auth,
                timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
                transport=transport,
            )

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
        if self._http is not None:
            await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
    ) -> Response:
        if self._pool is not None:
            return await self._pool.request(method, path, body, headers)
        assert self._http is not None
        content: bytes | None = None
        if body is not None:
            content = encoded(body)
            if len(content) > MAX_BODY_BYTES:
                raise RequestTooLarge(len(content), MAX_BODY_BYTES)
            headers = {**(headers or {}), "Content-Type": "application/json"}
        return await self._bounded(method, path, content, headers)

    async def _bounded(
        self, method: str, path: str, content: bytes | None, headers: Mapping[str, str] | None
    ) -> httpx.Response:
        """httpx's answer, read up to ``MAX_ANSWER_BYTES`` and within the timeout, the
        whole answer (as the lean client does; httpx's timeout is per read, so an answer
        sent a byte at a time held the call for ever)."""
        assert self._http is not None
        try:
            with anyio.fail_after(self._timeout):
                return await self._read(method, path, content, headers)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no whole answer within {self._timeout:g} s") from exc

    async def _read(
        self, method: str, path: str, content: bytes | None, headers: Mapping[str, str] | None
    ) -> httpx.Response:
        assert self._http is not None
        async with self._http.stream(method, path, content=content, headers=headers) as got:
            parts: list[bytes] = []
            held = 0
            async for part in got.aiter_bytes():
                held += len(part)
                if held > MAX_ANSWER_BYTES:
                    raise AnswerTooLarge(MAX_ANSWER_BYTES)
                parts.append(part)
            framing = ("content-encoding", "content-length", "transfer-encoding")
            kept = [(k, v) for k, v in got.headers.multi_items() if k.lower() not in framing]
            return httpx.Response(
                got.status_code, headers=kept, content=b"".join(parts), request=got.request
            )

    async def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        what: str = "check",
    ) -> Any:
        try:
            response = await self._request(
                method, path, dict(body) if body is not None else None, headers
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        return self._judge(response, what)

    def _unreachable(self, exc: httpx.HTTPError) -> GuardError:
        if isinstance(exc, RequestTooLarge):  # a refusal, never an outage: blocks always
            return ClarosRefusedError(413, str(exc))
        if isinstance(exc, httpx.TimeoutException):
            return ClarosUnavailableError(f"Claros at {self.url} did not answer in time")
        if isinstance(exc, AnswerTooLarge):
            return ClarosUnavailableError(f"Claros at {self.url} answered with {exc}")
        return ClarosUnavailableError(f"cannot reach Claros at {self.url}: {exc}")

    def _judge(self, response: Response, what: str) -> Any:
        """An answer's JSON, or the typed failure it means (module docstring)."""
        wait = retry_after(response) if response.status_code == 503 else None
        if wait is not None:
            raise ClarosOverloadedError(
                f"Claros at {self.url} is overloaded (503): {_reason(response)}", wait
            )
        if response.status_code >= 500 or response.status_code in (408, 429):
            raise ClarosUnavailableError(
                f"Claros at {self.url} failed ({response.status_code}): {_reason(response)}"
            )
        if response.status_code == 409 and _code(response) == IN_PROGRESS:
            # Another request holds this Idempotency-Key (one cut off mid-way, perhaps by
            # a crash): nothing is recorded yet. Retry later, as for a 503; never take it
            # for "already recorded".
            raise ClarosUnavailableError(
                f"Claros at {self.url} has this {what} in progress, not recorded yet: "
                f"{_reason(response)}"
            )
        if response.status_code >= 400:
            raise ClarosRefusedError(response.status_code, _reason(response), what)
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:
            raise ClarosUnavailableError(f"Claros at {self.url} answered with no JSON") from exc

    async def check(self, body: Mapping[str, Any]) -> dict[str, Any]:
        answer = await self._check_retrying(body)
        if not isinstance(answer, dict) or ("result" not in answer and not is_need(answer)):
            raise ClarosUnavailableError(
                f"Claros at {self.url} answered the check with neither a result nor a need"
            )
        return answer

    async def _check_retrying(self, body: Mapping[str, Any]) -> Any:
        """``POST /v1/check``, again after each 503 + Retry-After within the budget."""
        began = self._clock()
        tries = 0
        while True:
            try:
                return await self._send("POST", "/v1/check", body)
            except ClarosOverloadedError as exc:
                tries += 1
                # A little jitter, so guards told the same Retry-After do not all come
                # back in the same instant.
                wait = exc.retry_after_s * random.uniform(1.0, 1.25)
                spent = self._clock() - began
                if tries > self.retries or spent + wait > self.retry_budget_s:
                    raise ClarosOverloadedError(
                        f"{exc}; asked {tries} time(s) over {spent:.1f}s, within the "
                        f"guard's retry budget ({self.retries} retries, "
                        f"{self.retry_budget_s:g}s)",
                        exc.retry_after_s,
                    ) from exc
                await self._sleep(wait)

    async def ask(self, ask_id: str) -> dict[str, Any]:
        answer = await self._send("GET", f"/v1/asks/{segment(ask_id)}")
        return dict(answer) if isinstance(answer, dict) else {}

    async def send_report(self, report: Report) -> None:
        headers = {"Idempotency-Key": report.key}
        await self._send("POST", report.route, report.body, headers, what=report.what)

    async def send_reports(self, reports: Sequence[Report]) -> list[GuardError | None]:
        """Send ``reports`` together, each its own request under its own Idempotency-Key,
        pipelined in one write on one kept connection: per report None (Claros took it)
        or what ``send_report`` would have raised. Without the lean client (a proxy, a
        test's transport), one after the other."""
        out: list[GuardError | None] = []
        if self._pool is None:
            for report in reports:
                try:
                    await self.send_report(report)
                except GuardError as exc:  # typed by _send; handed back per report
                    out.append(exc)
                else:
                    out.append(None)
            return out
        outgoing = [Outgoing("POST", r.route, dict(r.body), {"Idempotency-Key": r.key})
                    for r in reports]  # fmt: skip
        for report, answer in zip(reports, await self._pool.pipeline(outgoing), strict=True):
            try:
                if isinstance(answer, httpx.HTTPError):
                    raise self._unreachable(answer) from answer
                self._judge(answer, report.what)
            except GuardError as exc:
                out.append(exc)
            else:
                out.append(None)
        return out

    async def register_tools(self, app: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
        path, body = f"/v1/apps/{segment(app)}/tools", {"tools": tools}
        answer = await self._send("POST", path, body, what="tool registration")
        return dict(answer) if isinstance(answer, dict) else {}


def new_idempotency_key() -> str:
    return uuid.uuid4().hex


def outcome_key(tool_use_id: str) -> str:
    """The Idempotency-Key of a call's outcome: the same for every retry of that call, and
    68 ASCII characters whatever the id (Claros takes keys of at most 255)."""
    return "use-" + hashlib.sha256(tool_use_id.encode("utf-8", "surrogatepass")).hexdigest()
