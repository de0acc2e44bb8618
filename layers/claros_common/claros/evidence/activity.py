"""What the evidence reports read: rule versions as they were, and the records of a window.

Reports count from the ledger's own records (checks, approvals, overrides, outcomes,
unchecked writes), never from mutable docs, so each figure can be traced to entries an
auditor holds in an export.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from claros import jsonutil
from claros.ledger import Entry
from claros.store.base import Store

__all__ = [
    "CLOCK_SKEW_MS",
    "DAY_MS",
    "RuleVersion",
    "Versions",
    "deciding_rules",
    "first_seq_at",
    "load_versions",
    "records_between",
]

DAY_MS = 86_400_000
# Entries are stamped by the writer's clock; writers on several machines (Lambdas) may
# disagree a little, so a window's scan starts and stops this much beyond its edges.
CLOCK_SKEW_MS = 5 * 60 * 1000


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class RuleVersion(NamedTuple):
    """One version of a rule, as its ``rule_version`` record wrote it."""

    id: str
    version: int
    hash: str
    workflow_id: str
    app: str
    tools: tuple[str, ...]
    title: str
    response: str
    mode: str
    owners: tuple[str, ...]
    confirm: Mapping[str, Any]
    opened_at: int
    closed_at: int | None

    def in_force(self, start: int, end: int) -> bool:
        """In force at some moment of [start, end)."""
        return self.opened_at < end and (self.closed_at is None or self.closed_at >= start)

    def maps(self) -> set[tuple[str, str]]:
        return {(self.app, tool) for tool in self.tools}


Versions = dict[tuple[str, int], RuleVersion]


def _version(record: Mapping[str, Any]) -> RuleVersion:
    rule = record.get("rule") or {}
    confirm = record.get("confirm") or {}
    closed = record.get("closed") or {}
    return RuleVersion(
        id=str(record["rule_id"]),
        version=int(record["version"]),
        hash=str(record.get("hash", "")),
        workflow_id=str(rule.get("workflow_id", "")),
        app=str(rule.get("app", "")),
        tools=tuple(str(t) for t in rule.get("tools") or ()),
        title=str(rule.get("title", "")),
        response=str(rule.get("response", "")),
        mode=str(rule.get("mode", "enforce")),
        owners=tuple(str(o) for o in rule.get("owners") or ()),
        confirm=dict(confirm),
        opened_at=int(confirm.get("confirmed_at", 0)),
        closed_at=int(closed["closed_at"]) if closed.get("closed_at") is not None else None,
    )


def load_versions(store: Store, workspace: str) -> Versions:
    """Every version of every rule, from the ledger's own records: each ``rule_version``
    record with its ``rule_version_close`` (never pruned, one read of the kinds a prune
    keeps). Not from the rules' docs: a doc is not in the chain, and whoever may write one
    could set a rule's ``version`` back (or remove the doc) and so leave versions, and the
    checks made under them, out of a signed report whose chain verifies."""
    head = store.head(workspace)
    if head is None:
        return {}
    opened: list[tuple[str, dict[str, Any]]] = []
    closed: dict[str, Any] = {}
    for kept in store.kept_records(workspace, head.seq):
        if kept.kind == "rule_version":
            opened.append((kept.ref_id, jsonutil.loads(kept.raw)))
        elif kept.kind == "rule_version_close":
            closed[kept.ref_id] = jsonutil.loads(kept.raw)
    out: Versions = {}
    for ref_id, record in opened:
        version = _version({**record, "closed": closed.get(ref_id)})
        out[(version.id, version.version)] = version
    return out


def deciding_rules(refs: Any, result: str | None, versions: Versions) -> list[RuleVersion]:
    """The rule versions that decided a check's ``result``: enforced rules that matched
    with that response. ``refs`` are the check's ``rules`` (or an override's
    ``check_rules``): each names an id and version, and says whether it matched."""
    out = []
    for ref in refs or ():
        if not isinstance(ref, Mapping) or ref.get("matched") is not True:
            continue
        version = versions.get((str(ref.get("id")), _int(ref.get("version"))))
        if version is None:
            continue
        # A rule whose `when` was unknown answered by its on_unknown ("answered": "ask").
        response = ref.get("answered") or ref.get("response", version.response)
        mode = ref.get("mode", version.mode)
        if response == result and mode != "shadow":
            out.append(version)
    return out


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _entry_at(store: Store, workspace: str, seq: int) -> Entry | None:
    """The entry at ``seq``, or the first one after it."""
    return next(iter(store.entries(workspace, since=seq - 1, limit=1)), None)


def first_seq_at(store: Store, workspace: str, ts: int) -> int:
    """The smallest seq whose entry is stamped at or after ``ts`` (a binary search: a few
    reads, whatever the size of the log); past the head when there is none."""
    first = _entry_at(store, workspace, 1)
    head = store.head(workspace)
    if first is None or head is None:
        return 1
    lo, hi = first.seq, head.seq + 1
    while lo < hi:
        mid = (lo + hi) // 2
        entry = _entry_at(store, workspace, mid)
        if entry is None:
            hi = mid
        elif entry.ts < ts:
            lo = entry.seq + 1
        else:
            hi = mid
    return lo


def records_between(
    store: Store, workspace: str, start: int, end: int
) -> Iterator[tuple[Entry, dict[str, Any]]]:
    """The entries stamped in [start, end), each with its record (pruned ones are gone).

    The entries a writer's clock skew may have put among them (``CLOCK_SKEW_MS`` either
    side) are read too, but only the records stamped inside are parsed: a window's edge
    minute reads a few, and at a million entries ten minutes around it hold some sixty."""
    since = first_seq_at(store, workspace, start - CLOCK_SKEW_MS) - 1
    for entry, raw in store.entries_with_raw_records(workspace, since=since):
        if entry.ts >= end + CLOCK_SKEW_MS:
            return
        if start <= entry.ts < end and raw is not None:
            yield entry, jsonutil.loads(raw)
