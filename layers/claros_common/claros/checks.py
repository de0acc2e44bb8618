"""Checking a call: who it is for, what the rules decide, and the row the ledger keeps.

The row holds everything needed to reconstruct the decision from the ledger alone: the
call, the agent, who it acts for (from the credential), every rule that applied with its
version, hash, confirm record and whether it matched, and on a stop, ask or nudge the
near-miss fields (severity, amount, currency).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from claros.agent_info import AgentInfo, Strict, Via
from claros.asks import ask_view, facts_hash, open_ask, use_approval
from claros.auth import Principal, check_email, member_role
from claros.check_rows import approved_repeat, call_index_key, timeline_collection
from claros.checkpoints import record
from claros.clock import new_id, now_ms
from claros.empty import new_dict
from claros.errors import BadRequestError, ForbiddenError
from claros.mapping.facts import Plan, plan, read_ahead_holds
from claros.mapping.model import MappingSpec
from claros.mapping.service import mapping_doc, mapping_from
from claros.names import NAME
from claros.rules.amounts import find_amount
from claros.rules.decide import Decision, decide
from claros.rules.service import STAMP_DOC, rules_under
from claros.rules.terms import SEVERITY
from claros.store.base import DocWrite, NewRecord
from claros.webhook import deliver_in_background
from claros.wiring import Services

__all__ = [
    "AgentInfo",
    "CheckRequest",
    "Via",
    "approved_repeat",
    "call_index_key",
    "record_check",
    "resolve_on_behalf_of",
    "timeline_collection",
]


class FetchedWith(Strict):
    """The read a guard ran ahead, before Claros asked, for ``fetched.fetch``."""

    tool: str = Field(pattern=NAME)
    arguments: dict[str, Any] = Field(default_factory=new_dict)


class CheckRequest(Strict):
    app: str = Field(pattern=NAME)
    tool: str = Field(pattern=NAME)
    arguments: dict[str, Any] = Field(default_factory=new_dict)
    agent: AgentInfo
    fetched: dict[str, Any] | None = None
    # Optional: ``fetched.fetch`` was read ahead with this read (docs/api.md). Used only
    # when it is the read the mapping asks for now; otherwise everything in ``fetched`` is
    # set aside and the check answers as if none had come (``fetch_stale`` in the answer).
    fetched_with: FetchedWith | None = None
    # The ask whose approval this repeat of the call uses (once).
    approval: str | None = Field(None, max_length=64)


def resolve_on_behalf_of(
    services: Services, principal: Principal, agent: AgentInfo
) -> tuple[str | None, str | None]:
    """(on_behalf_of, obo_source), from the credential, never from what the agent says.

    A person's key (agent or admin) acts for that person. Only a service key, tied to
    nobody, may name a workspace member in ``agent.on_behalf_of``."""
    if principal.kind in ("agent", "admin"):
        return principal.person, f"{principal.kind}_key"
    if principal.kind == "service" and agent.on_behalf_of:
        email = check_email(agent.on_behalf_of)
        if member_role(services.store, principal.workspace, email) is None:
            raise ForbiddenError(
                f"agent.on_behalf_of names {email}, who is not a member of this workspace"
            )
        return email, "service_key"
    return None, None


def _facts(req: CheckRequest, spec: MappingSpec | None, now: int) -> tuple[Plan, bool]:
    """The facts rules see: the call's arguments, or, when the tool has a mapping
    (``spec``), the call merged with what the guard read (or the reads still needed); and
    whether a record read ahead (``fetched_with``) was set aside as stale."""
    when = dt.datetime.fromtimestamp(now / 1000, tz=dt.UTC)
    fetched, stale = req.fetched or {}, False
    if req.fetched_with is not None:
        if "fetch" not in fetched:
            raise BadRequestError("fetched_with names the read of fetched.fetch, which is missing")
        read = req.fetched_with.model_dump()
        if not read_ahead_holds(spec, req.arguments, read, when):
            # Read by a mapping that has changed since (or is gone): not this call's record.
            # Nothing read ahead is used; the answer is the one a first check gets.
            fetched, stale = {}, True
    if spec is None:
        if fetched:
            first = sorted(fetched)[0]
            raise BadRequestError(f"fetched.{first} was not asked for: {req.tool} has no mapping")
        return Plan(facts=dict(req.arguments)), stale
    planned = plan(spec, req.arguments, fetched, when)
    planned.mapping = spec
    return planned, stale


def record_check(services: Services, principal: Principal, req: CheckRequest) -> dict[str, Any]:
    store, workspace = services.store, principal.workspace
    on_behalf_of, obo_source = resolve_on_behalf_of(services, principal, req.agent)
    now = now_ms()
    # What deciding reads before the rules, in one request (on DynamoDB one BatchGetItem,
    # not two round trips in a row): the tool's mapping and the rules' stamp.
    mapping, stamp = store.get_docs(workspace, [mapping_doc(req.app, req.tool), STAMP_DOC])
    facts, stale = _facts(req, mapping_from(mapping), now)
    if facts.need:
        # Reads first: nothing is logged until the check is decided on every fact.
        need: dict[str, Any] = {"allowed": False, "result": "need", "need": facts.need}
        if stale:
            need["fetch_stale"] = True
        return need
    decision = decide(
        rules_under(store, workspace, stamp), req.app, req.tool, facts.facts,
        context=facts.context, judge=services.judge, arguments=req.arguments,
    )  # fmt: skip
    check_id = new_id("chk")
    writes: list[DocWrite] = []
    approved: dict[str, Any] | None = None
    decided_on = (
        facts_hash(decision.deciding, facts.facts, facts.context)
        if decision.result == "ask"
        else ""
    )
    if req.approval and decision.result == "ask":
        ask, used = use_approval(
            store, principal, req.approval, app=req.app, tool=req.tool,
            arguments=req.arguments, deciding=decision.deciding, decided_on=decided_on,
        )  # fmt: skip
        writes.append(used)
        approved = {k: ask.get(k) for k in ("ask_id", "decided_by", "authority", "decided_at")}
    result = "allow" if approved else decision.result
    agent = req.agent.model_dump(exclude_none=True, exclude={"on_behalf_of"})
    row: dict[str, Any] = {
        "check_id": check_id,
        "workspace": workspace,
        "ts": now,
        "app": req.app,
        "tool": req.tool,
        "arguments": req.arguments,
        "agent": agent,
        "key_id": principal.key_id,
        "on_behalf_of": on_behalf_of,
        "obo_source": obo_source,
        "result": result,
        "decided": decision.result,
        "allowed": result in ("allow", "nudge"),
        "rules": decision.rules,
        "shadow_result": decision.shadow_result,
        "not_judged": decision.not_judged,
        "approval": approved,
    }
    if facts.mapping is not None:
        row.update(
            resolved=True,
            fetched=req.fetched if not stale else None,
            derived=facts.derived,
            vars=facts.vars,
            context=facts.context,
        )
    if not decision.rules:
        row["reason"] = "no rule applied"
    _near_miss(row, req.arguments)
    opened: dict[str, Any] | None = None
    if result == "ask":
        opened, ask_writes = open_ask(
            services, principal, check_id=check_id, app=req.app, tool=req.tool,
            arguments=req.arguments, rules=decision.deciding, on_behalf_of=on_behalf_of,
            messages=decision.messages(), decided_on=decided_on,
        )  # fmt: skip
        row["ask_id"] = opened["ask_id"]
        writes += ask_writes
    writes += _indexes(workspace, principal, req, row)
    entry = record(services, workspace, [NewRecord("check", check_id, row)], writes)[0]
    if opened is not None:
        deliver_in_background(store, workspace, ask_view(opened))
    answer = _answer(row, decision, opened, entry.seq)
    if stale:
        answer["fetch_stale"] = True
    return answer


def _near_miss(row: dict[str, Any], arguments: Mapping[str, Any]) -> None:
    """Near-miss fields from the row's own result, not the rules' decision: an approved
    repeat answers allow, and its ask's row carries the near miss already."""
    severity = SEVERITY.get(row["result"])
    if severity is None:
        return
    row["severity"] = severity
    money = find_amount(arguments)
    if money is not None:
        row["amount"] = money.amount
        row["currency"] = money.currency
        row["amount_path"] = money.path


def _indexes(
    workspace: str, principal: Principal, req: CheckRequest, row: Mapping[str, Any]
) -> list[DocWrite]:
    """Docs written with the check: its call id (for outcomes by tool_use_id) and the
    timeline of the person it acts for."""
    writes = []
    if req.agent.call_id:
        writes.append(
            DocWrite(
                workspace,
                "call",
                call_index_key(principal.key_id, req.agent.call_id),
                {"check_id": row["check_id"]},
            )
        )
    person = row.get("on_behalf_of")
    if person:
        keys = ("check_id", "ts", "app", "tool", "result", "severity", "amount", "currency",
                "ask_id", "approval")  # fmt: skip
        # Leave out what a row does not have: the doc stays small and says only what is so.
        summary = {k: row[k] for k in keys if row.get(k) is not None}
        summary["agent"] = row["agent"].get("name")
        writes.append(DocWrite(workspace, timeline_collection(person), row["check_id"], summary, 0))
    return writes


def _answer(
    row: Mapping[str, Any], decision: Decision, ask: Mapping[str, Any] | None, seq: int
) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "check_id": row["check_id"],
        "result": row["result"],
        "allowed": row["allowed"],
        "rules": row["rules"],
        "messages": decision.messages(),
        "on_behalf_of": row["on_behalf_of"],
        "obo_source": row["obo_source"],
        "seq": seq,
    }
    for key in ("severity", "amount", "currency", "shadow_result", "approval", "reason"):
        if row.get(key) is not None:
            answer[key] = row[key]
    if decision.not_judged:
        answer["not_judged"] = decision.not_judged
    if ask is not None:
        answer["ask"] = ask_view(ask)
    return answer
