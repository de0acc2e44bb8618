"""Rules as the workspace keeps them: create, edit (a new version), close, list.

Every version is a ``rule_version`` ledger entry carrying the rule as written, its hash and
its confirm record; closing a version is its own ``rule_version_close`` entry. An edit
closes the old version and opens the new one in one transaction. The doc ``rule/<id>``
holds the current state, for deciding checks quickly.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from claros.auth import Principal
from claros.checkpoints import record
from claros.clock import new_id, now_ms
from claros.errors import ConflictError, NotFoundError
from claros.rules.ruleset import RuleSet
from claros.store.base import ConflictError as StoreConflictError
from claros.store.base import Doc, DocWrite, NewRecord, Store
from claros.wiring import Services

if TYPE_CHECKING:  # the rule models (and the expression parser) only where rules are written:
    from claros.rules.model import RuleSpec  # the evidence functions read versions only

__all__ = [
    "MAX_RULES", "STAMP_DOC", "active_rules", "close_rule", "get_rule", "list_rules", "put_rule",
    "rules_under",
]  # fmt: skip

COLLECTION = "rule"
MAX_RULES = 1000  # per workspace; each check reads them all
# One doc per workspace, rewritten with a new random stamp in the same transaction as every
# change of a rule doc: a check reads this one small doc, and reads (and parses) the rules
# again only when the stamp differs from the one its cached copy was read under.
STAMP_COLLECTION = "rule_stamp"
STAMP_KEY = "rules"
STAMP_DOC = (STAMP_COLLECTION, STAMP_KEY)
_CACHE_WORKSPACES = 256  # cached rule sets per process, least recently used dropped


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


def _read_active(store: Store, workspace: str) -> RuleSet:
    return RuleSet(
        doc.value
        for doc in store.query_docs(workspace, COLLECTION, limit=MAX_RULES)
        if doc.value.get("status") == "active"
    )


# (id(store), workspace) -> (stamp, rules). The stamp is random per change, so a cached set
# is used only while the store still holds the stamp it was read under; the store's id is
# part of the key so two stores in one process (tests, the CLI) never share an entry.
_cache: OrderedDict[tuple[int, str], tuple[str, RuleSet]] = OrderedDict()
_cache_lock = threading.Lock()


def active_rules(store: Store, workspace: str) -> RuleSet:
    """The workspace's active rules, as the store holds them now. Callers must not change
    them: they are shared by every check until a rule changes (and ``decide`` keeps what
    it works out from them with them, claros.rules.ruleset.RuleSet)."""
    return rules_under(store, workspace, store.get_doc(workspace, *STAMP_DOC))


def rules_under(store: Store, workspace: str, stamp_doc: Doc | None) -> RuleSet:
    """``active_rules`` with the stamp doc (``STAMP_DOC``) already read, by a caller that
    reads it together with other docs: the rules are read (or found cached) after it."""
    if stamp_doc is None:
        # Rules written before the stamp existed (or none at all): read them every time;
        # the next rule change writes the stamp.
        return _read_active(store, workspace)
    stamp = str(stamp_doc.value.get("stamp"))
    key = (id(store), workspace)
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None and cached[0] == stamp:
            _cache.move_to_end(key)
            return cached[1]
    # Read after the stamp: a change committed in between gives a newer stamp, so the
    # next check reads again rather than keep a set older than its stamp says.
    rules = _read_active(store, workspace)
    with _cache_lock:
        _cache[key] = (stamp, rules)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_WORKSPACES:
            _cache.popitem(last=False)
    return rules


def _stamp(workspace: str, expect_rev: int | None = None) -> DocWrite:
    """The write that tells every process's cache the workspace's rules changed (only
    while the stamp is at ``expect_rev``, when given)."""
    return DocWrite(workspace, STAMP_COLLECTION, STAMP_KEY, {"stamp": new_id("rs")}, expect_rev)


def put_rule(
    services: Services, principal: Principal, spec: RuleSpec, made_by: str = "manual"
) -> tuple[dict[str, Any], bool]:
    """Create or edit a rule; returns (state, changed). An unchanged active rule makes no
    new version."""
    from claros.rules.model import Confirm, rule_hash

    store, workspace = services.store, principal.workspace
    written = spec.written()
    digest = rule_hash(written)
    doc = store.get_doc(workspace, COLLECTION, spec.id)
    current = doc.value if doc else None
    if current and current["status"] == "active" and current["hash"] == digest:
        return dict(current), False
    stamp_rev: int | None = None  # an edit changes no count: its stamp goes as before
    if doc is None:
        # Counted, then written only if no rule changed meanwhile (the stamp doc is still
        # the one read before the count): two saves that count at once cannot both add
        # the last rule, which checks would never read
        # (tests/security/test_two_admins_pass_the_rule_limit.py).
        stamp = store.get_doc(workspace, *STAMP_DOC)
        stamp_rev = stamp.rev if stamp is not None else 0
        if len(store.query_docs(workspace, COLLECTION, limit=MAX_RULES)) >= MAX_RULES:
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
    try:
        record(
            services,
            workspace,
            records,
            [
                DocWrite(workspace, COLLECTION, spec.id, state, doc.rev if doc else 0),
                _stamp(workspace, stamp_rev),
            ],
        )
    except StoreConflictError as exc:
        if exc.collection != STAMP_COLLECTION:
            raise
        raise ConflictError(
            f"rule {spec.id!r} was not saved: another rule was saved while this one was "
            f"counted against the limit of {MAX_RULES}; send it again"
        ) from exc
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
        [DocWrite(workspace, COLLECTION, rule_id, state, doc.rev), _stamp(workspace)],
    )
    return state
