"""The signed monthly report, per workflow and calendar month (UTC).

It holds the rules in force (version, hash, owner, response, confirmer), check counts by
result, near-misses, approvals by decision and authority, overrides by verdict, coverage
by agent, oversight per owner, the chain's verify result and a fresh signed checkpoint.

Checks are counted as writes, each once, by what the rules answered: a write asked and
then approved counts as one ask (and its answer under approvals). The repeat that carries
the approval, a check row of its own that answers allow, is counted apart
(``approved_repeats``), never as an allow or a second near-miss, so ``total`` +
``approved_repeats`` is the number of check entries an auditor finds in the export.

A record belongs to the workflow when it names one of the workflow's rule versions: a
check through its ``rules`` (every rule that applied to the call), an approval through
its ``rules``, an override through its check's rules or the rule it names; an outcome
through its check; an unchecked write when its (app, tool) is one the workflow's rules
apply to.

The JSON is signed with the workspace's ledger key through the Signer (a key file
locally, KMS in AWS): Ed25519 over the 32-byte sha256 of the report as canonical JSON.
``python -m claros.ledger verify-report report.json`` checks it.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from claros.canonical import canonical_bytes
from claros.check_rows import approved_repeat
from claros.checkpoints import sign_checkpoint
from claros.clock import now_ms
from claros.coverage import CoverageCounter
from claros.errors import BadRequestError, NotFoundError
from claros.evidence.activity import RuleVersion, Versions, load_versions, records_between
from claros.evidence.oversight import OversightCounter
from claros.evidence.verify import verify_workspace
from claros.ledger import PublicKey, key_id_for, verify_signature
from claros.store.base import Store
from claros.wiring import Services

__all__ = [
    "REPORT_FORMAT",
    "ActivityCounter",
    "build_report",
    "month_window",
    "render_html",
    "sign_report",
    "verify_signed_report",
]

REPORT_FORMAT = "claros-report/1"
NEAR_MISS_ITEMS = 50
# ASCII digits only (\d would take other scripts' digits), and years the ledger can hold.
_MONTH = re.compile(r"^([0-9]{4})-(0[1-9]|1[0-2])$")
FIRST_YEAR, LAST_YEAR = 1970, 9998
RESULTS = ("allow", "nudge", "ask", "stop")


def month_window(month: str) -> tuple[int, int]:
    """[start, end) of a calendar month (UTC), in ms."""
    found = _MONTH.match(month or "")
    if not found:
        raise BadRequestError(f"query parameter month must be YYYY-MM, not {month!r}")
    year, mon = int(found.group(1)), int(found.group(2))
    if not FIRST_YEAR <= year <= LAST_YEAR:
        raise BadRequestError(
            f"query parameter month must be between {FIRST_YEAR}-01 and {LAST_YEAR}-12, "
            f"not {month!r}"
        )
    # datetime, not calendar.timegm: calendar imports locale, for every cold start of the
    # functions that import this module
    start = dt.datetime(year, mon, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + mon // 12, mon % 12 + 1, 1, tzinfo=dt.UTC)
    return int(start.timestamp()) * 1000, int(end.timestamp()) * 1000


class ActivityCounter:
    """Check counts by result, near-misses, approvals, overrides: fed record by record."""

    def __init__(self) -> None:
        self.checks: Counter[str] = Counter()
        self.repeats = 0
        self.severity: Counter[str] = Counter()
        self.amounts: dict[str, Decimal] = {}
        self.near: deque[dict[str, Any]] = deque(maxlen=NEAR_MISS_ITEMS)
        self.decisions: Counter[str] = Counter()
        self.authorities: Counter[str] = Counter()
        self.verdicts: Counter[str] = Counter()

    def add(self, seq: int, kind: str, rec: Mapping[str, Any]) -> None:
        if kind == "check":
            if approved_repeat(rec):
                self.repeats += 1
                return
            self.checks[str(rec.get("result"))] += 1
            if rec.get("severity"):
                self._near_miss(seq, rec)
        elif kind == "approval":
            self.decisions[str(rec.get("decision"))] += 1
            self.authorities[str(rec.get("authority"))] += 1
        elif kind == "override":
            self.verdicts[str(rec.get("verdict"))] += 1

    def _near_miss(self, seq: int, rec: Mapping[str, Any]) -> None:
        self.severity[str(rec["severity"])] += 1
        amount = rec.get("amount")
        currency = str(rec.get("currency") or "unknown")
        if amount is not None:
            try:
                self.amounts[currency] = self.amounts.get(currency, Decimal(0)) + Decimal(
                    str(amount)
                )
            except ArithmeticError:
                pass
        self.near.append(
            {
                "seq": seq,
                "check_id": rec.get("check_id"),
                "ts": rec.get("ts"),
                "app": rec.get("app"),
                "tool": rec.get("tool"),
                "result": rec.get("result"),
                "severity": rec.get("severity"),
                "amount": str(amount) if amount is not None else None,
                "currency": rec.get("currency"),
                "rules": [r.get("id") for r in rec.get("rules") or [] if r.get("matched")],
            }
        )

    def checks_json(self) -> dict[str, Any]:
        by_result = {r: self.checks.get(r, 0) for r in RESULTS}
        by_result.update({k: v for k, v in self.checks.items() if k not in by_result})
        return {
            "total": sum(self.checks.values()),
            "by_result": by_result,
            "approved_repeats": self.repeats,
        }

    def near_misses_json(self) -> dict[str, Any]:
        return {
            "total": sum(self.severity.values()),
            "by_severity": {s: self.severity.get(s, 0) for s in ("high", "medium", "low")},
            "amounts_by_currency": {c: str(a) for c, a in sorted(self.amounts.items())},
            "latest": list(self.near),
        }

    def approvals_json(self) -> dict[str, Any]:
        return {
            "total": sum(self.decisions.values()),
            "by_decision": dict(sorted(self.decisions.items())),
            "by_authority": dict(sorted(self.authorities.items())),
        }

    def overrides_json(self) -> dict[str, Any]:
        return {
            "total": sum(self.verdicts.values()),
            "by_verdict": dict(sorted(self.verdicts.items())),
        }


def _rule_json(v: RuleVersion) -> dict[str, Any]:
    return {
        "id": v.id,
        "version": v.version,
        "hash": v.hash,
        "title": v.title,
        "owners": list(v.owners),
        "response": v.response,
        "mode": v.mode,
        "confirm": dict(v.confirm),
        "confirmed_by": v.confirm.get("confirmed_by"),
        "in_force_from": v.opened_at,
        "in_force_until": v.closed_at,
    }


class _Workflow:
    """Which records belong to one workflow."""

    def __init__(self, store: Store, workspace: str, versions: Versions, start: int, end: int):
        self.store, self.workspace = store, workspace
        self.versions = versions
        self.ids = {v.id for v in versions.values()}
        self.maps: set[tuple[str, str]] = set()
        for v in versions.values():
            if v.in_force(start, end):
                self.maps |= v.maps()
        self.checks: set[str] = set()

    def _names(self, refs: Any) -> bool:
        for ref in refs or ():
            if isinstance(ref, Mapping):
                try:
                    key = (str(ref.get("id")), int(ref.get("version")))  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    continue
                if key in self.versions:
                    return True
        return False

    def holds(self, kind: str, rec: Mapping[str, Any]) -> bool:
        if kind == "check":
            if self._names(rec.get("rules")):
                self.checks.add(str(rec.get("check_id")))
                return True
            return False
        if kind == "approval":
            return self._names(rec.get("rules"))
        if kind == "override":
            return self._names(rec.get("check_rules")) or rec.get("rule_id") in self.ids
        if kind == "outcome":
            check_id = str(rec.get("check_id"))
            if check_id in self.checks:
                return True
            check = self.store.get_record(self.workspace, "check", check_id)
            return check is not None and self._names(check.get("rules"))
        if kind == "unchecked":
            return (str(rec.get("app")), str(rec.get("tool"))) in self.maps
        return False


def build_report(
    services: Services,
    workspace: str,
    workflow_id: str,
    month: str,
    *,
    fast_seconds: int,
    now: int | None = None,
) -> dict[str, Any]:
    """The report (unsigned): one pass over the month's entries."""
    store = services.store
    if not workflow_id:
        raise BadRequestError("query parameter workflow_id is required")
    start, end = month_window(month)
    every = load_versions(store, workspace)
    versions = {k: v for k, v in every.items() if v.workflow_id == workflow_id}
    if not versions:
        raise NotFoundError(f"no workflow {workflow_id!r}: no rule was ever written for it")
    workflow = _Workflow(store, workspace, versions, start, end)
    activity = ActivityCounter()
    coverage = CoverageCounter()
    oversight = OversightCounter(
        every, start=start, end=end, fast_seconds=fast_seconds,
        only=lambda v: v.workflow_id == workflow_id,
    )  # fmt: skip
    for entry, rec in records_between(store, workspace, start, end):
        if not workflow.holds(entry.kind, rec):
            continue
        activity.add(entry.seq, entry.kind, rec)
        coverage.add(entry.kind, rec)
        oversight.add(entry.kind, rec)
    chain = verify_workspace(store, workspace).to_json()
    chain["failures"] = chain["failures"][:20]
    head = store.head(workspace)
    checkpoint = (
        sign_checkpoint(store, services.signer, head, services.anchor).to_json() if head else None
    )
    in_force = sorted(
        (v for v in versions.values() if v.in_force(start, end)), key=lambda v: (v.id, v.version)
    )
    return {
        "format": REPORT_FORMAT,
        "workspace": workspace,
        "workflow_id": workflow_id,
        "month": month,
        "from": start,
        "until": end,
        "generated_at": now if now is not None else now_ms(),
        "fast_seconds": fast_seconds,
        "rules": [_rule_json(v) for v in in_force],
        "checks": activity.checks_json(),
        "near_misses": activity.near_misses_json(),
        "approvals": activity.approvals_json(),
        "overrides": activity.overrides_json(),
        "coverage": coverage.agents(),
        "oversight": oversight.result(),
        "chain": chain,
        "checkpoint": checkpoint,
    }


def report_digest(report: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(canonical_bytes(report)).digest()


def sign_report(services: Services, workspace: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """``{"report", "signature"}``: Ed25519 over sha256(canonical JSON of the report)."""
    key = services.signer.active_key(workspace)
    services.store.add_public_key(key)
    digest = report_digest(report)
    key_id, signature = services.signer.sign(workspace, digest)
    return {
        "report": dict(report),
        "signature": {
            "algorithm": "Ed25519",
            "signed": "sha256 of the report as canonical JSON",
            "sha256": digest.hex(),
            "key_id": key_id,
            "public_key": key.public_key if key.key_id == key_id else None,
            "signature": base64.b64encode(signature).decode(),
        },
    }


def verify_signed_report(doc: Any, keys: Iterable[PublicKey]) -> list[str]:
    """What is wrong with a signed report (empty: it holds). ``keys`` are the workspace's
    public keys from a source the reader trusts, never the report's own copy."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("report"), Mapping):
        return ["not a signed Claros report: no report object"]
    sig = doc.get("signature")
    if not isinstance(sig, Mapping):
        return ["the report is not signed: no signature object"]
    problems = []
    digest = report_digest(doc["report"])
    if sig.get("sha256") != digest.hex():
        problems.append(
            f"report edited: sha256 of the report is {digest.hex()}, the signature says "
            f"{sig.get('sha256')}"
        )
    key_id = str(sig.get("key_id"))
    known = {k.key_id: k for k in keys if key_id_for(base64.b64decode(k.public_key)) == k.key_id}
    key = known.get(key_id)
    if key is None:
        problems.append(f"signed by unknown key {key_id}")
    elif not verify_signature(key, digest, str(sig.get("signature"))):
        problems.append(f"bad signature (key {key_id})")
    return problems


# --- the printable page -----------------------------------------------------------------
def render_html(signed: Mapping[str, Any]) -> str:
    """The same report as a printable page (templates/report.html): human dates, amounts
    with their currency; every value is escaped (the template engine autoescapes)."""
    from claros.web.pages import static_version
    from claros.web.templating import environment

    template = environment().get_template("report.html")
    return template.render(
        r=signed["report"], sig=signed["signature"], static_version=static_version()
    )
