"""What happened after a check: outcomes and writes let through unchecked (their request
models and records); reading them (coverage, an outcome's view) is claros.coverage's.

An outcome is recorded once per check (its ledger record is keyed by the check id, so a
second one is refused by the store itself) and only by the key that made the check.

The ledger record never changes, so the outcome is shown on the check through the
person's timeline doc of that check: it is updated in the outcome's own transaction, and
every timeline page then holds its checks' outcomes without one more read per row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

import orjson
from pydantic import BaseModel, ConfigDict, Field

from claros import jsonutil
from claros.agent_info import AgentInfo
from claros.auth import Principal
from claros.check_rows import call_index_key, timeline_collection
from claros.checkpoints import record
from claros.clock import new_id, now_ms
from claros.coverage import outcome_view
from claros.empty import new_dict
from claros.errors import ConflictError, ForbiddenError, NotFoundError
from claros.store.base import ConflictError as StoreConflictError
from claros.store.base import DocWrite, NewRecord, Store
from claros.wiring import Services

if TYPE_CHECKING:
    from claros.api.idempotency import KeyedAnswer

__all__ = [
    "OutcomeByCall",
    "OutcomeRequest",
    "UncheckedRequest",
    "record_outcome",
    "record_outcome_by_call",
    "record_unchecked",
]


class OutcomeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    status: Literal["ok", "error"]
    summary: str | None = Field(None, max_length=2000)


class OutcomeByCall(OutcomeRequest):
    tool_use_id: str = Field(min_length=1, max_length=256)


class UncheckedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    app: str = Field(min_length=1, max_length=128)
    tool: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] = Field(default_factory=new_dict)
    agent: AgentInfo
    reason: str = Field(min_length=1, max_length=500)
    status: Literal["ok", "error"] | None = None
    summary: str | None = Field(None, max_length=2000)


def record_outcome(
    services: Services,
    principal: Principal,
    check_id: str,
    req: OutcomeRequest,
    keyed: KeyedAnswer | None = None,
) -> dict[str, Any]:
    """Record the outcome of ``check_id``; ``keyed``: the request's Idempotency-Key record,
    written in the outcome's own transaction (claros.api.idempotency.run_in_append)."""
    store, workspace = services.store, principal.workspace
    raw = store.get_raw_record(workspace, "check", check_id)
    if raw is None:
        raise NotFoundError(f"no check {check_id!r}")
    check = _check_fields(raw)
    if check.get("key_id") != principal.key_id:
        raise ForbiddenError("an outcome is reported only by the key that made the check")
    row = {
        "workspace": workspace,
        "check_id": check_id,
        "status": req.status,
        "summary": req.summary,
        "reported_at": now_ms(),
        "key_id": principal.key_id,
        "check_result": check.get("result"),
        "agent": (check.get("agent") or {}).get("name"),
        "via": ((check.get("agent") or {}).get("via") or {}).get("guard"),
    }
    writes = _on_timeline(store, workspace, check_id, check, row)
    answer = {"check_id": check_id, "status": req.status}
    if keyed is not None:
        writes.append(keyed.write(201, answer, (workspace, "outcome", check_id)))
    try:
        entry = record(services, workspace, [NewRecord("outcome", check_id, row)], writes)[0]
    except StoreConflictError as exc:
        # The outcome record exists already (or its timeline doc moved: only another
        # outcome for this check writes it after the check).
        raise ConflictError(f"check {check_id} has an outcome already") from exc
    return {**answer, "seq": entry.seq}


def _check_fields(raw: bytes) -> dict[str, Any]:
    """The check record, parsed for the few fields an outcome reads (its key, result,
    agent, guard and person: text) by orjson, ~2x the stdlib parser's speed on a record
    with 20 rule references. Its numbers come out as floats, not the Decimals of
    ``jsonutil.loads``; a number read here all the same (a result or agent name that is
    one, in a record not written by record_check) is written into the outcome's record
    through the same double, so its canonical text is the same. Text orjson refuses (a lone
    surrogate escape, which Claros never writes) is parsed as every record is."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = jsonutil.loads(raw)
    return cast(dict[str, Any], parsed)


def _on_timeline(
    store: Store, workspace: str, check_id: str, check: Mapping[str, Any], row: Mapping[str, Any]
) -> list[DocWrite]:
    """The write that shows the outcome on the timeline doc of its check (none when the
    check acts for nobody). Conditional on the doc's revision, so it lands with the
    outcome record or not at all."""
    person = check.get("on_behalf_of")
    if not person:
        return []
    doc = store.get_doc(workspace, timeline_collection(str(person)), check_id)
    if doc is None:
        return []
    shown = {**doc.value, "outcome": outcome_view(row)}
    return [DocWrite(workspace, doc.collection, doc.key, shown, doc.rev)]


def record_outcome_by_call(
    services: Services, principal: Principal, req: OutcomeByCall, keyed: KeyedAnswer | None = None
) -> dict[str, Any]:
    doc = services.store.get_doc(
        principal.workspace, "call", call_index_key(principal.key_id, req.tool_use_id)
    )
    if doc is None:
        raise NotFoundError(f"no check made by this key for tool_use_id {req.tool_use_id!r}")
    outcome = OutcomeRequest(status=req.status, summary=req.summary)
    return record_outcome(services, principal, str(doc.value["check_id"]), outcome, keyed)


def record_unchecked(
    services: Services, principal: Principal, req: UncheckedRequest
) -> dict[str, Any]:
    ref = new_id("unc")
    row = {
        "workspace": principal.workspace,
        "unchecked_id": ref,
        "ts": now_ms(),
        "app": req.app,
        "tool": req.tool,
        "arguments": req.arguments,
        "agent": req.agent.model_dump(exclude_none=True, exclude={"on_behalf_of"}),
        "key_id": principal.key_id,
        "reason": req.reason,
        "status": req.status,
        "summary": req.summary,
    }
    entry = record(services, principal.workspace, [NewRecord("unchecked", ref, row)])[0]
    return {"unchecked_id": ref, "seq": entry.seq}
