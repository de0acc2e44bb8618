"""Rules as the workspace keeps them: create, edit (a new version), close, list.

Every version is a ``rule_version`` ledger entry carrying the rule as written, its hash and
its confirm record; closing a version is its own ``rule_version_close`` entry. An edit
closes the old version and opens the new one in one transaction. The doc ``rule/<id>``
holds the current state, for deciding checks quickly.
"""

from __future__ import annotations

from typing import Any

from claros.auth import Principal
from claros.checkpoints import record
from claros.clock import now_ms
from claros.errors import ConflictError, NotFoundError
from claros.rules.model import Confirm, RuleSpec, rule_hash
from claros.store.base import DocWrite, NewRecord, Store
from claros.wiring import Services

__all__ = ["MAX_RULES", "active_rules", "close_rule", "get_rule", "list_rules", "put_rule"]

COLLECTION = "rule"
MAX_RULES = 1000  # per workspace; each check reads them all


def _version_ref(rule_id: str, version: int) -> str:
    return f"{rule_id}@{version}"


def get_rule(
    store: Store, workspace: str, rule_id: str, *, versions: bool = False
) -> dict[str, Any]:
    doc = store.get_doc(workspace, COLLECTION, rule_id)
    if doc is None:
        raise NotFoundError(f"no rule {rule_id!r}")
    state = dict(doc.value)
    if versions:
        state["versions"] = rule_versions(store, workspace, rule_id, int(state["version"]))
    return state


def rule_versions(store: Store, workspace: str, rule_id: str, latest: int) -> list[dict[str, Any]]:
    out = []
    for version in range(1, latest + 1):
        ref = _version_ref(rule_id, version)
        opened = store.get_record(workspace, "rule_version", ref)
        if opened is None:
            continue
        closed = store.get_record(workspace, "rule_version_close", ref)
        out.append({**opened, "closed": closed})
    return out


def list_rules(store: Store, workspace: str, *, versions: bool = False) -> list[dict[str, Any]]:
    docs = store.query_docs(workspace, COLLECTION, limit=MAX_RULES)
    out = []
    for doc in docs:
        state = dict(doc.value)
        if versions:
            state["versions"] = rule_versions(store, workspace, doc.key, int(state["version"]))
        out.append(state)
    return out


def active_rules(store: Store, workspace: str) -> list[dict[str, Any]]:
    return [
        doc.value
        for doc in store.query_docs(workspace, COLLECTION, limit=MAX_RULES)
        if doc.value.get("status") == "active"
    ]


def put_rule(
    services: Services, principal: Principal, spec: RuleSpec, made_by: str = "manual"
) -> tuple[dict[str, Any], bool]:
    """Create or edit a rule; returns (state, changed). An unchanged active rule makes no
    new version."""
    store, workspace = services.store, principal.workspace
    written = spec.written()
    digest = rule_hash(written)
    doc = store.get_doc(workspace, COLLECTION, spec.id)
    current = doc.value if doc else None
    if current and current["status"] == "active" and current["hash"] == digest:
        return dict(current), False
    if doc is None and len(store.query_docs(workspace, COLLECTION, limit=MAX_RULES)) >= MAX_RULES:
        raise ConflictError(f"a workspace holds at most {MAX_RULES} rules")
    now = now_ms()
    version = int(current["version"]) + 1 if current else 1
    confirm = Confirm.model_validate(
        {"made_by": made_by, "confirmed_by": principal.person or principal.key_id,
         "confirmed_at": now}
    ).model_dump()  # fmt: skip
    records = []
    if current and current["status"] == "active":
        records.append(_close_record(workspace, current, principal, now, "replaced by an edit"))
    records.append(
        NewRecord(
            "rule_version",
            _version_ref(spec.id, version),
            {
                "workspace": workspace,
                "rule_id": spec.id,
                "version": version,
                "hash": digest,
                "rule": written,
                "confirm": confirm,
            },
        )
    )
    state = {
        "id": spec.id,
        "version": version,
        "hash": digest,
        "rule": written,
        "confirm": confirm,
        "status": "active",
        "updated_at": now,
    }
    record(
        services,
        workspace,
        records,
        [DocWrite(workspace, COLLECTION, spec.id, state, doc.rev if doc else 0)],
    )
    return state, True


def _close_record(
    workspace: str, current: dict[str, Any], principal: Principal, now: int, reason: str
) -> NewRecord:
    return NewRecord(
        "rule_version_close",
        _version_ref(str(current["id"]), int(current["version"])),
        {
            "workspace": workspace,
            "rule_id": current["id"],
            "version": current["version"],
            "hash": current["hash"],
            "closed_by": principal.person or principal.key_id,
            "closed_at": now,
            "reason": reason,
        },
    )


def close_rule(
    services: Services, principal: Principal, rule_id: str, reason: str = ""
) -> dict[str, Any]:
    store, workspace = services.store, principal.workspace
    doc = store.get_doc(workspace, COLLECTION, rule_id)
    if doc is None:
        raise NotFoundError(f"no rule {rule_id!r}")
    if doc.value["status"] != "active":
        raise ConflictError(f"rule {rule_id!r} is closed already")
    now = now_ms()
    state = {**doc.value, "status": "closed", "updated_at": now}
    record(
        services,
        workspace,
        [_close_record(workspace, doc.value, principal, now, reason or "closed")],
        [DocWrite(workspace, COLLECTION, rule_id, state, doc.rev)],
    )
    return state
