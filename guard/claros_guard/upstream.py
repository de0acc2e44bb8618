"""The wrapped server: one MCP client connection, carried as raw JSON-RPC.

The guard is the wrapped server's only client. It initializes the server with the
agent's own ``initialize`` (protocol version, capabilities, client info) when the agent
connects within ``start_wait`` seconds, so negotiation is end to end; otherwise (a guard
that serves only other guards, or an agent that is late) it initializes with its own.
Requests are forwarded as JSON (``JSONRPCDispatcher``, the SDK's MCP-agnostic layer), so
fields the guard does not know pass through untouched.

What the server sends on its own goes to ``notify_agent`` / ``request_agent``, set by the
agent's session (of its requests, only those MCP lets a server ask, none asked as a task:
the guard relays no tasks, and leaves the ``tasks`` capability out of ``initialize``);
``tools/list_changed`` also refreshes the tool table and calls ``tools_changed`` (the
guard registers the tools with Claros again). A request the server
sends while a read of the guard's own runs (``call_read``: a check's facts) is refused,
never relayed: over stdio it cannot be told which call it belongs to, and the agent never
sees the guard's reads, nor answers for them (elicitation picking the record read,
sampling writing it: tests/security/test_agent_answers_the_guards_own_read.py). Its log
messages (``notifications/message``) are kept from the agent for the same reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.abc
from mcp.shared.dispatcher import CallOptions, DispatchContext, ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, METHOD_NOT_FOUND
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from claros_guard import VERSION
from claros_guard.errors import ReadFailedError, RecordTooLargeError, UpstreamError
from claros_guard.shape import SERVER_REQUESTS
from claros_guard.transport import MAX_LINE, UpstreamSpec, describe_bad_message, upstream

__all__ = ["Upstream", "forward_params", "without_tasks"]

log = logging.getLogger("claros_guard.upstream")

_ENVELOPE = "io.modelcontextprotocol/"
_MAX_TOOL_PAGES = 100
_BAD_SHOWN = 5  # lines that are not JSON-RPC logged one by one; then a count now and then
_BAD_EVERY = 1000

NotifyFn = Callable[[str, Mapping[str, Any] | None], Awaitable[None]]
RequestFn = Callable[[str, Mapping[str, Any] | None], Awaitable[dict[str, Any]]]


def without_tasks(params: Mapping[str, Any]) -> dict[str, Any]:
    """``initialize`` params or result less the ``tasks`` capability: the guard relays no
    tasks (tasks/*), so neither side may run the other's requests as tasks. A question a
    server asked as a task was answered with the task, and its values came later as the
    answer to ``tasks/result``, where no check looked
    (tests/security/test_agent_answers_the_writes_question_as_a_task.py)."""
    out = dict(params)
    capabilities = out.get("capabilities")
    if isinstance(capabilities, Mapping) and "tasks" in capabilities:
        out["capabilities"] = {k: v for k, v in capabilities.items() if k != "tasks"}
    return out


def forward_params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Params to send on: a copy without the caller's protocol envelope in ``_meta``
    (``io.modelcontextprotocol/*``) and without its ``progressToken`` (the dispatcher puts
    its own, and progress is relayed back under the caller's)."""
    if params is None:
        return None
    out = dict(params)
    meta = out.pop("_meta", None)
    if isinstance(meta, Mapping):
        kept = {
            k: v for k, v in meta.items() if k != "progressToken" and not k.startswith(_ENVELOPE)
        }
        if kept:
            out["_meta"] = kept
    return out


class Upstream:
    def __init__(
        self,
        app: str,
        spec: UpstreamSpec,
        *,
        start_timeout: float = 60.0,
        read_timeout: float = 30.0,
    ) -> None:
        self.app = app
        self.spec = spec
        self.start_timeout = start_timeout
        self.read_timeout = read_timeout
        self.result: dict[str, Any] | None = None
        self.version = LATEST_HANDSHAKE_VERSION
        self.tools: dict[str, dict[str, Any]] = {}
        self.failure: str | None = None
        self.ready = anyio.Event()  # initialized, or failed
        self.closed = anyio.Event()
        self.hurry = anyio.Event()  # set: stop the server without the full grace periods
        self.notify_agent: NotifyFn | None = None
        self.request_agent: RequestFn | None = None
        self.tools_changed: Callable[[], Awaitable[None]] | None = None
        self._dispatcher: JSONRPCDispatcher[TransportContext] | None = None
        self._connected = anyio.Event()
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self.bad_messages = 0
        self.own_reads = 0  # reads of the guard's own (call_read) now running
        self.too_long = 0  # messages dropped for their length (transport.MAX_LINE)

    # -- lifecycle ---------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Spawn (or connect to) the server and carry messages until it goes away."""
        started = False
        try:
            async with upstream(self.spec, self.hurry) as (read, write):
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read, write, on_stream_exception=self._bad_message
                )
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    await tg.start(self._carry, dispatcher)
                    self._dispatcher = dispatcher
                    self._connected.set()
                    task_status.started()
                    started = True
            self._fail(f"the wrapped server ({self.spec.describe()}) closed the connection")
        except Exception as exc:
            self._fail(f"the wrapped server ({self.spec.describe()}) could not be started: {exc}")
        finally:
            if self.bad_messages > _BAD_SHOWN:
                log.warning(
                    "%s: %d messages that are not JSON-RPC skipped in all",
                    self.app,
                    self.bad_messages,
                )
            self._tg = None
            self._connected.set()
            self.closed.set()
            if not started:
                task_status.started()

    async def stop(self) -> None:
        """Stop the wrapped server and wait until it is gone: its stdin closed, then
        SIGTERM, then SIGKILL to its whole process group (``child.stop_group``); bounded."""
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        await self.closed.wait()

    async def _carry(
        self,
        dispatcher: JSONRPCDispatcher[TransportContext],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            await dispatcher.run(self._on_request, self._on_notify, task_status=task_status)
        except anyio.get_cancelled_exc_class():
            self._fail(f"the wrapped server ({self.spec.describe()}) was stopped", quiet=True)
            raise
        self._fail(f"the wrapped server ({self.spec.describe()}) closed the connection")

    async def _bad_message(self, exc: Exception) -> None:
        """A line from the server that is not JSON-RPC (a server printing to stdout):
        skipped, and said in one line; past the first few, counted."""
        self.bad_messages += 1
        if str(exc).startswith("a message longer than"):
            self.too_long += 1
        n = self.bad_messages
        if n <= _BAD_SHOWN:
            more = "; more such lines are counted, not shown" if n == _BAD_SHOWN else ""
            log.warning(
                "%s: the wrapped server sent something that is not JSON-RPC (skipped): %s%s",
                self.app,
                describe_bad_message(exc),
                more,
            )
        elif n % _BAD_EVERY == 0:
            log.warning("%s: %d messages that are not JSON-RPC skipped so far", self.app, n)

    def _fail(self, why: str, *, quiet: bool = False) -> None:
        if self.failure is None:
            self.failure = why
            log.log(logging.INFO if quiet else logging.ERROR, "%s: %s", self.app, why)
        self.ready.set()

    async def initialize(self, agent_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Initialize the server once; later calls return the first result."""
        async with self._lock:
            if self.result is not None:
                return self.result
            if self.failure:
                raise UpstreamError(self.failure)
            agent_params = without_tasks(agent_params) if agent_params is not None else None
            params = forward_params(agent_params) or {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "claros-guard", "version": VERSION},
            }
            try:
                with anyio.fail_after(self.start_timeout):
                    await self._connected.wait()
                dispatcher = self._live()
                result = await dispatcher.send_raw_request(
                    "initialize",
                    params,
                    {"timeout": self.start_timeout, "cancel_on_abandon": False},
                )
                self.version = str(result.get("protocolVersion") or self.version)
                await dispatcher.notify("notifications/initialized", None, self._opts())
                # A server with only resources or prompts has no tools/list to call: it is
                # wrapped all the same, with no tools (so nothing for the guard to check).
                if isinstance((result.get("capabilities") or {}).get("tools"), dict):
                    await self.refresh_tools()
            except (MCPError, TimeoutError, UpstreamError) as exc:
                self._fail(
                    f"the wrapped server ({self.spec.describe()}) did not initialize: "
                    f"{exc or 'timed out'}"
                )
                raise UpstreamError(str(self.failure)) from exc
            self.result = result
            self.ready.set()
            return result

    def _live(self) -> JSONRPCDispatcher[TransportContext]:
        if self.failure:
            raise UpstreamError(self.failure)
        if self._dispatcher is None:
            raise UpstreamError(f"the wrapped server ({self.spec.describe()}) is not running")
        return self._dispatcher

    def _opts(self, **more: Any) -> CallOptions:
        opts: CallOptions = {"headers": {MCP_PROTOCOL_VERSION_HEADER: self.version}}
        opts.update(more)  # type: ignore[typeddict-item]
        return opts

    # -- requests to the server ----------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        on_progress: ProgressFnT | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Forward a request; raises ``MCPError`` as the server answered, ``UpstreamError``
        when the server is not there."""
        if self.result is None:
            await self.initialize()
        dispatcher = self._live()
        opts = self._opts()
        if on_progress is not None:
            opts["on_progress"] = on_progress
        if timeout is not None:
            opts["timeout"] = timeout
        try:
            return await dispatcher.send_raw_request(method, params, opts)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise UpstreamError(
                    f"the wrapped server ({self.spec.describe()}) closed the connection during "
                    f"{method}"
                ) from exc
            raise

    async def notify(self, method: str, params: Mapping[str, Any] | None) -> None:
        if self._dispatcher is not None and not self.failure:
            await self._dispatcher.notify(method, params, self._opts())

    async def call_read(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a read for the guard itself (bounded by ``read_timeout``). While it runs,
        the server's requests to its client are refused (module docstring)."""
        self.own_reads += 1
        dropped = self.too_long
        try:
            return await self.request(
                "tools/call",
                {"name": tool, "arguments": arguments},
                timeout=self.read_timeout,
            )
        except MCPError as exc:
            if self.too_long > dropped:  # its answer, most likely, which never came whole
                # Not an outage --fail-open would forward: the record is too large.
                raise RecordTooLargeError(
                    f"{tool} of {self.app} failed: {exc.message} (meanwhile the server sent "
                    f"a message longer than {MAX_LINE:,} bytes, which the guard cannot read)"
                ) from exc
            raise ReadFailedError(f"{tool} of {self.app} failed: {exc.message}") from exc
        except UpstreamError as exc:
            raise ReadFailedError(f"{tool} of {self.app} could not run: {exc}") from exc
        finally:
            self.own_reads -= 1

    async def refresh_tools(self) -> None:
        tools: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor else None
            page = await self._live().send_raw_request(
                "tools/list", params, self._opts(timeout=self.start_timeout)
            )
            for tool in page.get("tools") or []:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tools[tool["name"]] = tool
            cursor = page.get("nextCursor")
            if not cursor:
                break
        self.tools = tools

    # -- what the server sends on its own --------------------------------------------------

    async def _on_request(
        self, dctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method == "ping":
            return {}
        if self.own_reads:
            raise MCPError(
                INVALID_REQUEST,
                f"{method} refused: the guard is reading facts for a check (a read the agent "
                "never sees, so none of its questions go to the agent); a read tool that "
                "needs the client's answer cannot give facts",
            )
        if method not in SERVER_REQUESTS:
            raise MCPError(
                METHOD_NOT_FOUND,
                f"{method} refused: the guard relays only what MCP lets a server ask its "
                "client (elicitation, sampling, roots), and no tasks",
            )
        if isinstance(params, Mapping) and "task" in params:
            raise MCPError(
                INVALID_REQUEST,
                f"{method} refused: asked as a task, its answer would come later, as the "
                "answer to tasks/result, which the guard does not relay (nor check)",
            )
        if self.request_agent is None:
            raise MCPError(METHOD_NOT_FOUND, f"no agent is connected to answer {method}")
        return await self.request_agent(method, params)

    async def _on_notify(
        self, dctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> None:
        # Progress for our requests and cancellations of the server's requests are applied
        # by the dispatcher itself; everything else goes on to the agent.
        if method in ("notifications/progress", "notifications/cancelled"):
            return
        if method == "notifications/message" and self.own_reads:
            # A log line of the guard's own read would show the agent that read and its
            # record (tests/security/test_agent_reads_the_guards_read_in_its_logs.py); over
            # stdio it cannot be told from a line of the agent's own call, and neither goes.
            log.debug("%s: a log message during the guard's own read, kept here: %s",
                      self.app, params)  # fmt: skip
            return
        if method == "notifications/tools/list_changed" and self.result is not None:
            try:
                await self.refresh_tools()
            except (MCPError, UpstreamError) as exc:
                log.warning("%s: cannot list the tools again: %s", self.app, exc)
            if self.tools_changed is not None:
                await self.tools_changed()
        if self.notify_agent is not None:
            await self.notify_agent(method, params)
