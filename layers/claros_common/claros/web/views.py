"""What the pages show, gathered from the domain code (no HTML here).

Home is per person: the asks routed to them, what their agents did (from their timeline,
each check with its outcome) and coverage per agent for the writes made for them; Rules
and Evidence are per workspace. A write asked and then approved is one write: the repeat
that carries the approval is neither counted again nor flagged (its ask was), though it
shows on the timeline with its outcome.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claros.ask_queue import QueuePage, queue_page
from claros.asks import ask_view, list_my_asks
from claros.auth import Principal
from claros.checks import approved_repeat
from claros.clock import now_ms
from claros.outcomes import OUTCOME_GUARDS
from claros.store.base import GLOBAL, Store
from claros.timeline import timeline

__all__ = [
    "AgentSummary",
    "COVERAGE_DAYS",
    "COVERAGE_WINDOW",
    "agents_of",
    "answered_asks",
    "ask_items",
    "open_asks",
    "person_coverage",
    "waiting",
]

COVERAGE_DAYS = 30
# Coverage reads the ledger's tail: at most this many entries back from the head.
COVERAGE_WINDOW = 20_000
AGENT_ITEMS = 500  # timeline items read for "Your agents"
FLAGGED = ("stop", "ask", "nudge")


def ask_items(
    store: Store, principal: Principal, asks: Sequence[Mapping[str, Any]], now: int
) -> list[dict[str, Any]]:
    """Open asks as the pages show them: each with its call (from the check row) and
    whether the signed-in key is the one that asked or derived from it (it cannot answer)."""
    out = []
    for raw in asks:
        check = store.get_record(principal.workspace, "check", str(raw["check_id"]))
        out.append(
            {
                **ask_view(raw, now),
                "own_key": principal.derives_from(str(raw.get("key_id"))),
                "arguments": (check or {}).get("arguments") or {},
                "agent": (check or {}).get("agent") or {},
                "amount": (check or {}).get("amount"),
                "currency": (check or {}).get("currency"),
                "severity": (check or {}).get("severity"),
            }
        )
    return out


def waiting(
    store: Store, principal: Principal, *, limit: int = 50, mine: bool = True,
    after: str | None = None,
) -> tuple[list[dict[str, Any]], QueuePage]:  # fmt: skip
    """A page of the open asks (routed to the person, or with ``mine=False`` all they may
    answer), soonest-expiring first, and the page (its open count and next cursor)."""
    now = now_ms()
    found = queue_page(store, principal, after=after, limit=limit, mine=mine, now=now)
    return ask_items(store, principal, found.asks, now), found


def open_asks(store: Store, principal: Principal, *, limit: int = 50) -> list[dict[str, Any]]:
    """The first ``limit`` open asks routed to the person (see ``waiting`` for the rest)."""
    return waiting(store, principal, limit=limit)[0]


def answered_asks(store: Store, principal: Principal, *, limit: int = 10) -> list[dict[str, Any]]:
    found = list_my_asks(store, principal, include_closed=True, limit=limit * 3)
    return [a for a in found if a["status"] != "open"][:limit]


@dataclass
class AgentSummary:
    name: str
    counts: dict[str, int] = field(default_factory=dict)
    flagged: list[dict[str, Any]] = field(default_factory=list)
    checked: int = 0
    unchecked: int = 0
    outcomes: int = 0
    ran_after_stop: int = 0
    guards: set[str] = field(default_factory=set)

    @property
    def coverage(self) -> float | None:
        total = self.checked + self.unchecked
        reports = bool(self.guards & OUTCOME_GUARDS)
        return round(self.checked / total, 4) if reports and total else None

    @property
    def reports_outcomes(self) -> bool:
        return bool(self.guards & OUTCOME_GUARDS)


def _tail(store: Store, workspace: str, since_ts: int) -> Iterator[tuple[str, dict[str, Any]]]:
    head = store.head(workspace)
    if head is None:
        return
    since = max(0, head.seq - COVERAGE_WINDOW)
    for entry, record in store.entries_with_records(workspace, since=since):
        if entry.ts >= since_ts and record is not None:
            yield entry.kind, record


class _KeyOwners:
    """key_id (16 hex) -> the person whose key it is (None for a service key)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.known: dict[str, str | None] = {}

    def __call__(self, key_id: str) -> str | None:
        if key_id not in self.known:
            docs = self.store.query_docs(GLOBAL, "key", prefix=key_id, limit=1)
            self.known[key_id] = str(docs[0].value.get("person") or "") or None if docs else None
        return self.known[key_id]


def person_coverage(
    store: Store, principal: Principal, *, days: int = COVERAGE_DAYS, now: int | None = None
) -> dict[str, AgentSummary]:
    """Coverage per agent for the writes made for this person: checked writes (checks on
    their behalf) / (checked + writes their keys' guards saw run unchecked), over ``days``
    and the ledger's last ``COVERAGE_WINDOW`` entries. Only for agents whose guard sends
    outcomes; for the others it stays empty, as in the workspace report."""
    person = principal.person
    since_ts = (now or now_ms()) - days * 86_400_000
    agents: dict[str, AgentSummary] = {}
    mine: set[str] = set()
    owner = _KeyOwners(store)

    def slot(name: object) -> AgentSummary:
        key = str(name or "unknown")
        return agents.setdefault(key, AgentSummary(key))

    for kind, rec in _tail(store, principal.workspace, since_ts):
        agent: Mapping[str, Any] = rec.get("agent") or {}
        if kind == "check" and rec.get("on_behalf_of") == person:
            s = slot(agent.get("name"))
            if not approved_repeat(rec):
                s.checked += 1
            guard = (agent.get("via") or {}).get("guard")
            if guard:
                s.guards.add(str(guard))
            # Repeats too: the outcome of an approved write is reported against its repeat.
            mine.add(str(rec.get("check_id")))
        elif kind == "unchecked" and owner(str(rec.get("key_id"))) == person:
            s = slot(agent.get("name"))
            s.unchecked += 1
            guard = (agent.get("via") or {}).get("guard")
            if guard:
                s.guards.add(str(guard))
        elif kind == "outcome" and str(rec.get("check_id")) in mine:
            s = slot(rec.get("agent"))
            s.outcomes += 1
            if rec.get("check_result") == "stop":
                s.ran_after_stop += 1
    return agents


def agents_of(store: Store, principal: Principal, *, now: int | None = None) -> list[AgentSummary]:
    """Your agents: what each was stopped, asked or nudged on (from the person's timeline),
    with coverage per agent."""
    now = now or now_ms()
    since_ts = now - COVERAGE_DAYS * 86_400_000
    agents = person_coverage(store, principal, now=now)
    titles: dict[str, str] = {}

    def title(rule_id: str) -> str:
        if rule_id not in titles:
            doc = store.get_doc(principal.workspace, "rule", rule_id)
            titles[rule_id] = str(doc.value["rule"]["title"]) if doc else rule_id
        return titles[rule_id]

    items = timeline(store, principal, limit=AGENT_ITEMS, before=None)["items"]
    # An approved write's outcome is reported against its repeat; its ask, the row that is
    # flagged, shows it (when the repeat is among the items read).
    repeats = {
        str(item["approval"].get("ask_id")): item
        for item in items
        if isinstance(item.get("approval"), Mapping)
    }
    for item in items:
        if int(item.get("ts") or 0) < since_ts or approved_repeat(item):
            continue
        repeat = repeats.get(str(item.get("ask_id"))) if item.get("ask_id") else None
        if repeat is not None and item.get("outcome") is None:
            item = {**item, "outcome": repeat.get("outcome"), "approval": repeat["approval"]}
        summary = agents.setdefault(
            str(item.get("agent") or "unknown"), AgentSummary(str(item.get("agent") or "unknown"))
        )
        result = str(item.get("result"))
        summary.counts[result] = summary.counts.get(result, 0) + 1
        if result in FLAGGED and len(summary.flagged) < 5:
            check = store.get_record(principal.workspace, "check", str(item["check_id"]))
            rules = [
                {**r, "title": title(str(r["id"]))}
                for r in (check or {}).get("rules") or []
                if r.get("matched")
            ]
            summary.flagged.append({**item, "rules": rules})
    return sorted(agents.values(), key=lambda a: (-sum(a.counts.values()), a.name))
