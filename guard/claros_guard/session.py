"""The agent's MCP session with the guard, the handshake protocol era (2025-11-25 and
earlier). A client that probes the 2026-07-28 protocol (``server/discover``) is told the
method is not found and falls back to the handshake, as the SDK client does.

Everything is relayed as JSON-RPC, params rebuilt without the caller's envelope
(``upstream.forward_params``): requests and their results, errors, progress (under the
agent's own token), cancellation (the dispatcher cancels the forwarded request), the
server's notifications (logging, list changes, resource updates) and its requests to the
client (sampling, elicitation, roots), which wait for the agent's ``initialized``.

One method is not only relayed: ``tools/call`` of a tool that is not a read goes through
the check policy first (``policy.Policy``), and its outcome is reported after it ran.

A question the server asks while a checked write runs (``elicitation/create``) is the
write asking for more of its values: the agent's answer is checked as part of that write
(its fields over the call's arguments of the same name) and given to the server only
when that check lets the write go (``_checked_answer``; docs/guard.md, "Questions a write
asks"; tests/security/test_agent_corrects_the_write_after_its_check.py). A field of the
question's own name that holds a value is withheld when a rule reads the write's arguments
by name (``answers.unread_fields``;
tests/security/test_agent_answers_under_a_name_no_rule_reads.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND

from claros_guard.answers import unread_fields
from claros_guard.app import GuardedApp
from claros_guard.errors import GuardError, UpstreamError
from claros_guard.identity import agent_info, new_call_id, new_session
from claros_guard.policy import Call, Verdict, outcome_of
from claros_guard.shape import (
    CLIENT_NOTIFICATIONS,
    CLIENT_REQUESTS,
    refused,
    tool_call_problem,
    unknown_why,
)
from claros_guard.transport import ReadStream, WriteStream
from claros_guard.upstream import forward_params, without_tasks

__all__ = ["AgentSession", "tool_error"]

log = logging.getLogger("claros_guard.session")

Ctx = DispatchContext[TransportContext]
_LOCAL_NOTIFICATIONS = frozenset({"notifications/initialized", "notifications/cancelled"})
_INITIALIZED_WAIT = 30.0
_RESTART = "Restart this MCP server in your client if it keeps failing."


@dataclass
class _Write:
    """A checked write while it runs: the checks of the answers it was given (each with
    its verdict, reported with the write's outcome) and the refusals to tell the agent.
    ``ended`` once its outcome is reported: an answer checked after that is reported on
    its own."""

    call: Call
    verdict: Verdict
    answered: list[tuple[Call, Verdict]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ended: bool = False


def tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


class AgentSession:
    def __init__(self, app: GuardedApp, read: ReadStream, write: WriteStream) -> None:
        self.app = app
        self.dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
            read, write, inline_methods=frozenset({"initialize"})
        )
        self.session = new_session()
        self.client_info: dict[str, Any] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.agent: dict[str, Any] = agent_info(None, self.session)
        self.initialized = anyio.Event()  # the agent sent notifications/initialized
        self._answered_initialize = False
        self._writes: dict[int, _Write] = {}  # checked writes running, by id()

    async def run(self) -> None:
        upstream = self.app.upstream
        upstream.notify_agent = self._to_agent_notify
        upstream.request_agent = self._to_agent_request
        try:
            await self.dispatcher.run(self._on_request, self._on_notify)
        finally:
            upstream.notify_agent = None
            upstream.request_agent = None

    # -- from the agent ------------------------------------------------------------------

    async def _on_request(
        self, dctx: Ctx, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        # Reports wait while a call is in flight (Reporter.busy): they would compete for
        # the machine with its check, the wrapped server and this guard.
        with self.app.reporter.busy():
            return await self._handle(dctx, method, params)

    async def _handle(
        self, dctx: Ctx, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method == "initialize":
            return await self._initialize(params or {})
        if method == "ping":
            return {}
        if method == "server/discover":
            raise MCPError(METHOD_NOT_FOUND, "Method not found", method)
        if not self._answered_initialize:
            raise MCPError(INVALID_REQUEST, "initialize first")
        if method not in CLIENT_REQUESTS:  # also screened at the wire (shape.screened)
            raise MCPError(METHOD_NOT_FOUND, refused(f"the method {method!r}", unknown_why(method)))
        try:
            if method == "tools/call":
                problem = tool_call_problem(params)
                if problem is not None:
                    raise MCPError(INVALID_PARAMS, refused(*problem))
                return await self._call_tool(dctx, params or {})
            return await self._forward(dctx, method, params)
        except UpstreamError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc

    async def _initialize(self, params: Mapping[str, Any]) -> dict[str, Any]:
        info = params.get("clientInfo")
        self.client_info = dict(info) if isinstance(info, Mapping) else {}
        caps = params.get("capabilities")
        self.client_capabilities = dict(caps) if isinstance(caps, Mapping) else {}
        self.agent = agent_info(self.client_info, self.session)
        self.app.agent_name = self.agent["name"]
        self.app.agent_hello.set()
        try:
            result = await self.app.initialize(dict(params))
        except GuardError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc
        self._answered_initialize = True
        return without_tasks(result)  # the guard refuses calls run as tasks (shape)

    async def _forward(
        self, dctx: Ctx, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        progress = dctx.progress if _has_progress_token(params) else None
        return await self.app.upstream.request(method, forward_params(params), on_progress=progress)

    async def _call_tool(self, dctx: Ctx, params: Mapping[str, Any]) -> dict[str, Any]:
        name = str(params["name"])  # a string: tool_call_problem said so
        if self.app.upstream.failure:
            return tool_error(f"The call was not run: {self.app.upstream.failure}. {_RESTART}")
        if not self.app.is_listed(name):
            # The server may find another of its tools by this name (in another case, with
            # ``-`` for ``_``, NFKC-normalised, trimmed): the guard could check neither
            # the tool it runs nor a rule on it, so it sends none.
            raise MCPError(
                INVALID_PARAMS,
                refused(
                    f"a tools/call of {name!r}",
                    "the wrapped server listed no tool by exactly this name (tools/list), "
                    "and a server may run another tool for it than the one checked",
                ),
            )
        if self.app.is_read_tool(name):
            try:
                return await self._forward(dctx, "tools/call", params)
            except UpstreamError as exc:
                return tool_error(f"The call may not have run: {exc}. {_RESTART}")
        arguments = dict(params.get("arguments") or {})
        call = Call(self.app.name, name, arguments, {**self.agent, "call_id": new_call_id()})
        progress = dctx.progress if _has_progress_token(params) else None
        verdict = await self.app.policy.decide(call, progress)
        if not verdict.forward:
            return tool_error(verdict.message or "Blocked by Claros.")
        if self.app.upstream.failure:
            self._report(
                _Write(call, verdict), verdict, None, f"not run: {self.app.upstream.failure}"
            )
            return tool_error(f"The call was not run: {self.app.upstream.failure}. {_RESTART}")
        write = _Write(call, verdict)
        self._writes[id(write)] = write
        try:
            result = await self._forward(dctx, "tools/call", params)
        except MCPError as exc:
            self._report(write, verdict, None, f"the server answered an error: {exc.message}")
            raise
        except UpstreamError as exc:
            self._report(write, verdict, None, str(exc))
            return tool_error(f"The call may not have run: {exc}. {_RESTART}")
        except anyio.get_cancelled_exc_class():
            self._report(write, verdict, None, "cancelled by the agent while it ran")
            raise
        finally:
            del self._writes[id(write)]
            write.ended = True  # what is answered now misses the write's report
        self._report(write, verdict, result, None)
        return _with_notes(result, verdict, write.notes)

    def _report(
        self,
        write: _Write,
        verdict: Verdict,
        result: Mapping[str, Any] | None,
        error: str | None,
    ) -> None:
        status, summary = outcome_of(result, error)
        for call, its in [(write.call, verdict), *write.answered]:
            report = self.app.policy.report_for(call, its, status, summary)
            if report is not None:
                self.app.reporter.submit(report)

    async def _checked_answer(self, ask: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The agent's answer to a question asked while a checked write runs, given to the
        server only when the write with the answer's fields as its arguments is allowed.
        ``ask()`` puts the question to the agent."""
        if len(self._writes) > 1:
            # Over stdio a request does not say which call it belongs to.
            raise MCPError(
                INVALID_REQUEST,
                "elicitation/create refused: several checked writes are running, and the "
                "guard cannot tell which one asks, so it cannot check the answer with it",
            )
        [write] = self._writes.values()
        answer: dict[str, Any] = await ask()
        action, content = answer.get("action"), answer.get("content")
        if action in ("decline", "cancel"):
            # No value comes from the agent: none goes on (a server reading content
            # whatever the action would take it unchecked).
            return {k: v for k, v in answer.items() if k != "content"}
        if action != "accept" or not isinstance(content, Mapping | None):
            # Only an accept is checked: values under another spelling ("Accept", none)
            # reached a lenient server unchecked
            # (tests/security/test_agent_accepts_in_another_spelling.py).
            what = (
                f"its action is {_shown(action)}, not accept, decline or cancel"
                if action != "accept"
                else f"its content is {type(content).__name__}, not an object"
            )
            note = (
                f"Claros withheld the answer the server asked for: {what}, so the guard "
                f"cannot check it with {write.call.tool}"
            )
            write.notes.append(note)
            raise MCPError(INVALID_REQUEST, f"elicitation/create answer withheld. {note}")
        if content is None:
            return answer  # an accept with no fields: nothing the check did not see
        arguments = {**write.call.arguments, **content}
        if arguments == write.call.arguments:
            return answer  # nothing the check did not see
        unread = unread_fields(content, write.call.arguments, self._input_schema(write.call.tool))
        if unread and write.verdict.by_name:
            fields = ", ".join(repr(name) for name in unread)
            is_not = "is not an argument" if len(unread) == 1 else "are not arguments"
            note = (
                f"Claros withheld the answer the server asked for: its {fields} {is_not} of "
                f"{write.call.tool}, and rule {', '.join(write.verdict.by_name)} reads the "
                "write's arguments by name, so the server could use a value no rule saw "
                "(answer with the tool's argument names, or yes or no)"
            )
            write.notes.append(note)
            raise MCPError(INVALID_REQUEST, f"elicitation/create answer withheld. {note}")
        call = Call(write.call.app, write.call.tool, arguments,
                    {**write.call.agent, "call_id": new_call_id()})  # fmt: skip
        verdict = await self.app.policy.decide(call)
        if not verdict.forward:
            note = f"Claros checked the answer the server asked for: {verdict.message}"
            write.notes.append(note)
            raise MCPError(INVALID_REQUEST, f"elicitation/create answer withheld. {note}")
        if write.ended:
            # The write answered while its answer was checked (an ask waiting for a
            # person, a slow check): the check still gets its outcome, and the answer,
            # which no write waits for now, is not given.
            why = (
                f"the answer was not given to the server: {write.call.tool} had ended "
                "before the answer's check finished"
            )
            report = self.app.policy.report_for(call, verdict, "error", why)
            if report is not None:
                self.app.reporter.submit(report)
            raise MCPError(INVALID_REQUEST, f"elicitation/create answer withheld: {why}")
        write.answered.append((call, verdict))
        write.notes.extend(verdict.notes)
        return answer

    def _input_schema(self, tool: str) -> Any:
        return (self.app.upstream.tools.get(tool) or {}).get("inputSchema")

    async def _on_notify(self, dctx: Ctx, method: str, params: Mapping[str, Any] | None) -> None:
        if method == "notifications/initialized":
            self.initialized.set()
            return
        if method in _LOCAL_NOTIFICATIONS or not self._answered_initialize:
            return
        if method not in CLIENT_NOTIFICATIONS:  # also screened at the wire
            log.warning("%s", refused(f"the notification {method!r}", unknown_why(method)))
            return
        await self.app.upstream.notify(method, params)

    # -- from the wrapped server to the agent ----------------------------------------------------

    async def _to_agent_notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        if self._answered_initialize:
            await self.dispatcher.notify(method, params)

    async def _to_agent_request(
        self, method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        with anyio.move_on_after(_INITIALIZED_WAIT):
            await self.initialized.wait()
        if not self.initialized.is_set():
            raise MCPError(
                INVALID_REQUEST, f"the agent has not finished initializing; {method} was not sent"
            )
        if method == "elicitation/create" and self._writes:
            return await self._checked_answer(
                lambda: self.dispatcher.send_raw_request(method, params)
            )
        return await self.dispatcher.send_raw_request(method, params)


def _shown(value: Any) -> str:
    return "missing" if value is None else repr(value)[:40]


def _has_progress_token(params: Mapping[str, Any] | None) -> bool:
    meta = (params or {}).get("_meta")
    return isinstance(meta, Mapping) and meta.get("progressToken") is not None


def _with_notes(result: dict[str, Any], verdict: Verdict, more: list[str]) -> dict[str, Any]:
    if not verdict.notes and not more:  # the usual write: nothing to add
        return result
    notes = list(dict.fromkeys([*verdict.notes, *more]))  # a nudge the answer's check repeats
    content = list(result.get("content") or [])
    content += [{"type": "text", "text": note} for note in notes]
    return {**result, "content": content}
