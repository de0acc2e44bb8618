"""Oversight quality per owner, over a window (evidence.txt, "Oversight quality").

* ``false_stop_rate``: ``wrong_stop`` overrides ÷ stops and asks decided by the owner's
  rules. A check is *decided by* a rule when that rule, enforced, matched with the
  response Claros answered (stop or ask); an override counts for the owners of the rules
  that decided the check it is about.
* ``miss_rate``: ``missed`` reports naming one of the owner's rules ÷ actions let through
  (allowed or nudged) on maps where they own a rule. A *map* is an (app, tool) pair: the
  maps where someone owns a rule are the (app, tool) pairs their rules apply to. The
  repeat of an approved ask is not let through by the rules: it completes a write counted
  among the asks, so it is in neither denominator.
* ``approved_too_fast``: approvals decided under ``fast_seconds`` after the question
  opened.
* ``median_seconds_to_decide``: over the owner's approve and deny answers.

The owner's rules are the rule versions in force during the window that name them among
their owners. A rate is empty (null) when its denominator is zero. People who answered
asks without owning a rule (admins) get a row too, with only their answers.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from claros.check_rows import approved_repeat
from claros.clock import now_ms
from claros.evidence.activity import (
    DAY_MS,
    RuleVersion,
    Versions,
    deciding_rules,
    load_versions,
    records_between,
)
from claros.store.base import Store

__all__ = ["OversightCounter", "oversight", "rate"]


def rate(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


class OversightCounter:
    """Feed it the window's records (``add``) one at a time; ``result`` gives the rows."""

    def __init__(
        self,
        versions: Versions,
        *,
        start: int,
        end: int,
        fast_seconds: int,
        only: Callable[[RuleVersion], bool] = lambda v: True,
    ) -> None:
        self.versions = {k: v for k, v in versions.items() if only(v)}
        self.fast_ms = fast_seconds * 1000
        self.rules: dict[str, set[str]] = defaultdict(set)  # owner -> rule ids
        self.maps: dict[str, set[tuple[str, str]]] = defaultdict(set)  # owner -> maps
        self.owners_of: dict[str, set[str]] = defaultdict(set)  # rule id -> owners
        for version in self.versions.values():
            if not version.in_force(start, end):
                continue
            for owner in version.owners:
                self.rules[owner].add(version.id)
                self.maps[owner] |= version.maps()
                self.owners_of[version.id].add(owner)
        self.stops_and_asks: Counter[str] = Counter()
        self.wrong_stops: Counter[str] = Counter()
        self.missed: Counter[str] = Counter()
        self.through: Counter[tuple[str, str]] = Counter()  # (app, tool) -> allowed/nudged
        self.too_fast: Counter[str] = Counter()
        self.approvals: Counter[str] = Counter()
        self.seconds: dict[str, list[float]] = defaultdict(list)
        # Filled by the aggregates' reader instead of ``seconds``: (median, answers).
        self.medians: dict[str, tuple[float, int]] = {}

    def _owners(self, refs: Any, result: Any) -> set[str]:
        deciding = deciding_rules(refs, result, self.versions)
        return {owner for version in deciding for owner in version.owners}

    def add(self, kind: str, record: Mapping[str, Any]) -> None:
        if kind == "check":
            if approved_repeat(record):
                return
            result = record.get("result")
            if result in ("stop", "ask"):
                for owner in self._owners(record.get("rules"), result):
                    self.stops_and_asks[owner] += 1
            elif result in ("allow", "nudge"):
                self.through[(str(record.get("app")), str(record.get("tool")))] += 1
        elif kind == "override":
            verdict = record.get("verdict")
            if verdict == "wrong_stop":
                owners = self._owners(record.get("check_rules"), record.get("check_result"))
                for owner in owners:
                    self.wrong_stops[owner] += 1
            elif verdict == "missed":
                for owner in self.owners_of.get(str(record.get("rule_id")), ()):
                    self.missed[owner] += 1
        elif kind == "approval":
            self._answer(record)

    def _answer(self, record: Mapping[str, Any]) -> None:
        person = record.get("decided_by")
        if not person or record.get("decision") not in ("approve", "deny"):
            return
        try:
            waited = int(record["decided_at"]) - int(record["opened_at"])
        except (KeyError, TypeError, ValueError):
            return
        self.seconds[str(person)].append(waited / 1000)
        if record["decision"] == "approve":
            self.approvals[str(person)] += 1
            if waited < self.fast_ms:
                self.too_fast[str(person)] += 1

    def result(self) -> list[dict[str, Any]]:
        import statistics  # here, not at import: the evidence, export and admin cold starts

        rows = []
        for person in sorted(set(self.rules) | set(self.seconds) | set(self.medians)):
            through = sum(self.through[m] for m in self.maps.get(person, ()))
            answers = self.seconds.get(person, [])
            median = round(statistics.median(answers), 3) if answers else None
            count = len(answers)
            if person in self.medians:
                median, count = round(self.medians[person][0], 3), self.medians[person][1]
            stops = self.stops_and_asks[person]
            rows.append(
                {
                    "owner": person,
                    "rules": sorted(self.rules.get(person, ())),
                    "false_stop_rate": rate(self.wrong_stops[person], stops),
                    "wrong_stops": self.wrong_stops[person],
                    "stops_and_asks": stops,
                    "miss_rate": rate(self.missed[person], through),
                    "missed": self.missed[person],
                    "let_through": through,
                    "approved_too_fast": self.too_fast[person],
                    "approvals": self.approvals[person],
                    "median_seconds_to_decide": median,
                    "answers": count,
                }
            )
        return rows


def oversight(
    store: Store,
    workspace: str,
    *,
    days: int,
    fast_seconds: int,
    now: int | None = None,
    scan: bool = False,
    counter: OversightCounter | None = None,
) -> dict[str, Any]:
    """``GET /api/evidence/oversight``: per owner, over the last ``days``, from the hourly
    aggregates (``scan=True``: from every record of the window, the tests' reference)."""
    from claros.evidence.windowed import window_counters

    end = now if now is not None else now_ms()
    start = end - days * DAY_MS
    versions = load_versions(store, workspace)
    if scan:
        counter = OversightCounter(versions, start=start, end=end + 1, fast_seconds=fast_seconds)
        for entry, record in records_between(store, workspace, start, end + 1):
            counter.add(entry.kind, record)
    elif counter is None:
        counter = window_counters(
            store, workspace, versions, start=start, end=end + 1, fast_seconds=fast_seconds
        ).oversight
    return {
        "workspace": workspace,
        "days": days,
        "from": start,
        "until": end,
        "fast_seconds": fast_seconds,
        "owners": counter.result(),
    }
