"""What the pages show, gathered from the domain code (no HTML here).

Home is per person: the asks routed to them, what their agents did (from their timeline,
each check with its outcome) and coverage per agent for the writes made for them; Rules
and Evidence are per workspace. A write asked and then approved is one write: the repeat
that carries the approval is neither counted again nor flagged (its ask was), though it
shows on the timeline with its outcome.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from claros.ask_queue import QueuePage, queue_page
from claros.asks import AskPage, ask_view, my_asks_page
from claros.auth import Principal
from claros.check_rows import approved_repeat
from claros.clock import now_ms
from claros.coverage import OUTCOME_GUARDS
from claros.evidence.span_cache import cached
from claros.evidence.windowed import HOME_PARTS, window_bucket
from claros.store.base import GLOBAL, Store
from claros.timeline import timeline

__all__ = [
    "AgentSummary",
    "CHART_DAYS",
    "WINDOWS",
    "checks_by_day",
    "near_misses",
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


def answered_asks(store: Store, principal: Principal, *, limit: int = 10) -> AskPage:
    """The newest asks routed to the person that are no longer open, and the cursor of the
    rest (Home links to them on the Asks page)."""
    return my_asks_page(store, principal, show="answered", limit=limit)


class AgentSummary:
    """One agent's counts on Home and the Agents page (a plain class: a dataclass cost the
    web function ~1 ms of CPU to define at cold start)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: dict[str, int] = {}
        self.flagged: list[dict[str, Any]] = []
        self.checked = 0
        self.unchecked = 0
        self.outcomes = 0
        self.ran_after_stop = 0
        self.guards: set[str] = set()

    @property
    def coverage(self) -> float | None:
        total = self.checked + self.unchecked
        reports = bool(self.guards & OUTCOME_GUARDS)
        return round(self.checked / total, 4) if reports and total else None

    @property
    def reports_outcomes(self) -> bool:
        return bool(self.guards & OUTCOME_GUARDS)


def _tail(store: Store, workspace: str, since_ts: int) -> Iterator[tuple[str, dict[str, Any]]]:
    # person_coverage's read of the ledger's tail (kept for its callers; Home counts from
    # the aggregates).
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


WINDOWS = (7, 30, 90)  # the window selector on Home (?days=)
CHART_DAYS = 30  # checks over time: the last 30 UTC days


def _agent_slots(
    store: Store, principal: Principal, bucket: Mapping[str, Any], workspace_wide: bool
) -> dict[str, AgentSummary]:
    """Counts per agent from a window's aggregate: the person's (checks made for them,
    unchecked writes and outcomes of their keys), or for an admin the workspace's."""
    agents: dict[str, AgentSummary] = {}
    owner = _KeyOwners(store)

    def slot(name: str) -> AgentSummary:
        return agents.setdefault(name, AgentSummary(name))

    people: Mapping[str, Any] = bucket.get("people") or {}
    for person, per_agent in people.items():
        if not workspace_wide and person != principal.person:
            continue
        for name, node in per_agent.items():
            s = slot(name)
            for result, n in (node.get("counts") or {}).items():
                s.counts[result] = s.counts.get(result, 0) + int(n)
                s.checked += int(n)
            s.guards |= set(node.get("guards") or [])
    for key_id, per_agent in (bucket.get("keys") or {}).items():
        if not workspace_wide and owner(key_id) != principal.person:
            continue
        for name, node in per_agent.items():
            s = slot(name)
            s.unchecked += int(node.get("unchecked", 0))
            s.outcomes += int(node.get("outcomes", 0))
            s.ran_after_stop += int(node.get("ran_after_stop", 0))
            s.guards |= set(node.get("guards") or [])
    return agents


def agents_of(
    store: Store,
    principal: Principal,
    *,
    days: int = COVERAGE_DAYS,
    now: int | None = None,
    workspace_wide: bool = False,
    bucket: Mapping[str, Any] | None = None,
) -> list[AgentSummary]:
    """Your agents over the last ``days``: what each did (counted from the aggregates, every
    check of the window), what it was stopped, asked or nudged on, and coverage per agent.
    ``workspace_wide`` (admins): every agent of the workspace, for whomever it acts."""
    now = now or now_ms()
    since_ts = now - days * 86_400_000
    if bucket is None:
        bucket = window_bucket(store, principal.workspace, since_ts, now + 1, only=HOME_PARTS)
    agents = _agent_slots(store, principal, bucket, workspace_wide)
    titles: dict[str, str] = {}

    def title(rule_id: str) -> str:
        if rule_id not in titles:
            doc = store.get_doc(principal.workspace, "rule", rule_id)
            titles[rule_id] = str(doc.value["rule"]["title"]) if doc else rule_id
        return titles[rule_id]

    if workspace_wide:
        _flagged_from_aggregate(store, principal.workspace, bucket, agents, title)
    else:
        _flagged_from_timeline(store, principal, agents, title, since_ts)
    return sorted(agents.values(), key=lambda a: (-sum(a.counts.values()), a.name))


def _flagged_from_aggregate(
    store: Store,
    workspace: str,
    bucket: Mapping[str, Any],
    agents: dict[str, AgentSummary],
    title: Any,
) -> None:
    """The latest flagged checks of each agent, with the answer to their ask and their
    outcome read from their records (a few reads per agent)."""
    for name, node in (bucket.get("flagged") or {}).items():
        summary = agents.setdefault(name, AgentSummary(name))
        for item in reversed(node.get("items") or []):
            shown = dict(item)
            check = store.get_record(workspace, "check", str(item["check_id"])) or {}
            ask_id = check.get("ask_id")
            approval = store.get_record(workspace, "approval", str(ask_id)) if ask_id else None
            if approval:
                shown["approval"] = approval
            outcome = store.get_record(workspace, "outcome", str(item["check_id"]))
            if outcome:
                shown["outcome"] = outcome
            shown["rules"] = [{"id": r, "title": title(r)} for r in item.get("rules") or []]
            summary.flagged.append(shown)


def _flagged_from_timeline(
    store: Store, principal: Principal, agents: dict[str, AgentSummary], title: Any, since: int
) -> None:
    """The person's flagged checks from their timeline (the newest few hundred): each with
    its outcome and approval, taken from the repeat of an approved write."""
    items = timeline(store, principal, limit=AGENT_ITEMS, before=None)["items"]
    repeats = {
        str(item["approval"].get("ask_id")): item
        for item in items
        if isinstance(item.get("approval"), Mapping)
    }
    for item in items:
        if int(item.get("ts") or 0) < since or approved_repeat(item):
            continue
        if str(item.get("result")) not in FLAGGED:
            continue
        repeat = repeats.get(str(item.get("ask_id"))) if item.get("ask_id") else None
        if repeat is not None and item.get("outcome") is None:
            item = {**item, "outcome": repeat.get("outcome"), "approval": repeat["approval"]}
        summary = agents.setdefault(
            str(item.get("agent") or "unknown"), AgentSummary(str(item.get("agent") or "unknown"))
        )
        if len(summary.flagged) >= 5:
            continue
        check = store.get_record(principal.workspace, "check", str(item["check_id"]))
        rules = [
            {**r, "title": title(str(r["id"]))}
            for r in (check or {}).get("rules") or []
            if r.get("matched")
        ]
        summary.flagged.append({**item, "rules": rules})


def checks_by_day(
    store: Store, principal: Principal, *, now: int, workspace_wide: bool, days: int = CHART_DAYS
) -> list[tuple[int, dict[str, int]]]:
    """Checks per UTC day by result over the last ``days`` days (today included), from the
    day aggregates: the person's, or the workspace's for an admin."""
    today = now // 86_400_000
    first = today - days + 1
    workspace = principal.workspace
    # The days before today are kept per ledger head (claros.evidence.span_cache); today's
    # bucket moves with every append and is read each time.
    found = dict(
        cached(
            store,
            workspace,
            ("days", first, today),
            first * 86_400_000,
            today * 86_400_000,
            lambda: _day_counts(store, workspace, first, today),
        )
    )
    found.update(_day_counts(store, workspace, today, today + 1))
    out = []
    for day in range(first, today + 1):
        per = found.get(day) or ({}, {})
        counts = dict(per[0] if workspace_wide else per[1].get(principal.person or "", {}))
        out.append((day * 86_400_000, counts))
    return out


def _day_counts(
    store: Store, workspace: str, first: int, last: int
) -> list[tuple[int, tuple[dict[str, int], dict[str, dict[str, int]]]]]:
    """Per day of [first, last): the checks by result, and per person (their agents')."""
    out = []
    for day, bucket in store.aggregate_buckets(workspace, first, last, span="day"):
        people: dict[str, dict[str, int]] = {}
        for person, per_agent in (bucket.get("people") or {}).items():
            mine = people.setdefault(str(person), {})
            for node in per_agent.values():
                for result, n in (node.get("counts") or {}).items():
                    mine[result] = mine.get(result, 0) + int(n)
        checks = {k: int(v) for k, v in (bucket.get("checks") or {}).items()}
        out.append((day, (checks, people)))
    return out


def near_misses(
    bucket: Mapping[str, Any], principal: Principal, *, workspace_wide: bool
) -> dict[str, Any]:
    """Near-misses by severity, each with its amounts by currency, over the window."""
    if workspace_wide:
        node: Mapping[str, Any] = bucket
    else:
        node = (bucket.get("people_near") or {}).get(principal.person or "") or {}
    severity = node.get("severity") or {}
    amounts = node.get("sev_amounts") or {}
    return {
        s: {
            "count": int(severity.get(s, 0)),
            "amounts": dict(sorted((amounts.get(s) or {}).items())),
        }
        for s in ("high", "medium", "low")
    }
