"""One guarded app: its wrapped server, which of its tools are reads, its check policy,
its registration with Claros and what it answers other guards.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from claros.names import NAME
from claros_guard.api import ClarosApi
from claros_guard.classify import Classifier
from claros_guard.errors import ClarosUnavailableError, ConfigError, GuardError, NotAReadError
from claros_guard.needs import LookupCache, NeedResolver, canonical_arguments, with_fresh_for
from claros_guard.peers import PeerClient
from claros_guard.policy import Policy
from claros_guard.reporter import Reporter
from claros_guard.transport import UpstreamSpec
from claros_guard.upstream import Upstream

__all__ = ["AppSettings", "GuardSettings", "GuardedApp"]

log = logging.getLogger("claros_guard.app")

_NAME = re.compile(NAME)
_MAX_TOOLS = 1000
_REFRESH_EVERY = 10.0  # seconds between registrations asked for by a held tool


@dataclass(frozen=True)
class AppSettings:
    name: str
    upstream: UpstreamSpec
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        both = sorted(self.reads & self.writes)
        if both:
            raise ConfigError(
                f"{self.name}: {', '.join(both)} is given both as a read and as a write; "
                "keep one of --read/--write (read:/write:) for each tool"
            )


@dataclass(frozen=True)
class GuardSettings:
    """Settings every guarded app of one process shares."""

    fail_open: bool = False
    ask_wait: float = 120.0
    poll_interval: float = 1.0
    read_timeout: float = 30.0
    start_timeout: float = 60.0
    start_wait: float = 5.0  # how long the wrapped server waits for the agent's initialize
    # How long the agent's initialize waits for the workspace's answer to the registration
    # (which tools it holds as writes) before reads go by this guard's classification alone.
    register_wait: float = 3.0
    extra: dict[str, Any] = field(default_factory=dict)


class GuardedApp:
    def __init__(
        self,
        settings: AppSettings,
        shared: GuardSettings,
        *,
        api: ClarosApi,
        peers: PeerClient,
        reporter: Reporter,
    ) -> None:
        self.name = settings.name
        self.settings = settings
        self.shared = shared
        self.api = api
        self.peers = peers
        self.reporter = reporter
        self.upstream = Upstream(
            settings.name,
            settings.upstream,
            start_timeout=shared.start_timeout,
            read_timeout=shared.read_timeout,
        )
        self.classifier = Classifier.of(settings.reads, settings.writes)
        # Tools the workspace holds as writes (from the last registration's answer): a tool
        # once registered as a write stays one here, whatever this guard's classifier now
        # says, until an admin confirms the change (docs/guard.md, "Which tools are reads").
        self.workspace_writes: frozenset[str] = frozenset()
        # Writes the workspace cannot hold (past the registration's cap, or a name Claros
        # does not take): this guard holds them itself, for the whole session, whatever the
        # server says of them later (a tools/list_changed that marks one read-only).
        self.unheld_writes: set[str] = set()
        self._refreshed_at = -_REFRESH_EVERY
        self.resolver = NeedResolver(self)
        self.lookups = LookupCache()  # lookup reads this guard ran, for itself or its peers
        self.policy = Policy(
            api,
            self.resolver,
            fail_open=shared.fail_open,
            ask_wait=shared.ask_wait,
            poll_interval=shared.poll_interval,
        )
        self.siblings: dict[str, GuardedApp] = {}  # other apps guarded by this process
        self.expects_agent = True  # an agent's initialize is worth waiting for (start_wait)
        self.agent_name: str | None = None
        # The process at the other end of the agent's stdio (``stdio_peer``): the hooks
        # of that one Claude Code leave its calls to this guard.
        self.agent_client: int | None = None
        self.agent_hello = anyio.Event()
        self.registered = anyio.Event()
        self._register = anyio.Event()
        self.upstream.tools_changed = self._tools_changed

    # -- classification --------------------------------------------------------------------

    def annotations(self, tool: str) -> dict[str, Any]:
        found = (self.upstream.tools.get(tool) or {}).get("annotations")
        return found if isinstance(found, dict) else {}

    def is_listed(self, tool: str) -> bool:
        """Whether the wrapped server listed a tool by exactly this name (``tools/list``)."""
        return tool in self.upstream.tools

    def is_read_tool(self, tool: str) -> bool:
        """A read by this guard's classification and not held as a write by the workspace:
        the one answer for the agent's calls, needs and other guards' reads. Only a tool
        the server listed by exactly this name can be one: a server may find ``GET_REPORT``
        or ``get-report`` as its write ``get_report``, which the name alone calls a read."""
        if tool in self.workspace_writes or tool in self.unheld_writes:
            return False
        if not self.is_listed(tool):
            return False
        return self.classifier.is_read(tool, self.annotations(tool))

    def why(self, tool: str) -> str:
        if tool in self.unheld_writes and self.classifier.is_read(tool, self.annotations(tool)):
            return (
                "it was a write when this session began, and Claros cannot hold it (not "
                "registered), so this guard does: it stays a write until the guard restarts"
            )
        if tool in self.workspace_writes and self.classifier.is_read(tool, self.annotations(tool)):
            return (
                f"Claros holds it as a write until an admin confirms it is a read: "
                f"claros tools confirm {self.name} {tool}"
            )
        if not self.is_listed(tool):
            return "the wrapped server did not list a tool by exactly this name"
        return self.classifier.why(tool, self.annotations(tool))

    async def _refresh_if_held(self, tool: str) -> None:
        """A tool held as a write that this guard calls a read may have been confirmed
        since the last registration: register again (at most every few seconds) to learn."""
        if tool not in self.workspace_writes or not self.classifier.is_read(
            tool, self.annotations(tool)
        ):
            return
        now = anyio.current_time()
        if now - self._refreshed_at < _REFRESH_EVERY:
            return
        self._refreshed_at = now
        try:
            self._learn(await self.api.register_tools(self.name, self.registration()))
        except GuardError as exc:
            log.warning("%s: cannot ask Claros about %s: %s", self.name, tool, exc)

    def _learn(self, answer: dict[str, Any]) -> None:
        writes = answer.get("writes")
        if isinstance(writes, list):
            self.workspace_writes = frozenset(w for w in writes if isinstance(w, str))
        for tool in answer.get("held") or []:
            log.warning(
                "%s: %s says it is a read, but Claros holds it as a write until an admin "
                "confirms the change (claros tools confirm %s %s, or the web app's Rules page)",
                self.name, tool, self.name, tool,
            )  # fmt: skip
        for mapping in answer.get("suspended") or []:
            log.warning(
                "%s: the mapping %s is suspended: it names a tool that is no longer a read",
                self.name, mapping,
            )  # fmt: skip

    # -- reads (for needs, and for other guards) ----------------------------------------------

    async def read(
        self, app: str | None, tool: str, arguments: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        if app is not None and app != self.name:
            sibling = self.siblings.get(app)
            if sibling is not None:
                return await sibling.read_for_peer(tool, arguments, kind=kind)
            return await self.peers.read(app, tool, arguments, kind=kind)
        return await self.read_for_peer(tool, arguments, kind=kind)

    async def read_for_peer(
        self, tool: str, arguments: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        """Run a read for a check (this guard's, a sibling's, or another guard's over the
        socket). Lookups are cached here for 60 s: a hook is a new process per call, so
        only the long-running guard that answers it can keep "one read per distinct value".
        Fetches and queries are always read fresh (a fetch is read just before the write)."""
        if self.upstream.result is None:
            await self.initialize()
        await self._registration_known()
        if not self.is_read_tool(tool):
            await self._refresh_if_held(tool)
        if not self.is_read_tool(tool):
            raise NotAReadError(
                f"Claros asked to run {tool}, which the guard of {self.name} does not consider "
                f"a read ({self.why(tool)}); it was not run"
            )
        if kind != "lookup":
            return await self.upstream.call_read(tool, arguments)
        cache_key = (tool, canonical_arguments(arguments))
        hit = self.lookups.entry(cache_key)
        if hit is not None:
            # Says how long it stays fresh: whoever asked keeps it no longer (60 s in all).
            return with_fresh_for(hit[0], hit[1])
        result = await self.upstream.call_read(tool, arguments)
        if result.get("isError"):  # a failed read is tried again next time
            return result
        self.lookups.put(cache_key, result)
        return with_fresh_for(result, self.lookups.ttl)

    def peer_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "app": self.name,
            "agent": self.agent_name,
            "tools": len(self.upstream.tools),
        }
        if self.agent_client is not None:
            status["client"] = self.agent_client
        return status

    # -- lifecycle -----------------------------------------------------------------------------

    async def initialize(self, agent_params: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.upstream.initialize(agent_params)
        self._hold_unheld_writes()
        self._register.set()
        await self._registration_known()
        return result

    async def _registration_known(self) -> None:
        """Until the workspace has answered the registration, this guard does not know which
        tools it holds as writes: wait for that, bounded (Claros being down must not keep
        the agent waiting; its writes are blocked then anyway)."""
        if not self.registered.is_set():
            with anyio.move_on_after(self.shared.register_wait):
                await self.registered.wait()

    async def _tools_changed(self) -> None:
        self._hold_unheld_writes()
        self._register.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(self.upstream.run)
            tg.start_soon(self._registrar)
            task_status.started()
            if self.expects_agent:
                with anyio.move_on_after(self.shared.start_wait):
                    await self.agent_hello.wait()
            try:
                await self.initialize()
            except GuardError as exc:
                log.error("%s: %s", self.name, exc)
            await self.upstream.closed.wait()
            tg.cancel_scope.cancel()

    def _registrable(self) -> list[tuple[str, dict[str, Any]]]:
        """The tools a registration names: the first ``_MAX_TOOLS``, by names Claros takes."""
        return [
            (name, tool)
            for name, tool in list(self.upstream.tools.items())[:_MAX_TOOLS]
            if _NAME.match(name)
        ]

    def _hold_unheld_writes(self) -> None:
        """Note the writes no registration can name (see ``unheld_writes``). Called when
        the tools are listed first and on every change, so one marked read-only later was
        noted as a write before."""
        registrable = {name for name, _ in self._registrable()}
        for name in self.upstream.tools:
            if name in registrable or self.classifier.is_read(name, self.annotations(name)):
                continue
            if name not in self.unheld_writes:
                log.warning(
                    "%s: tool %r is a write Claros cannot hold (past the first %d tools, or "
                    "a name it does not take); this guard holds it as a write",
                    self.name, name, _MAX_TOOLS,
                )  # fmt: skip
                self.unheld_writes.add(name)

    def registration(self) -> list[dict[str, Any]]:
        for name in list(self.upstream.tools)[:_MAX_TOOLS]:
            if not _NAME.match(name):
                log.warning(
                    "%s: tool %r has a name Claros does not accept; not registered", self.name, name
                )
        tools = []
        for name, tool in self._registrable():
            entry: dict[str, Any] = {
                "name": name,
                # This guard's own word; what the workspace holds comes back in the answer.
                "read": self.classifier.is_read(name, self.annotations(name)),
                "annotations": self.annotations(name),
            }
            description = tool.get("description")
            if isinstance(description, str) and description:
                entry["description"] = description[:4000]
            schema = _schema_outline(tool.get("inputSchema"))
            if schema is not None:
                entry["input_schema"] = schema
            output = output_outline(tool.get("outputSchema"))
            if output is not None:
                entry["output_schema"] = output
            tools.append(entry)
        return tools

    async def _registrar(self) -> None:
        delay = 1.0
        while True:
            await self._register.wait()
            self._register = anyio.Event()
            try:
                answer = await self.api.register_tools(self.name, self.registration())
                self._learn(answer)
                log.info(
                    "%s: registered %s tools (%s reads)",
                    self.name,
                    answer.get("tools"),
                    answer.get("reads"),
                )
                self.registered.set()
                delay = 1.0
            except ClarosUnavailableError as exc:
                log.warning(
                    "%s: cannot register the tools yet (%s); retrying in %gs", self.name, exc, delay
                )
                await anyio.sleep(delay)
                delay = min(delay * 2, 60.0)
                self._register.set()
            except GuardError as exc:
                log.error("%s: %s", self.name, exc)
                self.registered.set()  # refused for good: nothing more will come to wait for


def _schema_outline(schema: Any) -> dict[str, Any] | None:
    """What Claros needs of a tool's input schema (to warn of rules reading fields no call
    carries): the argument names and their JSON types, at most 200; never descriptions or
    defaults, which can be long and say more than needed."""
    if not isinstance(schema, dict):
        return None
    outline: dict[str, Any] = {"type": "object"}
    properties = schema.get("properties")
    if isinstance(properties, dict):
        names = [name for name in properties if isinstance(name, str) and len(name) <= 200]
        outline["properties"] = {
            name: {"type": kind} if isinstance(kind := _type_of(properties[name] or {}), str)
            else {}
            for name in names[:200]
            if isinstance(properties[name], dict | type(None))
        }  # fmt: skip
    return outline


def _type_of(prop: dict[str, Any]) -> str | None:
    """A property's JSON type; for ``anyOf`` (an optional argument: ``str | None``) the
    first one that is not null."""
    kind = prop.get("type")
    if isinstance(kind, str):
        return kind
    for option in prop.get("anyOf") or []:
        if isinstance(option, dict) and option.get("type") not in (None, "null"):
            found = option.get("type")
            return found if isinstance(found, str) else None
    return None


_OUTPUT_DEPTH = 3
_OUTPUT_FIELDS = 200


def output_outline(schema: Any) -> dict[str, Any] | None:
    """What the mapper needs of a tool's declared output schema: the field names and JSON
    types, nested objects and lists of objects to 3 levels, ``$ref`` resolved, at most 200
    fields; never descriptions, titles or defaults. None when the server declared none or
    an open object (``additionalProperties`` only): it names no field."""
    if not isinstance(schema, dict):
        return None
    found = schema.get("$defs")
    defs: dict[str, Any] = found if isinstance(found, dict) else {}
    budget = [_OUTPUT_FIELDS]
    outline = _outline_node(schema, defs, 0, budget)
    return outline if outline.get("properties") or outline.get("items") else None


def _outline_node(
    node: dict[str, Any], defs: dict[str, Any], depth: int, budget: list[int]
) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        node = target if isinstance(target, dict) else {}
    if "type" not in node:
        for option in node.get("anyOf") or []:
            if isinstance(option, dict) and option.get("type") != "null":
                return _outline_node(option, defs, depth, budget)
    kind = node.get("type")
    out: dict[str, Any] = {"type": kind} if isinstance(kind, str) else {}
    if depth >= _OUTPUT_DEPTH:
        return out
    properties = node.get("properties")
    if kind == "object" and isinstance(properties, dict):
        fields: dict[str, Any] = {}
        for name, prop in properties.items():
            if budget[0] <= 0 or not isinstance(name, str) or len(name) > 200:
                break
            budget[0] -= 1
            fields[name] = _outline_node(prop if isinstance(prop, dict) else {}, defs,
                                         depth + 1, budget)  # fmt: skip
        out["properties"] = fields
    items = node.get("items")
    if kind == "array" and isinstance(items, dict):
        out["items"] = _outline_node(items, defs, depth + 1, budget)
    return out
