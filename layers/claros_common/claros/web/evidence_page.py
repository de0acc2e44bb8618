"""Admin → Evidence (``templates/evidence.html``): the chain's verify result, the latest
checkpoint, downloads, retention, audit keys, the AIUC-1 pack, oversight per owner and the
monthly reports.

Parts served by evidence routes this server may not have yet arrive as ``Fetched`` with
``status=None`` and show a clear "not available" note naming the route they need.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from claros.ledger import Checkpoint
from claros.web.html import NOTHING, Safe, esc, render, time_tag
from claros.web.pages import Chrome
from claros.web.templating import render_page

__all__ = ["RETENTION_FLOOR_DAYS", "EvidenceData", "Fetched", "evidence_page"]

RETENTION_FLOOR_DAYS = 183


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class Fetched(NamedTuple):
    """Another route's answer, asked in-process: ``status`` None when this server lacks it."""

    route: str
    status: int | None = None
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and isinstance(self.body, dict)


class EvidenceData(NamedTuple):
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
    # The verified-through state (claros.evidence.verified.state_json): how far, when.
    verified: Mapping[str, Any] = MappingProxyType({})


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


def _retention_view(fetched: Fetched) -> dict[str, Any]:
    body: Mapping[str, Any] = fetched.body if fetched.ok else {}
    verifies = _first(body, "verifies_from", "pruned_checkpoint", "checkpoint")
    return {
        "days": body.get("days"),
        "floor": body.get("floor_days") or RETENTION_FLOOR_DAYS,
        "oldest": _when(_first(body, "oldest_record", "oldest_kept", "oldest")),
        "verifies_from": _when(verifies)
        if verifies is not None
        else body.get("chain") or "its first entry",
    }


def _owner_rows(fetched: Fetched) -> list[dict[str, Any]]:
    if not fetched.ok:
        return []
    return [
        {
            "owner": o.get("owner") or o.get("email") or "",
            "false_stop_rate": _rate(o.get("false_stop_rate")),
            "miss_rate": _rate(o.get("miss_rate")),
            "fast": o.get("approved_too_fast") if o.get("approved_too_fast") is not None else "—",
            "median": o.get("median_seconds_to_decide")
            if o.get("median_seconds_to_decide") is not None
            else "—",
        }
        for o in _owners(fetched.body)
    ]


def evidence_page(chrome: Chrome, data: EvidenceData, *, flash: Safe = NOTHING) -> str:
    controls = (
        [
            {
                "id": cid,
                "title": _first(control, "title", "name") or "",
                "holds": _holds(control),
                "gaps": control.get("gaps") or [],
            }
            for cid, control in _controls(data.aiuc1.body)
        ]
        if data.aiuc1.ok
        else []
    )
    return render_page(
        "evidence.html",
        chrome,
        title="Evidence",
        lede="What Claros can prove: which rule, as written then, who stood behind it, who "
        "approved the exception, did it run.",
        flash=flash,
        verify=data.verify,
        verified=data.verified,
        checkpoint=data.checkpoint,
        public_keys=data.public_keys,
        available=data.available,
        presigned_export=data.presigned_export,
        workspace=data.workspace,
        today=data.today,
        month=data.month,
        workflows=data.workflows,
        retention=data.retention,
        retention_view=_retention_view(data.retention),
        once=secrets.token_urlsafe(16),
        aiuc1=data.aiuc1,
        controls=controls,
        oversight=data.oversight,
        owners=_owner_rows(data.oversight),
    )
