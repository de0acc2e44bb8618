"""Mappings and app tools as the workspace keeps them.

Guards register their app's tools and which are reads (``POST /v1/apps/{app}/tools``;
what the workspace makes of that, and suspended mappings: ``claros.mapping.tools``); a
mapping is accepted only when every tool it names is a registered read tool of its app, or
of the app a lookup names. Every saved mapping is a ``mapping_version`` ledger entry, so a
check row's facts can be traced to the mapping that asked for them; closing one (its tool is
then checked on the call's arguments alone) is a ``mapping_version_close`` entry, as a
rule's close is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from claros.auth import Principal
from claros.checkpoints import record
from claros.clock import now_ms
from claros.errors import BadRequestError, ConflictError, NotFoundError
from claros.mapping.model import STORED, MappingSpec, tools_named
from claros.mapping.tools import APPS, MAPPINGS, save_registration, tool_problem
from claros.names import NAME
from claros.rules.terms import rule_hash
from claros.store.base import Doc, DocWrite, NewRecord, Store
from claros.wiring import Services

if TYPE_CHECKING:  # the body of POST /v1/apps/{app}/tools: the check function's alone
    from claros.mapping.tools_request import ToolsRequest

__all__ = [
    "close_mapping",
    "get_mapping",
    "list_apps",
    "list_mappings",
    "mapping_doc",
    "mapping_for",
    "mapping_from",
    "mapping_versions",
    "put_mapping",
    "register_tools",
]


def register_tools(
    services: Services, principal: Principal, app: str, req: ToolsRequest
) -> dict[str, Any]:
    if not re.fullmatch(NAME, app):
        raise BadRequestError(f"not an app name: {app!r}")
    names = [t.name for t in req.tools]
    if len(set(names)) != len(names):
        raise BadRequestError("a tool is listed twice")
    reported = [t.model_dump(exclude_none=True) for t in req.tools]
    return save_registration(services, principal, app, reported)


def list_apps(store: Store, workspace: str) -> list[dict[str, Any]]:
    return [
        {"app": d.key, "tools": list(d.value["tools"].values()),
         "registered_at": d.value["registered_at"]}
        for d in store.query_docs(workspace, APPS, limit=1000)
    ]  # fmt: skip


def _read_tools(store: Store, workspace: str, app: str) -> dict[str, Any] | None:
    doc = store.get_doc(workspace, APPS, app)
    return doc.value["tools"] if doc else None


def validate_tools(store: Store, workspace: str, spec: MappingSpec) -> None:
    for app, tool, where in tools_named(spec):
        problem = tool_problem(_read_tools(store, workspace, app), app, tool)
        if problem:
            raise BadRequestError(f"mapping.{where}: {problem}")


def _app_guards(store: Store, workspace: str, spec: MappingSpec) -> list[DocWrite]:
    """The named apps' docs, rewritten as they are at the revision validated: saved in the
    mapping's transaction, a registration landing meanwhile (and turning a tool into a
    write) makes the save fail instead of leaving an active mapping naming a write."""
    out: dict[str, DocWrite] = {}
    for app, _, _ in tools_named(spec):
        doc = store.get_doc(workspace, APPS, app)
        if doc is not None and app not in out:
            out[app] = DocWrite(workspace, APPS, app, doc.value, doc.rev)
    return list(out.values())


def _suspended(value: dict[str, Any]) -> ConflictError:
    why = (value.get("suspended") or {}).get("reason") or "it names a tool that is not a read"
    return ConflictError(
        f"mapping {value['app']} {value['tool']} (version {value['version']}) is suspended: "
        f"{why}. Checks that need it are refused until it names only reads again (a tool "
        "confirmed by an admin and registered as a read) or a valid version is saved"
    )


def _key(app: str, tool: str) -> str:
    """The mapping's doc key (and, with ``@{version}``, its ledger ref_id). Names may hold
    ':', '/' and '@', so each is percent-encoded first: app "a:b" + tool "c" and app "a" +
    tool "b:c" stay apart. Plain names (letters, digits, ``_.-``) read as they are."""
    return f"{quote(app, safe='')}:{quote(tool, safe='')}"


# Saved mappings by their hash, already validated: every check of a mapped tool needs its
# mapping, and validating it again (expressions, value rules) on each check is waste. The
# process serves every workspace, so a spec is kept only under the hash of its own text: a
# doc whose text is not what its hash says (written around the API, or corrupt) never
# answers for another workspace's mapping of that hash. It is read for itself until that
# hash's own text is known; then it gets that text, the version its hash names.
_SPECS: dict[str, MappingSpec] = {}
_MAX_SPECS = 512


def mapping_doc(app: str, tool: str) -> tuple[str, str]:
    """The (collection, key) of the tool's mapping doc, for a caller that reads it with
    other docs (``Store.get_docs``) and hands it to ``mapping_from``."""
    return MAPPINGS, _key(app, tool)


def mapping_for(store: Store, workspace: str, app: str, tool: str) -> MappingSpec | None:
    """The tool's active mapping, or None; ConflictError when it is suspended."""
    return mapping_from(store.get_doc(workspace, *mapping_doc(app, tool)))


def mapping_from(doc: Doc | None) -> MappingSpec | None:
    """The active mapping a mapping doc holds (None: no doc, or closed); ConflictError
    when it is suspended (its app's tools changed under it)."""
    if doc is not None and doc.value.get("status") == "suspended":
        raise _suspended(doc.value)
    if doc is None or doc.value.get("status") != "active":
        return None
    digest = str(doc.value["hash"])
    spec = _SPECS.get(digest)
    if spec is None:
        spec = MappingSpec.model_validate(doc.value["mapping"], context=STORED)
        if rule_hash(doc.value["mapping"]) != digest:
            return spec  # this doc's own, not the hash's
        if len(_SPECS) >= _MAX_SPECS:
            _SPECS.clear()
        _SPECS[digest] = spec
    return spec


def get_mapping(store: Store, workspace: str, app: str, tool: str) -> dict[str, Any]:
    doc = store.get_doc(workspace, MAPPINGS, _key(app, tool))
    if doc is None:
        raise NotFoundError(f"no mapping for {app} {tool}")
    return dict(doc.value)


def list_mappings(store: Store, workspace: str) -> list[dict[str, Any]]:
    return [d.value for d in store.query_docs(workspace, MAPPINGS, limit=1000)]


def put_mapping(
    services: Services,
    principal: Principal,
    spec: MappingSpec,
    confirm: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], bool]:
    """Save a mapping version. ``confirm``: who stands behind it when it was accepted
    from a proposal (``claros.mapping.proposals.confirm_of``); kept in the version."""
    store, workspace = services.store, principal.workspace
    guards = _app_guards(store, workspace, spec)
    validate_tools(store, workspace, spec)
    written = spec.written()
    digest = rule_hash(written)
    key = _key(spec.app, spec.tool)
    doc = store.get_doc(workspace, MAPPINGS, key)
    if doc and doc.value["hash"] == digest and doc.value["status"] == "active":
        return dict(doc.value), False
    version = int(doc.value["version"]) + 1 if doc else 1
    now = now_ms()
    state = {
        "app": spec.app,
        "tool": spec.tool,
        "version": version,
        "hash": digest,
        "mapping": written,
        "status": "active",
        "saved_by": principal.person or principal.key_id,
        "saved_at": now,
    }
    if confirm is not None:
        state["confirm"] = confirm
    record(
        services,
        workspace,
        [NewRecord("mapping_version", f"{key}@{version}", {"workspace": workspace, **state})],
        [DocWrite(workspace, MAPPINGS, key, state, doc.rev if doc else 0), *guards],
    )
    return state, True


def mapping_versions(store: Store, workspace: str, app: str, tool: str) -> list[dict[str, Any]]:
    """Every saved version of the tool's mapping, oldest first, each with its close record
    (``closed``: None while it is the one in force)."""
    doc = store.get_doc(workspace, MAPPINGS, _key(app, tool))
    if doc is None:
        raise NotFoundError(f"no mapping for {app} {tool}")
    out = []
    for version in range(1, int(doc.value["version"]) + 1):
        ref = f"{_key(app, tool)}@{version}"
        saved = store.get_record(workspace, "mapping_version", ref)
        if saved is None:
            continue  # pruned long ago (versions are kept, but a store may predate that)
        closed = store.get_record(workspace, CLOSE_KIND, ref)
        if closed is None and version < int(doc.value["version"]):
            # Replaced by a later save: no close entry of its own, the next version says when.
            closed = {"replaced": True}
        out.append({**saved, "closed": closed})
    return out


CLOSE_KIND = "mapping_version_close"


def close_mapping(
    services: Services, principal: Principal, app: str, tool: str, reason: str = ""
) -> dict[str, Any]:
    """Close the tool's mapping: its checks read only the call's arguments again, until a
    new version is saved. A ``mapping_version_close`` ledger entry says who, when and why."""
    store, workspace = services.store, principal.workspace
    key = _key(app, tool)
    doc = store.get_doc(workspace, MAPPINGS, key)
    if doc is None:
        raise NotFoundError(f"no mapping for {app} {tool}")
    if doc.value.get("status") == "closed":
        raise ConflictError(f"the mapping for {app} {tool} is closed already")
    now = now_ms()
    who = principal.person or principal.key_id
    closed = {"closed_by": who, "closed_at": now, "reason": reason or "closed"}
    state = {k: v for k, v in doc.value.items() if k != "suspended"}
    state.update(status="closed", closed=closed)
    entry = {
        "workspace": workspace,
        "app": app,
        "tool": tool,
        "version": doc.value["version"],
        "hash": doc.value["hash"],
        **closed,
    }
    record(
        services,
        workspace,
        [NewRecord(CLOSE_KIND, f"{key}@{doc.value['version']}", entry)],
        [DocWrite(workspace, MAPPINGS, key, state, doc.rev)],
    )
    return state
