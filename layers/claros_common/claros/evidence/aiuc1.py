"""The AIUC-1 evidence pack (AIUC-1, Q4 2026 release), keyed by control.

Each control lists what Claros holds, sample records and the gaps it states. Gaps are
computed where Claros can tell (rules with no owner, listed by id; "no retention set" only
when none is set); the others are what Claros does not do at all. The pack is evidence
for an audit, not a certification.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from claros import jsonutil
from claros.aggregates import RECORD_SAMPLES, is_reference, sample_of
from claros.check_rows import approved_repeat
from claros.clock import now_ms
from claros.evidence.activity import DAY_MS, Versions, load_versions, records_between
from claros.evidence.report import ActivityCounter
from claros.evidence.retention import get_retention
from claros.evidence.verified import verified_report
from claros.evidence.windowed import Counters, scan_counters, window_counters
from claros.rules.service import list_rules
from claros.store.base import Store
from claros.webhook import webhook_configured

__all__ = ["FRAMEWORK", "aiuc1_pack"]

FRAMEWORK = "AIUC-1, Q4 2026 release"
NOTE = "Evidence for an audit, not a certification."
SAMPLES = 3
# The tool call log fields each check row holds (evidence.txt, "What each check row holds").
CHECK_FIELDS = [
    "check_id", "ts", "app", "tool", "arguments", "agent.name", "agent.model",
    "agent.version", "agent.session", "agent.call_id", "agent.via", "on_behalf_of",
    "obo_source", "result", "rules[].id", "rules[].version", "rules[].hash",
    "rules[].confirm", "rules[].matched", "severity", "amount", "currency", "ask_id",
]  # fmt: skip


_APPROVAL = ("ask_id", "check_id", "decision", "authority", "decided_by", "opened_at",
             "decided_at")  # fmt: skip
_OVERRIDE = ("override_id", "check_id", "verdict", "rule_id", "by", "at")


class _Samples:
    """The last few records of each sort, trimmed to what identifies them."""

    def __init__(self) -> None:
        self.stops: deque[dict[str, Any]] = deque(maxlen=SAMPLES)
        self.approvals: deque[dict[str, Any]] = deque(maxlen=SAMPLES)
        self.near: deque[dict[str, Any]] = deque(maxlen=SAMPLES)
        self.with_rules: deque[dict[str, Any]] = deque(maxlen=SAMPLES)
        self.overrides: deque[dict[str, Any]] = deque(maxlen=SAMPLES)
        self.obo: Counter[str] = Counter()
        self.checks = 0

    @classmethod
    def from_bucket(cls, bucket: Mapping[str, Any], store: Store, workspace: str) -> _Samples:
        """The same samples from a window's aggregate (``claros.evidence.windowed``): the
        ones it keeps as references built from their records (``RECORD_SAMPLES``)."""
        samples = cls()
        for name in ("stops", "approvals", "near", "with_rules", "overrides"):
            kept = bucket.get(f"s_{name}") or []
            if f"s_{name}" in RECORD_SAMPLES:
                kept = _built(store, workspace, f"s_{name}", kept)
            getattr(samples, name).extend(kept)
        samples.obo = Counter(bucket.get("obo") or {})
        samples.checks = sum((bucket.get("checks") or {}).values())
        return samples

    def add(self, seq: int, kind: str, rec: Mapping[str, Any]) -> None:
        if kind == "check":
            self._check(seq, rec)
        elif kind == "approval":
            self.approvals.append({"seq": seq, **{k: rec.get(k) for k in _APPROVAL}})
        elif kind == "override":
            self.overrides.append({"seq": seq, **{k: rec.get(k) for k in _OVERRIDE}})

    def _check(self, seq: int, rec: Mapping[str, Any]) -> None:
        if approved_repeat(rec):
            # Completes a write already counted (and sampled) through its ask.
            return
        self.checks += 1
        self.obo[str(rec.get("obo_source") or "none")] += 1
        brief = {
            "seq": seq,
            **{k: rec.get(k) for k in ("check_id", "ts", "app", "tool", "result")},
            "agent": rec.get("agent"),
            "on_behalf_of": rec.get("on_behalf_of"),
        }
        if rec.get("result") == "stop":
            self.stops.append({**brief, "rules": rec.get("rules")})
        if rec.get("severity"):
            near = {k: rec.get(k) for k in ("severity", "amount", "currency")}
            self.near.append({**brief, **near})
        if rec.get("rules"):
            rules = [
                {k: r.get(k) for k in ("id", "version", "hash", "confirm", "matched")}
                for r in rec["rules"]
            ]
            self.with_rules.append({**brief, "rules": rules})


def _built(
    store: Store, workspace: str, key: str, kept: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Samples ``key`` of a window's aggregate, each reference (``{"seq": n}``) built from
    the check record at its seq, as the scan builds it. A window's aggregate reads no hour
    holding entries a prune removed, so every record is there; one gone all the same
    (deleted behind Claros's back, which verify reports) leaves its sample out."""
    out = []
    for sample in kept:
        if not is_reference(sample):
            out.append(sample)
            continue
        seq = int(sample["seq"])
        for entry, raw in store.entries_with_raw_records(workspace, since=seq - 1, limit=1):
            if entry.seq == seq and entry.kind == "check" and raw is not None:
                out.append(sample_of(key, seq, jsonutil.loads(raw)))
    return out


def _rules(store: Store, workspace: str, versions: Versions) -> dict[str, Any]:
    current = list_rules(store, workspace)
    active = [r for r in current if r.get("status") == "active"]
    owned = [
        {"id": r["id"], "owners": r["rule"].get("owners") or []}
        for r in active
        if r["rule"].get("owners")
    ]
    unowned = sorted(str(r["id"]) for r in active if not r["rule"].get("owners"))
    made_by: Counter[str] = Counter()
    confirmers: Counter[str] = Counter()
    for v in versions.values():
        made_by[str(v.confirm.get("made_by"))] += 1
        confirmers[str(v.confirm.get("confirmed_by"))] += 1
    stop_and_ask = [
        {"id": r["id"], "version": r["version"], "response": r["rule"]["response"],
         "title": r["rule"].get("title")}
        for r in active
        if r["rule"].get("response") in ("stop", "ask")
    ]  # fmt: skip
    drafted = sum(n for source, n in made_by.items() if source in ("override", "precedents"))
    return {
        "active": len(active),
        "owned": owned,
        "unowned": unowned,
        "versions_by_source": dict(sorted(made_by.items())),
        "versions_by_confirmer": dict(sorted(confirmers.items())),
        "stop_and_ask": stop_and_ask,
        "drafted_from_reviews": drafted,
    }


def aiuc1_pack(
    store: Store,
    workspace: str,
    *,
    days: int,
    fast_seconds: int,
    now: int | None = None,
    scan: bool = False,
    counters: Counters | None = None,
    keep_state: bool = True,
) -> dict[str, Any]:
    """The pack over the last ``days``, counted from the hourly aggregates; ``scan=True``
    feeds every record of the window instead (the reference the tests compare with).
    ``counters``: that window's, counted already (the Evidence page shares them).
    ``keep_state``: save the verified-through state it advances (Settings.role_writes)."""
    end = now if now is not None else now_ms()
    start = end - days * DAY_MS
    versions = load_versions(store, workspace)
    window = {"start": start, "end": end + 1, "fast_seconds": fast_seconds}
    if scan:
        counters = scan_counters(store, workspace, versions, **window)
        samples = _Samples()
        for entry, rec in records_between(store, workspace, start, end + 1):
            samples.add(entry.seq, entry.kind, rec)
    else:
        if counters is None:
            counters = window_counters(store, workspace, versions, **window)
        samples = _Samples.from_bucket(counters.bucket, store, workspace)
    activity, coverage, oversight = counters.activity, counters.coverage, counters.oversight
    rules = _rules(store, workspace, versions)
    retention = get_retention(store, workspace)
    # The verified-through state (claros.evidence.verified), brought up to the head.
    chain = verified_report(store, workspace, keep=keep_state).to_json()
    chain["failures"] = chain["failures"][:20]
    agents = coverage.agents()
    checks = activity.checks_json()
    return {
        "framework": FRAMEWORK,
        "note": NOTE,
        "workspace": workspace,
        "days": days,
        "from": start,
        "until": end,
        "generated_at": end,
        "controls": {
            "D003": _d003(checks, activity, samples),
            "B006": _b006(store, workspace, agents, samples),
            "E004": _e004(rules, samples),
            "E015": _e015(samples, activity, retention, chain),
            "C007": _c007(rules, oversight.result(), samples),
            "C009": _c009(checks, activity, rules, samples),
        },
    }


def _d003(checks: dict[str, Any], activity: ActivityCounter, s: _Samples) -> dict[str, Any]:
    return {
        "title": "Restrict unsafe tool calls",
        "holds": {
            "checks_by_result": checks["by_result"],
            "checks": checks["total"],
            "tool_call_log_fields": CHECK_FIELDS,
            "approvals": activity.approvals_json(),
        },
        "samples": {"stops": list(s.stops), "approvals": list(s.approvals)},
        "gaps": [
            "No native rate limits or cumulative caps",
            "MCP server and tool versions not recorded",
            "No record of a person reviewing the log",
        ],
    }


def _b006(
    store: Store, workspace: str, agents: list[dict[str, Any]], s: _Samples
) -> dict[str, Any]:
    unseen = sorted(a["agent"] for a in agents if a["coverage"] is None)
    gaps = [
        "Access is per workspace key",
        "No alerting beyond asks",
        "Agents without the guard are unseen",
    ]
    if unseen:
        gaps.append(
            f"Coverage unknown for agents whose guard sends no outcomes: {', '.join(unseen)}"
        )
    return {
        "title": "Prevent unauthorized agent actions",
        "holds": {
            "coverage_by_agent": agents,
            "coverage_measured_as": "checked writes ÷ (checked writes + writes the guard saw run "
            "unchecked), for agents whose guard sends outcomes (the MCP guard, Claude Code hooks)",
            "ask_webhook_configured": webhook_configured(store, workspace),
            "json_stream": "GET /api/evidence/stream?since=<seq>&limit=",
        },
        "samples": {"stops": list(s.stops)},  # agent actions refused before they ran
        "gaps": gaps,
    }


def _e004(rules: dict[str, Any], s: _Samples) -> dict[str, Any]:
    gaps = []
    if rules["unowned"]:
        gaps.append(f"Rules with no owner: {', '.join(rules['unowned'])}")
    gaps.append("Rule changes chained, not signed by the approver")
    return {
        "title": "Assign accountability",
        "holds": {
            "rules_with_owner": rules["owned"],
            "rule_versions_by_source": rules["versions_by_source"],
            "rule_versions_by_confirmer": rules["versions_by_confirmer"],
            "per_check": "each check row names every rule that applied: version, hash (sha256 "
            "of the rule as written) and confirm record",
        },
        "samples": {"checks_with_rules": list(s.with_rules)},
        "gaps": gaps,
    }


def _e015(
    s: _Samples, activity: ActivityCounter, retention: dict[str, Any], chain: dict[str, Any]
) -> dict[str, Any]:
    gaps = [
        "No cryptographic per-agent identity",
        "Sub-agent delegation not recorded",
        "Anchoring is up to you",
    ]
    if retention.get("days") is None:
        gaps.append("No retention set")
    return {
        "title": "Log AI system activity",
        "holds": {
            "checks": s.checks,
            "checks_by_obo_source": dict(sorted(s.obo.items())),
            "approvals_linked_to_checks": activity.approvals_json()["total"],
            "retention": retention,
            "chain_verify": chain,
        },
        "samples": {
            "checks": [
                {k: c.get(k) for k in ("seq", "check_id", "agent", "on_behalf_of")}
                for c in s.with_rules or s.stops or s.near
            ]
        },  # fmt: skip
        "gaps": gaps,
    }


def _c007(rules: dict[str, Any], oversight: list[dict[str, Any]], s: _Samples) -> dict[str, Any]:
    return {
        "title": "Flag high-risk outputs",
        "holds": {"stop_and_ask_rules": rules["stop_and_ask"], "oversight": oversight},
        "samples": {"near_misses": list(s.near)},  # flagged checks, with their severity
        "gaps": ["No review SLA"],
    }


def _c009(
    checks: dict[str, Any], activity: ActivityCounter, rules: dict[str, Any], s: _Samples
) -> dict[str, Any]:
    by = checks["by_result"]
    return {
        "title": "Real-time intervention",
        "holds": {
            "stops": by.get("stop", 0),
            "asks": by.get("ask", 0),
            "nudges": by.get("nudge", 0),
            "overrides": activity.overrides_json(),
            "rule_versions_drafted_from_reviews": rules["drafted_from_reviews"],
            "near_misses": {k: v for k, v in activity.near_misses_json().items() if k != "latest"},
        },
        "samples": {"near_misses": list(s.near), "overrides": list(s.overrides)},
        "gaps": ["No control to pause an agent"],
    }
