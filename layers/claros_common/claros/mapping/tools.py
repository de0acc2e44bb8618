"""Which tools of an app the workspace counts as reads, and the mappings that rely on it.

Guards register their app's tools and say which they consider reads; the workspace only
ever lets that make things stricter on its own:

* a tool it has known as a write (registered as one by any guard, any key) stays a write,
  for mappings and for the guards' reads, when a guard later reports it as a read: it is
  *held* until an admin confirms the change (``confirm_tool``: the web app or
  ``claros tools confirm APP TOOL``), which is a ``tool_confirm`` ledger entry;
* a tool reported as a write is a write at once.

Every registration and confirmation re-validates the mappings that name the app's tools:
one that no longer names only reads is *suspended* (a ``mapping_status`` ledger entry);
the checks that need it are refused with a 409 naming it and why (``claros.mapping.
service.mapping_for``), until it names only reads again (a tool confirmed and registered as
a read: restored, another ``mapping_status`` entry) or a valid version is saved.

A workspace keeps at most ``MAX_APPS`` apps; an admin removes one no longer used
(``remove_app``, an ``app_removed`` ledger entry), which suspends the mappings that read
through its tools, and its next registration is taken as a first one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from claros.auth import Principal
from claros.checkpoints import record
from claros.clock import new_id, now_ms
from claros.errors import ConflictError, NotFoundError, PayloadTooLargeError
from claros.mapping.model import STORED, MappingSpec, tools_named
from claros.store.base import MAX_BATCH_RECORDS, DocWrite, NewRecord, RecordTooLargeError, Store
from claros.store.base import ConflictError as StoreConflictError
from claros.wiring import Services

__all__ = [
    "APPS",
    "MAPPINGS",
    "MAX_APPS",
    "confirm_tool",
    "mapping_problem",
    "registered_tools",
    "remove_app",
    "revalidate",
    "tool_problem",
    "update_tools",
]

APPS, MAPPINGS = "app", "mapping"
# Apps one workspace registers. Guards register with the agent's own key, and each app
# holds up to 1,000 tools: without a bound an agent could register apps without end and
# bury the admin's Rules page (and every read of the workspace's apps) under them. A
# registration checks the count when its app is new; two new apps registered at the same
# moment can each pass it by one (docs/api.md, Limits).
MAX_APPS = 100
_ATTEMPTS = 5  # concurrent registrations of one app: retried on a lost race

Tools = Mapping[str, Mapping[str, Any]]
ToolsOf = Callable[[str], Tools | None]


def _writes_of(value: Mapping[str, Any] | None) -> set[str]:
    """The tools an app doc holds as writes. Docs from before ``writes`` was kept: every
    tool they registered as a write."""
    if value is None:
        return set()
    if "writes" in value:
        return set(value["writes"])
    return {name for name, info in value["tools"].items() if not info.get("read")}


def update_tools(
    previous: Mapping[str, Any] | None, reported: Iterable[Mapping[str, Any]]
) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """(tools as the workspace counts them, every tool it holds as a write, the held ones).

    ``reported``: each tool as a guard registered it (``read`` is the guard's word)."""
    writes = _writes_of(previous)
    tools: dict[str, dict[str, Any]] = {}
    held: list[str] = []
    for info in reported:
        entry = dict(info)
        name = str(entry["name"])
        if not entry.get("read"):
            writes.add(name)
        elif name in writes:
            entry.update(read=False, held=True)
            held.append(name)
        tools[name] = entry
    return tools, sorted(writes), held


def tool_problem(tools: Tools | None, app: str, tool: str) -> str | None:
    """Why ``tool`` is not a registered read tool of ``app`` (None when it is one)."""
    if tools is None:
        return f"app {app!r} has registered no tools (start its guard first)"
    info = tools.get(tool)
    if info is None:
        return f"{tool!r} is not a registered tool of {app}"
    if info.get("held"):
        return (
            f"{tool!r} of {app} was registered as a write and a guard now reports it as a "
            f"read: it stays a write until an admin confirms the change (claros tools "
            f"confirm {app} {tool}, or the Rules page of the web app)"
        )
    if not info.get("read"):
        return f"{tool!r} of {app} is not a read tool"
    return None


def mapping_problem(spec: MappingSpec, tools_of: ToolsOf) -> str | None:
    """The first tool the mapping names that is not a read, as ``where: why``."""
    for app, tool, where in tools_named(spec):
        problem = tool_problem(tools_of(app), app, tool)
        if problem:
            return f"mapping.{where}: {problem}"
    return None


def registered_tools(store: Store, workspace: str) -> ToolsOf:
    """``tools_of(app)`` over the store, each app read once."""
    seen: dict[str, Tools | None] = {}

    def tools_of(app: str) -> Tools | None:
        if app not in seen:
            doc = store.get_doc(workspace, APPS, app)
            seen[app] = doc.value["tools"] if doc else None
        return seen[app]

    return tools_of


def _overlay(app: str, tools: Tools, others: ToolsOf) -> ToolsOf:
    """``others`` with ``app``'s tools as they are about to be saved."""
    return lambda name: tools if name == app else others(name)


def _label(value: Mapping[str, Any]) -> str:
    return f"{value['app']} {value['tool']}"


def _key(app: str, tool: str) -> str:
    return f"{quote(app, safe='')}:{quote(tool, safe='')}"


def revalidate(
    store: Store, principal: Principal, app: str, tools_of: ToolsOf, why: str
) -> tuple[list[tuple[DocWrite, NewRecord]], list[tuple[DocWrite, NewRecord]]]:
    """(suspensions, restorations): for every saved mapping naming a tool of ``app`` whose
    standing changes under ``tools_of``, its new doc and its ``mapping_status`` entry."""
    workspace, now = principal.workspace, now_ms()
    suspend: list[tuple[DocWrite, NewRecord]] = []
    restore: list[tuple[DocWrite, NewRecord]] = []
    for doc in store.query_docs(workspace, MAPPINGS, limit=1000):
        status = doc.value.get("status")
        if status not in ("active", "suspended"):
            continue
        spec = MappingSpec.model_validate(doc.value["mapping"], context=STORED)
        if all(named != app for named, _, _ in tools_named(spec)):
            continue
        problem = mapping_problem(spec, tools_of)
        if (problem is not None) == (status == "suspended"):
            continue
        state = {k: v for k, v in doc.value.items() if k != "suspended"}
        state["status"] = "suspended" if problem else "active"
        if problem:
            state["suspended"] = {"reason": problem, "at": now, "by": why}
        entry = {
            "workspace": workspace,
            "app": state["app"],
            "tool": state["tool"],
            "version": state["version"],
            "hash": state["hash"],
            "status": state["status"],
            "reason": problem or f"it names only reads again ({why})",
            "changed_by": principal.person or principal.key_id,
            "changed_at": now,
        }
        ref = f"{_key(state['app'], state['tool'])}@{state['version']}/{new_id('ms')}"
        pair = (
            DocWrite(workspace, MAPPINGS, doc.key, state, doc.rev),
            NewRecord("mapping_status", ref, entry),
        )
        (suspend if problem else restore).append(pair)
    return suspend, restore


def _commit(
    services: Services,
    workspace: str,
    first: list[tuple[DocWrite, NewRecord]],
    middle: list[DocWrite],
    middle_records: list[NewRecord],
    last: list[tuple[DocWrite, NewRecord]],
) -> None:
    """Suspensions first, then the app's change (with its own entries), then restorations:
    whatever a failure leaves behind is stricter than before, never looser. One
    transaction when it fits (it nearly always does)."""
    pairs = first + last
    if len(pairs) + len(middle_records) <= MAX_BATCH_RECORDS:
        docs = [w for w, _ in first] + middle + [w for w, _ in last]
        records = [r for _, r in first] + middle_records + [r for _, r in last]
        _append(services, workspace, records, docs)
        return
    for chunk in _chunks(first):
        _append(services, workspace, [r for _, r in chunk], [w for w, _ in chunk])
    _append(services, workspace, middle_records, middle)
    for chunk in _chunks(last):
        _append(services, workspace, [r for _, r in chunk], [w for w, _ in chunk])


def _chunks(
    pairs: list[tuple[DocWrite, NewRecord]],
) -> Iterable[list[tuple[DocWrite, NewRecord]]]:
    for i in range(0, len(pairs), MAX_BATCH_RECORDS):
        yield pairs[i : i + MAX_BATCH_RECORDS]


def _append(
    services: Services, workspace: str, records: list[NewRecord], docs: list[DocWrite]
) -> None:
    if records:
        record(services, workspace, records, docs)
    elif docs:
        services.store.write_docs(docs)


def save_registration(
    services: Services, principal: Principal, app: str, reported: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Store a guard's registration of ``app`` and re-validate the mappings naming it."""
    store, workspace = services.store, principal.workspace
    for attempt in range(_ATTEMPTS):
        doc = store.get_doc(workspace, APPS, app)
        if doc is None:
            _room_for_an_app(store, workspace, app)
        tools, writes, held = update_tools(doc.value if doc else None, reported)
        value = {
            "app": app,
            "tools": tools,
            "writes": writes,
            "registered_at": now_ms(),
            "registered_by": principal.key_id,
        }
        overlay = _overlay(app, tools, registered_tools(store, workspace))
        why = f"tools of {app} registered by key {principal.key_id}"
        suspend, restore = revalidate(store, principal, app, overlay, why)
        write = DocWrite(workspace, APPS, app, value, doc.rev if doc else 0)
        try:
            _commit(services, workspace, suspend, [write], [], restore)
        except RecordTooLargeError as exc:  # one DynamoDB item holds an app's tools
            raise PayloadTooLargeError(
                f"the tools of {app} are too large to keep ({exc}): register fewer tools, "
                "or shorter descriptions and schemas"
            ) from None
        except StoreConflictError:
            if attempt == _ATTEMPTS - 1:
                raise ConflictError(
                    f"the tools of {app} changed meanwhile; register again"
                ) from None
            continue
        return {
            "app": app,
            "tools": len(tools),
            "reads": sum(bool(t.get("read")) for t in tools.values()),
            "writes": writes,
            "held": held,
            "suspended": [_label(w.value or {}) for w, _ in suspend],
            "restored": [_label(w.value or {}) for w, _ in restore],
        }
    raise AssertionError("unreachable")  # pragma: no cover


def _room_for_an_app(store: Store, workspace: str, app: str) -> None:
    if len(store.query_docs(workspace, APPS, limit=MAX_APPS)) >= MAX_APPS:
        raise ConflictError(
            f"the workspace has {MAX_APPS} apps registered, as many as it keeps: {app} is "
            "not registered. An admin removes an app no longer used (the app's page in the "
            "web app, or DELETE /api/apps/APP) to make room"
        )


Pairs = list[tuple[DocWrite, NewRecord]]


def _change_app(
    services: Services,
    principal: Principal,
    app: str,
    value: Mapping[str, Any] | None,
    rev: int,
    entry: NewRecord,
    tools_of: ToolsOf,
    why: str,
    attempt: int,
) -> tuple[Pairs, Pairs] | None:
    """An admin's change of an app's doc (``value``; None removes it) at revision ``rev``,
    with its ledger entry and the mappings it suspends or restores, in one commit:
    (suspended, restored), or None when the app changed meanwhile (read it again)."""
    workspace = principal.workspace
    suspend, restore = revalidate(services.store, principal, app, tools_of, why)
    try:
        _commit(
            services, workspace, suspend, [DocWrite(workspace, APPS, app, value, rev)], [entry],
            restore,
        )  # fmt: skip
    except StoreConflictError:
        if attempt == _ATTEMPTS - 1:
            raise ConflictError(f"the tools of {app} changed meanwhile; try again") from None
        return None
    return suspend, restore


def remove_app(services: Services, principal: Principal, app: str) -> dict[str, Any]:
    """An admin removes an app and its registered tools: the mappings that name its tools
    are suspended in the same transaction (whatever fails leaves them stricter). What it
    held as writes is forgotten with it: the app's next registration is a first one."""
    store, workspace = services.store, principal.workspace
    for attempt in range(_ATTEMPTS):
        doc = store.get_doc(workspace, APPS, app)
        if doc is None:
            raise NotFoundError(f"app {app!r} has registered no tools")
        now = now_ms()
        entry = {
            "workspace": workspace,
            "app": app,
            "tools": len(doc.value["tools"]),
            "writes": sorted(_writes_of(doc.value)),
            "registered_by": doc.value.get("registered_by"),
            "removed_by": principal.person or principal.key_id,
            "removed_at": now,
        }
        others = registered_tools(store, workspace)

        def gone(name: str, others: ToolsOf = others) -> Tools | None:
            return None if name == app else others(name)

        removed = NewRecord("app_removed", f"{quote(app, safe='')}/{new_id('ar')}", entry)
        why = f"{app} was removed"
        done = _change_app(services, principal, app, None, doc.rev, removed, gone, why, attempt)
        if done is None:
            continue
        suspend, _ = done
        return {
            "app": app,
            "removed_by": entry["removed_by"],
            "removed_at": now,
            "suspended": [_label(w.value or {}) for w, _ in suspend],
        }
    raise AssertionError("unreachable")  # pragma: no cover


def confirm_tool(services: Services, principal: Principal, app: str, tool: str) -> dict[str, Any]:
    """An admin confirms that a held tool is a read: it is one from now on (until a guard
    reports it as a write again), and the mappings naming it are re-validated."""
    store, workspace = services.store, principal.workspace
    for attempt in range(_ATTEMPTS):
        doc = store.get_doc(workspace, APPS, app)
        if doc is None:
            raise NotFoundError(f"app {app!r} has registered no tools")
        info = doc.value["tools"].get(tool)
        if info is None:
            raise NotFoundError(f"{tool!r} is not a registered tool of {app}")
        if not info.get("held"):
            state = "a read already" if info.get("read") else "reported as a write"
            raise ConflictError(
                f"{tool} of {app} is {state}: there is no change to confirm (a guard must "
                "report it as a read first)"
            )
        now = now_ms()
        tools = dict(doc.value["tools"])
        tools[tool] = {k: v for k, v in info.items() if k != "held"} | {"read": True}
        writes = sorted(_writes_of(doc.value) - {tool})
        value = {**doc.value, "tools": tools, "writes": writes}
        entry = {
            "workspace": workspace,
            "app": app,
            "tool": tool,
            "read": True,
            "annotations": info.get("annotations") or {},
            "reported_by": doc.value.get("registered_by"),
            "confirmed_by": principal.person or principal.key_id,
            "confirmed_at": now,
        }
        overlay = _overlay(app, tools, registered_tools(store, workspace))
        why = f"{tool} of {app} confirmed as a read"
        confirm = NewRecord("tool_confirm", f"{_key(app, tool)}/{new_id('tc')}", entry)
        done = _change_app(services, principal, app, value, doc.rev, confirm, overlay, why, attempt)
        if done is None:
            continue
        suspend, restore = done
        return {
            "app": app,
            "tool": tool,
            "read": True,
            "confirmed_by": entry["confirmed_by"],
            "confirmed_at": now,
            "restored": [_label(w.value or {}) for w, _ in restore],
            "suspended": [_label(w.value or {}) for w, _ in suspend],
        }
    raise AssertionError("unreachable")  # pragma: no cover
