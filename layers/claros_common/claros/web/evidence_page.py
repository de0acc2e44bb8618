"""Admin → Evidence: the chain's verify result, the latest checkpoint, downloads, retention,
audit keys, the AIUC-1 pack, oversight per owner and the monthly reports.

Parts served by evidence routes this server may not have yet arrive as ``Fetched`` with
``status=None`` and show a clear "not available" note naming the route they need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from claros.ledger import Checkpoint
from claros.web.html import (
    NOTHING,
    Safe,
    attrs,
    badge,
    esc,
    join,
    json_block,
    render,
    short_hash,
    time_tag,
)
from claros.web.pages import Chrome, csrf_field, empty, layout, one_use_field, section

__all__ = ["RETENTION_FLOOR_DAYS", "EvidenceData", "Fetched", "evidence_page"]

RETENTION_FLOOR_DAYS = 183


@dataclass(frozen=True)
class Fetched:
    """Another route's answer, asked in-process: ``status`` None when this server lacks it."""

    route: str
    status: int | None = None
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and isinstance(self.body, dict)


@dataclass(frozen=True)
class EvidenceData:
    workspace: str
    verify: Mapping[str, Any]
    checkpoint: Checkpoint | None
    public_keys: int
    available: Mapping[str, bool]  # "export", "stream", "report" -> served here
    presigned_export: bool  # AWS: the export answers a presigned URL, followed by claros.js
    retention: Fetched
    aiuc1: Fetched
    oversight: Fetched
    workflows: Sequence[str]
    month: str
    today: str


def _na(route: str) -> Safe:
    return render(
        '<p class="na" role="note"><strong>Not available on this server yet.</strong> '
        "This part needs <code>{route}</code>.</p>",
        route=route,
    )


def _failed(fetched: Fetched) -> Safe:
    if fetched.status is None:
        return _na(fetched.route)
    message = fetched.body.get("message") if isinstance(fetched.body, dict) else None
    return render(
        '<p class="na" role="alert"><strong>Could not load it ({status}).</strong> {m}</p>',
        status=fetched.status,
        m=message or "",
    )


def _stat(label: str, value: object) -> Safe:
    return render(
        '<div class="stat"><dt>{label}</dt><dd>{value}</dd></div>',
        label=label,
        value=value if value is not None else "—",
    )


def _chain(verify: Mapping[str, Any]) -> Safe:
    ok = bool(verify.get("ok"))
    headline = (
        render('<p class="verdict verdict-ok">{b} The chain verifies.</p>', b=badge("OK", "ok"))
        if ok
        else render(
            '<p class="verdict verdict-bad" role="alert">{b} The chain does not verify.</p>',
            b=badge("FAIL", "danger"),
        )
    )
    stats = join(
        [
            _stat("Entries", verify.get("entries")),
            _stat("Records compared", verify.get("records_compared")),
            _stat("Last seq", verify.get("last_seq")),
            _stat("Checkpoints verified", verify.get("checkpoints_verified")),
            _stat("Unsigned tail", verify.get("unsigned_tail")),
        ]
    )
    failures = verify.get("failures") or []
    rows = join(
        render(
            "<tr><td>{seq}</td><td>{kind}</td><td>{problem}</td></tr>",
            seq=f.get("seq"),
            kind=f.get("kind"),
            problem=f.get("problem") or f.get("message") or "",
        )
        for f in failures
    )
    table = (
        render(
            '<div class="table-wrap"><table><caption>Failures</caption><thead><tr>'
            '<th scope="col">Seq</th><th scope="col">Kind</th><th scope="col">What is wrong'
            "</th></tr></thead><tbody>{rows}</tbody></table></div>",
            rows=rows,
        )
        if failures
        else Safe("")
    )
    return render(
        '<div class="card">{headline}<dl class="stats">{stats}</dl>'
        '<p class="hint">Last hash {hash}</p>{table}</div>',
        headline=headline,
        stats=stats,
        hash=short_hash(verify.get("last_hash"), 16),
        table=table,
    )


def _checkpoint(cp: Checkpoint | None, keys: int) -> Safe:
    if cp is None:
        return empty("No checkpoint signed yet.")
    return render(
        '<div class="card"><dl class="facts"><div><dt>Seq</dt><dd>{seq}</dd></div>'
        "<div><dt>Hash</dt><dd>{hash}</dd></div><div><dt>Signed</dt><dd>{ts}</dd></div>"
        "<div><dt>Key</dt><dd><code>{key}</code> ({keys} public key{s} in all)</dd></div>"
        "<div><dt>Signature</dt><dd>{sig}</dd></div></dl></div>",
        seq=cp.seq,
        hash=short_hash(cp.hash, 16),
        ts=time_tag(cp.ts),
        key=cp.key_id,
        keys=keys,
        s="" if keys == 1 else "s",
        sig=short_hash(cp.signature, 24),
    )


def _downloads(data: EvidenceData) -> Safe:
    export = (
        render(
            '<a class="btn btn-primary" href="/api/evidence/export" {how}>'
            "Download the evidence export</a>",
            how=attrs(
                download=not data.presigned_export,
                data_export="presigned" if data.presigned_export else None,
            ),
        )
        if data.available.get("export")
        else _na("GET /api/evidence/export")
    )
    stream = (
        render('<a href="/api/evidence/stream?since=0">JSON lines stream</a> (for a SIEM)')
        if data.available.get("stream")
        else Safe("")
    )
    return render(
        '<div class="card"><div class="downloads">{export}'
        '<a class="btn" href="/app/evidence/checkpoints" '
        'download="claros-checkpoints-{today}.json">Download today\'s checkpoints</a></div>'
        "{stream}"
        '<p class="hint">Check it offline, every record compared, with no access to Claros: '
        "<code>claros verify --export claros-evidence-{workspace}-{today}.jsonl --checkpoints "
        "claros-checkpoints-{today}.json</code>. Keep the checkpoints where Claros cannot "
        "change them.</p></div>",
        export=export,
        stream=render('<p class="hint">{s}</p>', s=stream)
        if data.available.get("stream")
        else Safe(""),
        today=data.today,
        workspace=data.workspace,
    )


def _when(value: Any) -> Safe:
    if isinstance(value, int) and value > 10**11:
        return time_tag(value)
    if isinstance(value, dict):
        parts = [f"seq {value['seq']}" if "seq" in value else "", value.get("kind") or ""]
        ts = value.get("ts") or value.get("created_at")
        return render(
            "{text} {ts}", text=" ".join(p for p in parts if p), ts=time_tag(ts) if ts else ""
        )
    return esc(value if value is not None else "—")


def _first(body: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if body.get(name) is not None:
            return body[name]
    return None


def _retention(fetched: Fetched, chrome: Chrome) -> Safe:
    if not fetched.ok:
        return _failed(fetched)
    body: Mapping[str, Any] = fetched.body
    days = body.get("days")
    floor = body.get("floor_days") or RETENTION_FLOOR_DAYS
    verifies = _first(body, "verifies_from", "pruned_checkpoint", "checkpoint")
    return render(
        '<div class="card"><dl class="facts">'
        "<div><dt>Kept for</dt><dd>{days}</dd></div>"
        "<div><dt>Oldest record kept</dt><dd>{oldest}</dd></div>"
        "<div><dt>Verifies from</dt><dd>{cp}</dd></div></dl>"
        '<form method="post" action="/app/evidence/retention" class="inline">{csrf}'
        '<div class="field"><label for="days">Keep records for (days)</label>'
        '<input id="days" name="days" type="number" min="{floor}" max="36500" required '
        'value="{value}" aria-describedby="days-hint"></div>'
        '<button class="btn" type="submit">Save retention</button></form>'
        '<p class="hint" id="days-hint">At least {floor} days (six months, EU AI Act Art '
        "26(6)). Rule versions are never deleted.</p>"
        "<details><summary>As the API answers</summary>{raw}</details></div>",
        days=f"{days} days" if days else "not set: nothing is pruned",
        oldest=_when(_first(body, "oldest_record", "oldest_kept", "oldest")),
        cp=_when(verifies) if verifies is not None else body.get("chain") or "its first entry",
        csrf=csrf_field(chrome),
        floor=floor,
        value=days or 365,
        raw=json_block(body),
    )


def _audit_key(chrome: Chrome) -> Safe:
    return render(
        '<div class="card"><p>An audit key reads the log and its records, nothing else, and '
        "only while you are an admin. It is shown once.</p>"
        '<form method="post" action="/app/evidence/audit-keys" class="inline">{csrf}{once}'
        '<div class="field"><label for="audit-label">Label <span class="opt">(optional)'
        '</span></label><input id="audit-label" name="label" maxlength="100" '
        'placeholder="Auditor, Q4"></div>'
        '<button class="btn" type="submit">Make an audit key</button></form></div>',
        csrf=csrf_field(chrome),
        once=one_use_field(),
    )


def _controls(body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    controls = body.get("controls")
    if isinstance(controls, dict):
        return [(str(k), v if isinstance(v, dict) else {}) for k, v in controls.items()]
    if isinstance(controls, list):
        return [
            (str(c.get("id") or c.get("control") or "?"), c)
            for c in controls
            if isinstance(c, dict)
        ]
    return []


def _holds(control: Mapping[str, Any]) -> list[str]:
    holds = control.get("holds")
    if isinstance(holds, dict):
        return [k.replace("_", " ") for k in holds]
    skip = ("id", "control", "title", "name", "gaps")
    return [k.replace("_", " ") for k in control if k not in skip]


def _aiuc1(fetched: Fetched) -> Safe:
    if not fetched.ok:
        return _failed(fetched)
    rows = join(
        render(
            '<tr><th scope="row"><code>{id}</code> {title}</th><td>{holds}</td>'
            "<td><ul>{gaps}</ul></td></tr>",
            id=cid,
            title=_first(control, "title", "name") or "",
            holds=", ".join(_holds(control)),
            gaps=join(render("<li>{g}</li>", g=g) for g in control.get("gaps") or []),
        )
        for cid, control in _controls(fetched.body)
    )
    table = (
        render(
            '<div class="table-wrap"><table><thead><tr><th scope="col">Control</th>'
            '<th scope="col">Holds</th><th scope="col">Gaps it states</th></tr></thead>'
            "<tbody>{rows}</tbody></table></div>",
            rows=rows,
        )
        if rows
        else json_block(fetched.body)
    )
    return render(
        '<div class="card">{table}<p><a href="/api/evidence/aiuc1?days=90" '
        'download="claros-aiuc1.json">Download the pack (JSON)</a> · evidence for an audit, '
        "not a certification.</p></div>",
        table=table,
    )


def _rate(value: Any) -> str:
    """A ratio (0..1; a float or, parsed by claros.jsonutil, a Decimal) as a percentage."""
    if value is None or isinstance(value, bool):
        return "—"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{number * 100:.1f}%"


def _owners(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    owners = body.get("owners")
    if isinstance(owners, dict):
        return [{"owner": k, **(v if isinstance(v, dict) else {})} for k, v in owners.items()]
    if isinstance(owners, list):
        return [o for o in owners if isinstance(o, dict)]
    return []


def _oversight(fetched: Fetched) -> Safe:
    if not fetched.ok:
        return _failed(fetched)
    owners = _owners(fetched.body)
    if not owners:
        return empty("No owner decided anything in the window.")
    rows = join(
        render(
            '<tr><th scope="row">{owner}</th><td class="num">{fs}</td><td class="num">{miss}'
            '</td><td class="num">{fast}</td><td class="num">{median}</td></tr>',
            owner=o.get("owner") or o.get("email") or "",
            fs=_rate(o.get("false_stop_rate")),
            miss=_rate(o.get("miss_rate")),
            fast=o.get("approved_too_fast") if o.get("approved_too_fast") is not None else "—",
            median=o.get("median_seconds_to_decide")
            if o.get("median_seconds_to_decide") is not None
            else "—",
        )
        for o in owners
    )
    return render(
        '<div class="table-wrap"><table><caption>Last 90 days</caption><thead><tr>'
        '<th scope="col">Owner</th><th scope="col" class="num">False stop rate</th>'
        '<th scope="col" class="num">Miss rate</th>'
        '<th scope="col" class="num">Approved too fast</th>'
        '<th scope="col" class="num">Median seconds to decide</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>",
        rows=rows,
    )


def _reports(data: EvidenceData) -> Safe:
    if not data.available.get("report"):
        return _na("GET /api/evidence/report")
    if not data.workflows:
        return empty("No workflow has rules yet.")
    options = join(render("<option>{w}</option>", w=w) for w in data.workflows)
    return render(
        '<div class="card"><form method="get" action="/api/evidence/report" class="inline">'
        '<input type="hidden" name="format" value="html">'
        '<div class="field"><label for="report-workflow">Workflow</label>'
        '<select id="report-workflow" name="workflow_id">{options}</select></div>'
        '<div class="field"><label for="report-month">Month</label>'
        '<input id="report-month" name="month" type="month" required value="{month}"></div>'
        '<button class="btn" type="submit">Open the printable report</button></form>'
        '<p class="hint">Signed with the workspace\'s ledger key; the JSON form '
        "(<code>format=json</code>) checks with "
        "<code>python -m claros.ledger verify-report</code>.</p></div>",
        options=options,
        month=data.month,
    )


def evidence_page(chrome: Chrome, data: EvidenceData, *, flash: Safe = NOTHING) -> str:
    body = join(
        [
            section("chain", "The chain", _chain(data.verify)),
            section(
                "checkpoint", "Latest checkpoint", _checkpoint(data.checkpoint, data.public_keys)
            ),
            section("downloads", "Evidence export", _downloads(data)),
            section("retention", "Retention", _retention(data.retention, chrome)),
            section("audit", "Audit keys", _audit_key(chrome)),
            section("aiuc1", "AIUC-1 evidence pack", _aiuc1(data.aiuc1)),
            section("oversight", "Oversight per owner", _oversight(data.oversight)),
            section("reports", "Monthly reports", _reports(data)),
        ]
    )
    return layout(
        "Evidence",
        body,
        chrome,
        lede="What Claros can prove: which rule, as written then, who stood behind it, who "
        "approved the exception, did it run.",
        flash=flash,
    )
