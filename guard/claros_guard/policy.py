"""The check/need policy: what the guard does with a write before and after it runs.

1. ``POST /v1/check``; while Claros answers a need (``allowed: false`` with a ``need``
   list, or ``result: "need"``), run those reads (``NeedResolver``) and
   ask again with everything read so far in ``fetched``.
2. ``allow``: forward. ``nudge``: forward and give the agent the rule's message.
   ``stop``: never forward; the agent gets the rule and its message.
   ``ask``: wait (up to ``ask_wait`` seconds, reporting progress) for the person asked;
   on approval repeat the check with ``approval`` and forward; otherwise tell the agent
   who was asked and how to retry. A call repeated while its question is still open
   waits on that question instead of asking again.
3. Claros unreachable, slow or failing (5xx), or a read that failed: blocked, unless
   ``fail_open``, when the call is forwarded and reported to ``/v1/unchecked``. A 4xx from
   Claros and a need naming a tool that is not a read always block.
4. After a forwarded write ran, its report (the outcome of its check, or the write let
   through unchecked) goes to Claros in the background (``reporter.Reporter``), so the
   agent never waits for it.

Pure of MCP: calls, verdicts and the ``ClarosApi`` protocol in; the session module turns
verdicts into MCP results.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio
import anyio.abc
import orjson

from claros_guard.api import ClarosApi, Report, is_need, outcome_report, unchecked_report
from claros_guard.errors import (
    ClarosRefusedError,
    ClarosUnavailableError,
    GuardError,
    ReadFailedError,
    RecordTooLargeError,
)
from claros_guard.needs import NeedResolver
from claros_guard.read_ahead import ReadAhead
from claros_guard.records import error_text

__all__ = ["ASK_WAIT", "Call", "Policy", "ProgressFn", "Verdict", "outcome_of"]

log = logging.getLogger("claros_guard.policy")

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
MAX_ROUNDS = 5
# What Claros takes of the records and values read for one check (its MAX_FETCHED_BYTES,
# fetching-facts' "fetched" as canonical JSON): more fails the read here, with the reason.
MAX_FETCHED_BYTES = 512 * 1024
ASK_WAIT = 120.0  # seconds a call waits for an answer to its ask, guard and hooks alike


@dataclass(frozen=True)
class Call:
    app: str
    tool: str
    arguments: dict[str, Any]
    agent: dict[str, Any]

    def digest(self) -> str:
        text = json.dumps([self.app, self.tool, self.arguments], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Verdict:
    """What to do with a call: forward it (and report how it went) or refuse it."""

    forward: bool
    result: str  # allow, nudge, ask, stop, error (blocked by a failure), unchecked
    message: str | None = None  # the tool error when refused
    notes: list[str] = field(default_factory=list)  # nudge messages for the agent
    check_id: str | None = None  # the check whose outcome to report
    unchecked: str | None = None  # why it was forwarded without a check (fail-open)
    # The enforced rules with a ``when`` that applied to the call: they read its facts by
    # name, so a value under another name passes them (session._checked_answer).
    by_name: tuple[str, ...] = ()


@dataclass
class _PendingAsk:
    ask_id: str
    routed_to: list[str]
    expires_at: int
    messages: list[dict[str, str]]


def _rules_text(messages: Any) -> str:
    items = [
        f"{m.get('rule_id')}: {str(m.get('message')).rstrip('.')}"
        for m in messages or []
        if isinstance(m, Mapping) and m.get("rule_id")
    ]
    return "; ".join(items) or "a rule"


def _by_name(answer: Mapping[str, Any]) -> tuple[str, ...]:
    """The enforced rules with a ``when`` among those that applied to a check (its
    ``rules[]``: an entry of such a rule says whether it ``matched``; a judged one, whether
    it was ``judged``)."""
    return tuple(
        str(entry.get("id"))
        for entry in answer.get("rules") or []
        if isinstance(entry, Mapping) and "matched" in entry
        and entry.get("mode", "enforce") == "enforce"
    )  # fmt: skip


def _when(ms: Any) -> str:
    try:
        return dt.datetime.fromtimestamp(int(ms) / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError):
        return "it expires"


def _who(routed_to: list[str]) -> str:
    return ", ".join(routed_to) or "the workspace admins"


def blocked_message(exc: GuardError) -> str:
    if isinstance(exc, ClarosUnavailableError):
        return (
            f"Blocked: Claros could not check this call ({exc}). The call was not run; try "
            "again when Claros is reachable."
        )
    if isinstance(exc, ClarosRefusedError):
        return f"Blocked: {exc}. The call was not run."
    if isinstance(exc, ReadFailedError):
        return (
            f"Blocked: Claros needs facts the guard could not read ({exc}). The call was not run."
        )
    return f"Blocked: {exc}. The call was not run."


def _non_finite(value: Any, path: str) -> str | None:
    """Where in ``value`` a NaN or an infinity is (``fetch.order.total is nan``), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{path} is {value}"
    if isinstance(value, dict):
        named = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, list):
        named = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for where, item in named:
        found = _non_finite(item, where)
        if found is not None:
            return found
    return None


def _unsendable(fetched: Mapping[str, Any]) -> ReadFailedError | None:
    """The failed read for a ``fetched`` answer JSON cannot carry (a NaN or an infinity:
    tests/security/test_record_holds_a_number_json_has_not.py); None when none is."""
    for key, value in fetched.items():
        found = _non_finite(value, key)
        if found is not None:
            return ReadFailedError(
                f"{found}, which is no number JSON can carry: the read cannot be checked on"
            )
    return None


def _too_large(fetched: Mapping[str, Any]) -> RecordTooLargeError | None:
    """The failed read for answers larger than Claros takes, naming the largest; None when
    they are not (the refusal was about something else). Worked out only after Claros (or
    the client's body limit) refused the check, so a check that fits costs nothing here
    (tests/security/test_bulky_record_stalls_the_guard.py)."""
    try:
        sizes = {k: len(orjson.dumps(v, default=str)) for k, v in fetched.items()}
    except (TypeError, orjson.JSONEncodeError):
        return None
    if sum(sizes.values()) <= MAX_FETCHED_BYTES:
        return None
    largest = max(sizes, key=lambda k: sizes[k])
    return RecordTooLargeError(
        f"{largest} read {sizes[largest]:,} bytes of records for this check, and Claros takes "
        f"at most {MAX_FETCHED_BYTES:,} bytes: the record is too large to be checked on"
    )


class Policy:
    def __init__(
        self,
        api: ClarosApi,
        resolver: NeedResolver,
        *,
        fail_open: bool = False,
        ask_wait: float = ASK_WAIT,
        poll_interval: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.resolver = resolver
        self.fail_open = fail_open
        self.ask_wait = ask_wait
        self.poll_interval = poll_interval
        self.clock = clock
        self._asks: dict[str, _PendingAsk] = {}
        self.ahead = ReadAhead()  # fetch templates, to read a record before the check

    async def decide(self, call: Call, progress: ProgressFn | None = None) -> Verdict:
        try:
            pending = self._pending(call)
            if pending is not None:
                return await self._after_ask(call, pending, progress)
            return await self._verdict(call, await self._check(call), progress)
        except GuardError as exc:
            if exc.blocks_unless_fail_open and self.fail_open:
                log.warning(
                    "forwarding %s %s unchecked (--fail-open): %s", call.app, call.tool, exc
                )
                return Verdict(forward=True, result="unchecked", unchecked=str(exc)[:500])
            return Verdict(forward=False, result="error", message=blocked_message(exc))

    async def _check(self, call: Call, approval: str | None = None) -> dict[str, Any]:
        fetched: dict[str, Any] = {}
        fetched_with = await self._read_ahead(call, fetched)
        for _ in range(MAX_ROUNDS):
            body: dict[str, Any] = {
                "app": call.app,
                "tool": call.tool,
                "arguments": call.arguments,
                "agent": call.agent,
            }
            if fetched:
                body["fetched"] = fetched
            if fetched_with is not None:
                body["fetched_with"] = fetched_with
            if approval:
                body["approval"] = approval
            try:
                answer = await self.api.check(body)
            except ClarosRefusedError as exc:  # a 413, or the 400 of "fetched is larger"
                failed_size = _too_large(fetched) if fetched and exc.status in (400, 413) else None
                if failed_size is None:
                    raise
                raise failed_size from exc
            except ValueError as exc:
                # JSON has no NaN or infinity (the agent's arguments cannot hold one: shape);
                # a read can ("NaN" in a Python app's JSON text, 1e999 read as infinity).
                failed = _unsendable(fetched)
                if failed is None:
                    raise
                raise failed from exc
            if answer.get("fetch_stale"):
                # Claros set aside everything read (the mapping changed since the read
                # ahead): what it needs now comes in this answer, as for a first check.
                fetched, fetched_with = {}, None
                self.ahead.forget(call.app, call.tool)
            if not is_need(answer):
                return answer
            needs = answer.get("need")
            if not isinstance(needs, list) or not needs:
                raise ReadFailedError("Claros asked for reads but named none")
            fetched.update(await self.resolver.resolve(needs))
            # Kept once read: a read that fails is not worth running ahead next time.
            self.ahead.learn(call.app, call.tool, call.arguments, needs)
        raise ReadFailedError(f"Claros still needed reads after {MAX_ROUNDS} rounds")

    async def _read_ahead(self, call: Call, fetched: dict[str, Any]) -> dict[str, Any] | None:
        """Run the fetch Claros asked for on an earlier call of this tool, before the first
        check (``read_ahead``); the read it ran, or None. A read that fails is dropped: the
        check then goes without it, and Claros asks for what it needs as always."""
        read = self.ahead.read_for(call.app, call.tool, call.arguments)
        if read is None:
            return None
        need = {"key": "fetch", "kind": "fetch", **read}
        try:
            fetched.update(await self.resolver.resolve([need]))
        except GuardError as exc:
            log.info("%s %s: the read ahead failed (%s); checking without it", call.app,
                     call.tool, exc)  # fmt: skip
            self.ahead.forget(call.app, call.tool)
            return None
        return read

    async def _verdict(
        self, call: Call, answer: dict[str, Any], progress: ProgressFn | None
    ) -> Verdict:
        result = str(answer.get("result"))
        check_id = answer.get("check_id")
        messages = answer.get("messages") or []
        if result == "allow":
            return Verdict(forward=True, result=result, check_id=check_id,
                           by_name=_by_name(answer))  # fmt: skip
        if result == "nudge":
            notes = [
                f"Claros ({m.get('rule_id')}): {m.get('message')}"
                for m in messages
                if isinstance(m, Mapping)
            ]
            return Verdict(forward=True, result=result, check_id=check_id, notes=notes,
                           by_name=_by_name(answer))  # fmt: skip
        if result == "stop":
            return Verdict(
                forward=False,
                result=result,
                check_id=check_id,
                message=f"Blocked by Claros rule {_rules_text(messages)}. The call was not "
                f"run (check {check_id}).",
            )
        if result == "ask":
            ask = answer.get("ask") or {}
            pending = _PendingAsk(
                ask_id=str(ask.get("ask_id")),
                routed_to=[str(p) for p in ask.get("routed_to") or []],
                expires_at=int(ask.get("expires_at") or 0),
                messages=list(messages),
            )
            self._asks[call.digest()] = pending
            return await self._after_ask(call, pending, progress)
        raise ClarosUnavailableError(f"Claros answered an unknown result {result!r}")

    def _pending(self, call: Call) -> _PendingAsk | None:
        if not self._asks:  # nothing waits on an ask: no digest to work out per call
            return None
        key = call.digest()
        pending = self._asks.get(key)
        if pending is not None and pending.expires_at and pending.expires_at < self.clock() * 1000:
            del self._asks[key]
            return None
        return pending

    async def _wait(self, pending: _PendingAsk, progress: ProgressFn | None) -> dict[str, Any]:
        """The ask's view once it is no longer open, or its last view when the wait ends."""
        start = anyio.current_time()
        deadline = start + self.ask_wait
        view: dict[str, Any] = {"status": "open"}
        who = _who(pending.routed_to)
        while True:
            try:
                view = await self.api.ask(pending.ask_id)
            except ClarosUnavailableError as exc:
                log.warning("cannot learn the answer to %s yet: %s", pending.ask_id, exc)
            if view.get("status", "open") != "open":
                return view
            now = anyio.current_time()
            if now >= deadline:
                return view
            if progress is not None:
                await progress(
                    round(now - start, 3),
                    self.ask_wait,
                    f"Waiting for {who} to approve (Claros ask {pending.ask_id})",
                )
            await anyio.sleep(min(self.poll_interval, deadline - now))

    async def _after_ask(
        self, call: Call, pending: _PendingAsk, progress: ProgressFn | None
    ) -> Verdict:
        view = await self._wait(pending, progress)
        status = view.get("status", "open")
        rules = _rules_text(pending.messages)
        if status == "open":
            return Verdict(
                forward=False,
                result="ask",
                message=(
                    f"Waiting for approval: Claros asked {_who(pending.routed_to)} to approve "
                    f"this call (rule {rules}). It was not run. Call the tool again with the "
                    f"same arguments once they have approved; the question stays open until "
                    f"{_when(pending.expires_at)} (ask {pending.ask_id})."
                ),
            )
        self._asks.pop(call.digest(), None)
        if status == "approved":
            answer = await self._check(call, approval=pending.ask_id)
            if answer.get("result") == "ask":
                raise ClarosRefusedError(409, "the approval was not accepted; ask again")
            return await self._verdict(call, answer, progress)
        if status == "denied":
            note = f" Their note: {view['note']}" if view.get("note") else ""
            return Verdict(
                forward=False,
                result="ask",
                message=(
                    f"Not approved: {view.get('decided_by') or _who(pending.routed_to)} denied "
                    f"this call (rule {rules}). It was not run.{note}"
                ),
            )
        return Verdict(
            forward=False,
            result="ask",
            message=(
                f"The question to {_who(pending.routed_to)} ({pending.ask_id}) is {status}; the "
                "call was not run. Call the tool again to ask again."
            ),
        )

    def export_asks(self) -> dict[str, Any]:
        """Open questions by call, as JSON (a hook process keeps them between runs)."""
        now = self.clock() * 1000
        return {k: asdict(v) for k, v in self._asks.items() if v.expires_at > now}

    def import_asks(self, data: Mapping[str, Any]) -> None:
        for key, value in data.items():
            try:
                self._asks[str(key)] = _PendingAsk(
                    ask_id=str(value["ask_id"]),
                    routed_to=[str(p) for p in value.get("routed_to") or []],
                    expires_at=int(value["expires_at"]),
                    messages=list(value.get("messages") or []),
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                continue

    def report_for(
        self, call: Call, verdict: Verdict, status: str | None, summary: str | None
    ) -> Report | None:
        """The report to send once a forwarded call has run (None when there is none).
        ``status`` None: how it ended is not known yet (left out of the body)."""
        if verdict.check_id:
            what = f"outcome of {call.app} {call.tool}"
            return outcome_report(verdict.check_id, status or "ok", summary, what)
        if verdict.unchecked:
            body: dict[str, Any] = {
                "app": call.app,
                "tool": call.tool,
                "arguments": call.arguments,
                "agent": call.agent,
                "reason": verdict.unchecked,
            }
            what = f"unchecked call to {call.app} {call.tool}"
            return unchecked_report(body, what).with_outcome(status, summary)
        return None


def outcome_of(result: Mapping[str, Any] | None, error: str | None = None) -> tuple[str, str]:
    """(status, summary) of a call that ran: its result, or the error it ended with."""
    if error is not None or result is None:
        return "error", (error or "no result")[:300]
    if result.get("isError"):
        return "error", error_text(result)
    texts = error_text(result, 200)
    if texts == "no message":
        texts = "structured result" if result.get("structuredContent") is not None else "ok"
    return "ok", texts
