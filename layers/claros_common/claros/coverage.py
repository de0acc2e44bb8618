"""Reading outcomes: coverage per agent and an outcome as a check's views show it. Apart
from claros.outcomes (the request models and records of reporting one), so the functions
that only read them (evidence, export, the admin API's coverage) import no pydantic.

Coverage per agent = checked writes / (checked writes + writes the guard saw run
unchecked), reported only for agents whose guard sends outcomes; ``ran_after_stop``
counts outcomes reported for a check that said stop. A write is counted once: the repeat
of an approved ask completes the write its ask was counted for (its outcome still counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from claros.check_rows import approved_repeat
from claros.clock import now_ms
from claros.store.base import Store

__all__ = ["OUTCOME_GUARDS", "CoverageCounter", "coverage", "coverage_between", "outcome_view"]

# Guards that report outcomes (and writes they let through unchecked). Coverage is only
# meaningful for agents behind one of these: a write that never reached Claros can't be
# counted otherwise.
OUTCOME_GUARDS = frozenset({"claros-guard", "claros-hooks"})


def outcome_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """An outcome as a check's views show it (``outcome: {status, summary, reported_at}``)."""
    return {k: row[k] for k in ("status", "summary", "reported_at") if row.get(k) is not None}


class CoverageCounter:
    """Coverage per agent from the records of a window, fed one at a time (``add``): the
    coverage route and the monthly report count the same way."""

    def __init__(self) -> None:
        self._agents: dict[str, dict[str, Any]] = {}

    def _slot(self, name: str) -> dict[str, Any]:
        return self._agents.setdefault(
            name,
            {"agent": name, "checked": 0, "unchecked": 0, "outcomes": 0, "ran_after_stop": 0,
             "guards": set()},
        )  # fmt: skip

    def add(self, kind: str, rec: Mapping[str, Any]) -> None:
        if kind in ("check", "unchecked"):
            agent = rec.get("agent") or {}
            s = self._slot(str(agent.get("name", "unknown")))
            # An approved repeat is no new write, but it shows the agent's guard all the
            # same (its ask may lie before the window while its outcome lies in it).
            if kind == "unchecked":
                s["unchecked"] += 1
            elif not approved_repeat(rec):
                s["checked"] += 1
            guard = (agent.get("via") or {}).get("guard")
            if guard:
                s["guards"].add(guard)
        elif kind == "outcome":
            s = self._slot(str(rec.get("agent") or "unknown"))
            s["outcomes"] += 1
            if rec.get("check_result") == "stop":
                s["ran_after_stop"] += 1

    def agents(self) -> list[dict[str, Any]]:
        out = []
        for name in sorted(self._agents):
            s = dict(self._agents[name])
            guards = sorted(s.pop("guards"))
            s["guards"] = guards
            reports = any(g in OUTCOME_GUARDS for g in guards)
            total = s["checked"] + s["unchecked"]
            s["coverage"] = round(s["checked"] / total, 4) if reports and total else None
            if not reports:
                s["coverage_note"] = "this agent's guard does not send outcomes: coverage unknown"
            out.append(s)
        return out


def coverage_between(store: Store, workspace: str, start: int, end: int) -> list[dict[str, Any]]:
    """Coverage per agent over the entries stamped in [start, end)."""
    from claros.evidence.activity import records_between

    counter = CoverageCounter()
    for entry, rec in records_between(store, workspace, start, end):
        counter.add(entry.kind, rec)
    return counter.agents()


def coverage(store: Store, workspace: str, *, days: int, now: int | None = None) -> dict[str, Any]:
    now = now or now_ms()
    since = now - days * 86_400_000
    # Up to now, and the clock skew past it: what a writer stamped a moment ahead counts.
    out = coverage_between(store, workspace, since, now + 60_000)
    return {"workspace": workspace, "days": days, "since": since, "agents": out}
