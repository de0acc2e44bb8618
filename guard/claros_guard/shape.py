"""What the guard lets in from the agent, before any MCP handling: one JSON-RPC 2.0 message
per line, in the shape MCP defines, or a JSON-RPC error naming what was refused and why.

A write must never reach the wrapped server unchecked because of its shape, so the guard
accepts only what it can classify exactly as it will forward it:

* one JSON object per line, UTF-8, no key twice, no NaN or Infinity, no number past a
  double (``1e400``, which Python reads as infinity); no batches (MCP sends
  one message per line, and the guard checks each message alone);
* an id that is a string or an integer (null, objects, fractions and booleans are not ids:
  the SDK would read such a request as a notification, and pass it on);
* a method MCP defines for clients, spelled as MCP spells it (methods are case-sensitive;
  a lenient server might run ``Tools/Call``), params that are an object;
* ``tools/call`` with a string ``name`` and, if any, ``arguments`` that are an object,
  not asking to run as a task (``task``: the write would go on after its answer, out of
  the guard's sight), and no answers carried in its params (``inputResponses``,
  ``requestState``: the 2026-07-28 flow, whose answers the check would not see), and
  no field besides ``name``, ``arguments`` and ``_meta`` (one MCP adds later may carry
  what the call does);
* a request id that is not still in flight (``InFlight``).

Refused requests are answered here, under their id when they have a usable one and under
``null`` when not (JSON-RPC's rule); refused notifications cannot be answered and are
logged. ``screened`` puts this between a transport and the session's dispatcher.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import typing
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR
from pydantic import ValidationError

from claros_guard.surrogates import holds_lone_surrogate, may_hold_lone_surrogate

__all__ = [
    "CLIENT_NOTIFICATIONS",
    "CLIENT_REQUESTS",
    "InFlight",
    "Refusal",
    "SERVER_REQUESTS",
    "parse_line",
    "refused",
    "screen",
    "screened",
    "too_long",
    "tool_call_problem",
    "unknown_why",
]

log = logging.getLogger("claros_guard.shape")

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]
RequestId = int | str


def _methods(union: Any) -> frozenset[str]:
    """The method names of an SDK union of request or notification types."""
    names: set[str] = set()
    for model in typing.get_args(union):
        names.update(typing.get_args(model.model_fields["method"].annotation))
    return frozenset(names)


CLIENT_REQUESTS = _methods(types.ClientRequest)
CLIENT_NOTIFICATIONS = _methods(types.ClientNotification)
# What a server may ask its client (ping, sampling, elicitation, roots); the guard relays
# nothing else to the agent (tasks/result would carry an answer no check sees).
SERVER_REQUESTS = _methods(types.ServerRequest)
_FOLDED = {m.casefold(): m for m in CLIENT_REQUESTS | CLIENT_NOTIFICATIONS}


def refused(what: str, why: str) -> str:
    return f"Refused by the Claros guard: {what}: {why}. It was not sent to the server."


class Refusal(Exception):
    """A message the guard does not let in. ``id`` is the request's, when usable;
    ``answer`` is false for notifications (nothing may answer those)."""

    def __init__(
        self, id: RequestId | None, code: int, what: str, why: str, *, answer: bool = True
    ) -> None:
        super().__init__(refused(what, why))
        self.id = id
        self.code = code
        self.message = refused(what, why)
        self.answer = answer

    def error(self) -> SessionMessage:
        error = types.ErrorData(code=self.code, message=self.message)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=self.id, error=error))


def too_long(limit: int) -> Refusal:
    return Refusal(
        None,
        INVALID_REQUEST,
        f"a message longer than {limit} bytes",
        "the guard cannot read it whole, so it cannot check it",
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _TooLarge(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent as Python reads it, unless it is past a
    double (``1e400``): Python reads that as infinity, which no JSON writer writes, so the
    guard could not ask Claros about the call; another reader takes it as a huge number."""
    value = float(text)
    if value in (math.inf, -math.inf):
        raise _TooLarge(text)
    return value


def _too_large(text: str, exc: _TooLarge) -> Refusal:
    """The refusal of a message holding a number past a double, under its id when it has a
    usable one (read again with exact numbers, only to find it)."""
    shown = exc.text if len(exc.text) <= 40 else exc.text[:39] + "…"
    try:
        value = json.loads(text, object_pairs_hook=_object, parse_float=Decimal)
        id = _id(value) if isinstance(value, dict) else None
    except (ValueError, Refusal):
        id = None
    return Refusal(
        id,
        INVALID_PARAMS,
        f"a number too large for a double ({shown})",
        "readers disagree on it (infinity to one, a huge number to another), so the guard "
        "cannot check the call the server would run",
    )


def parse_line(line: bytes) -> SessionMessage:
    """One line from the agent as a message; raises ``Refusal``."""
    try:
        text = line.decode("utf-8")
        value = json.loads(
            text, object_pairs_hook=_object, parse_constant=_no_constant, parse_float=_finite
        )
    except _TooLarge as exc:
        raise _too_large(text, exc) from exc
    except UnicodeDecodeError as exc:
        raise Refusal(None, PARSE_ERROR, "a line that is not UTF-8", str(exc)) from exc
    except _DuplicateKey as exc:
        raise Refusal(
            None,
            INVALID_REQUEST,
            f"a message with the key {exc.key!r} twice",
            "readers disagree on which one counts, so the guard reads neither",
        ) from exc
    except ValueError as exc:
        raise Refusal(None, PARSE_ERROR, "a line that is not JSON", str(exc)) from exc
    if may_hold_lone_surrogate(line) and holds_lone_surrogate(value):
        raise _lone_surrogate(value)
    return screen(value)


def _lone_surrogate(value: Any) -> Refusal:
    id = value.get("id") if isinstance(value, dict) else None
    usable = isinstance(id, int | str) and not isinstance(id, bool)
    if not usable or holds_lone_surrogate(id):
        id = None
    return Refusal(
        id,
        INVALID_PARAMS,
        "a string holding half of a surrogate pair (an unpaired \\uD800-\\uDFFF)",
        "it is not Unicode text, and the guard could not send it on to the server",
    )


def screen(value: Any) -> SessionMessage:
    """A parsed JSON value as a message; raises ``Refusal``."""
    if isinstance(value, list):
        raise Refusal(
            None,
            INVALID_REQUEST,
            "a JSON-RPC batch (an array of messages)",
            "MCP sends one message per line, and the guard checks each message alone",
        )
    if not isinstance(value, dict):
        raise Refusal(
            None, INVALID_REQUEST, f"a line holding {_kind(value)}", "a message is a JSON object"
        )
    id = _id(value)
    if "method" in value:
        if id is None:
            _screen_notification(value)
        else:
            _screen_request(value, id)
    try:
        message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "the message"
        raise Refusal(
            id, INVALID_REQUEST, "a message that is not JSON-RPC 2.0", f"{where}: {first['msg']}"
        ) from exc
    return SessionMessage(message)


def _id(value: dict[str, Any]) -> RequestId | None:
    if "id" not in value:
        return None
    id = value["id"]
    if isinstance(id, bool) or not isinstance(id, int | str):
        raise Refusal(
            None,
            INVALID_REQUEST,
            f"a message whose id is {_kind(id)}",
            "an id is a string or an integer (without one, a message is a notification, "
            "and a notification never runs a tool)",
        )
    return id


def _method(value: dict[str, Any], id: RequestId | None) -> str:
    method = value["method"]
    if not isinstance(method, str):
        raise Refusal(
            id, INVALID_REQUEST, f"a method that is {_kind(method)}", "a method is a string"
        )
    return method


def _screen_notification(value: dict[str, Any]) -> None:
    method = _method(value, None)
    if method in CLIENT_REQUESTS or _FOLDED.get(method.casefold()) in CLIENT_REQUESTS:
        raise Refusal(
            None,
            INVALID_REQUEST,
            f"{method} without an id",
            "a request needs an id, a string or an integer; it cannot be sent as a notification",
        )
    if method not in CLIENT_NOTIFICATIONS:
        raise Refusal(
            None,
            METHOD_NOT_FOUND,
            f"the notification {method!r}",
            unknown_why(method),
            answer=False,
        )
    params = value.get("params")
    if "params" in value and not isinstance(params, dict):
        raise Refusal(
            None,
            INVALID_PARAMS,
            f"params of {method} that are {_kind(params)}",
            "params are a JSON object",
            answer=False,
        )


def unknown_why(method: str) -> str:
    known = _FOLDED.get(method.casefold())
    if known is not None:
        return (
            f"MCP spells it {known!r}, and its methods are case-sensitive; the guard forwards "
            "only the methods MCP defines, in their own case"
        )
    return "the guard forwards only the methods MCP defines for clients, and this is not one"


def _screen_request(value: dict[str, Any], id: RequestId) -> None:
    method = _method(value, id)
    if "result" in value or "error" in value:
        raise Refusal(
            id,
            INVALID_REQUEST,
            f"a {method} request that also carries a result or an error",
            "a message is a request or a response, never both",
        )
    if method not in CLIENT_REQUESTS:
        raise Refusal(id, METHOD_NOT_FOUND, f"the method {method!r}", unknown_why(method))
    params = value.get("params")
    if "params" in value and not isinstance(params, dict):
        raise Refusal(
            id,
            INVALID_PARAMS,
            f"params of {method} that are {_kind(params)}",
            "params are a JSON object",
        )
    if method == "tools/call":
        problem = tool_call_problem(params)
        if problem is not None:
            raise Refusal(id, INVALID_PARAMS, *problem)


def tool_call_problem(params: Any) -> tuple[str, str] | None:
    """What is wrong with a ``tools/call``'s params (what, why), or None."""
    if not isinstance(params, dict):
        return "a tools/call without params", "it needs params naming the tool"
    if "name" not in params:
        return "a tools/call without a tool name", "params.name is missing"
    name = params["name"]
    if not isinstance(name, str):
        return f"a tools/call whose name is {_kind(name)}", "a tool's name is a string"
    arguments = params.get("arguments")
    if "arguments" in params and not isinstance(arguments, dict):
        return (
            f"a tools/call of {name} whose arguments are {_kind(arguments)}",
            "arguments are a JSON object",
        )
    if "task" in params:
        return (
            f"a tools/call of {name} asking to run as a task",
            "a task goes on after the call is answered, where the guard cannot check the "
            "answers to the questions it asks nor report how it ended, and the guard does "
            "not relay tasks",
        )
    carried = [field for field in _ANSWERS_IN_PARAMS if field in params]
    if carried:
        return (
            f"a tools/call of {name} carrying {' and '.join(carried)}",
            "answers to a server's questions sent with the call (MCP 2026-07-28), which the "
            "guard does not speak: the server would use values no check saw. A question a "
            "server asks goes over elicitation/create, where its answer is checked",
        )
    others = sorted(field for field in params if field not in _CALL_FIELDS)
    if others:
        shown = ", ".join(repr(field[:64]) for field in others[:5])
        return (
            f"a tools/call of {name} carrying {shown}{' and more' if len(others) > 5 else ''}",
            "the guard forwards a tools/call's name, arguments and _meta only: another "
            "field may say what the call does (as task and inputResponses do), and no check "
            "would see it",
        )
    return None


# Where the 2026-07-28 multi-round-trip flow puts a client's answers (and the server's
# state holding earlier ones) in a request's params; the SDK's server hands them to the
# tool (``ctx.input_responses``) on a 2025-11-25 connection too.
_ANSWERS_IN_PARAMS = ("inputResponses", "requestState")
# Every other field of a tools/call's params is refused, not forwarded: the two above
# were each a way past the check once a version of MCP gave them a meaning, and the next
# field a version adds may be another (fail closed; the guard learns a field when it can
# check it).
_CALL_FIELDS = frozenset({"name", "arguments", "_meta"})


class InFlight:
    """Request ids the agent sent that are not answered yet: a second request with one of
    them is refused (JSON-RPC ids name one request; the SDK's dispatcher would let the
    second replace the first, whose cancellation would then be lost). ``"7"`` and ``7``
    are one id, as the dispatcher correlates them."""

    def __init__(self) -> None:
        self._ids: set[RequestId] = set()

    def admit(self, message: SessionMessage) -> None:
        inner = message.message
        if isinstance(inner, types.JSONRPCRequest):
            key = coerce_request_id(inner.id)
            if key in self._ids:
                raise Refusal(
                    inner.id,
                    INVALID_REQUEST,
                    f"request id {inner.id!r}, already in flight",
                    "a request id names one request until it is answered",
                )
            self._ids.add(key)
        elif isinstance(inner, types.JSONRPCNotification) and inner.method == (
            "notifications/cancelled"
        ):
            # A cancelled request is never answered; its id may be used again.
            rid = (inner.params or {}).get("requestId")
            if isinstance(rid, int | str) and not isinstance(rid, bool):
                self._ids.discard(coerce_request_id(rid))

    def settle(self, message: SessionMessage) -> None:
        inner = message.message
        if isinstance(inner, types.JSONRPCResponse | types.JSONRPCError) and inner.id is not None:
            self._ids.discard(coerce_request_id(inner.id))

    def __len__(self) -> int:
        return len(self._ids)


def _admitted(flight: InFlight, item: SessionMessage | Exception) -> Refusal | None:
    """None when ``item`` may go on; else why not."""
    if isinstance(item, Refusal):
        return item
    if isinstance(item, Exception):
        return Refusal(None, INVALID_REQUEST, "a message the guard cannot read", str(item)[:200])
    try:
        flight.admit(item)
    except Refusal as refusal:
        return refusal
    return None


@contextlib.asynccontextmanager
async def screened(read: ReadStream, write: WriteStream) -> AsyncIterator[tuple[Any, Any]]:
    """``read``/``write`` with every message from the agent screened: what passes goes on
    to the returned read stream; what does not is answered on ``write`` directly."""
    in_send, in_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](0)
    flight = InFlight()
    refusals = write.clone()

    async def pump_in() -> None:
        async with in_send, refusals:
            async for item in read:
                refusal = _admitted(flight, item)
                if refusal is None:
                    await in_send.send(item)
                    continue
                log.warning("%s", refusal.message)
                if refusal.answer:
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await refusals.send(refusal.error())

    async def pump_out() -> None:
        async with out_receive, write:
            async for message in out_receive:
                flight.settle(message)  # before it is sent: the agent may reuse the id at once
                await write.send(message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump_in)
        tg.start_soon(pump_out)
        try:
            yield in_receive, out_send
        finally:
            tg.cancel_scope.cancel()
            for stream in (in_send, in_receive, out_send, out_receive):
                stream.close()
