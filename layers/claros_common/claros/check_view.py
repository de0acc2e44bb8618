"""One check, explained: the call, the agent, who it acted for, every rule that applied
(as written in the version it ran under), the facts read, the ask and its answer,
overrides, the outcome, and its ledger entry verified up to the checkpoint that covers it.

The verification is the ledger's own (``claros.checkpoints.verify_before_signing``, the
check a checkpoint is signed after, and ``claros.ledger.verify_signature``): there is no
second verifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from claros.activity import asked_of, may_see
from claros.asks import COLLECTION as ASKS
from claros.asks import ask_view
from claros.auth import Principal
from claros.checkpoints import ChainBrokenError, entry_at, verify_before_signing
from claros.coverage import outcome_view
from claros.errors import NotFoundError
from claros.ledger import Checkpoint, Entry, verify_signature
from claros.overrides import check_overrides
from claros.store.base import Store

__all__ = ["check_detail", "rule_link", "verify_entry"]

_FACTS = ("fetched", "derived", "vars", "context")


def rule_link(rule_id: str, version: Any) -> str:
    """Where the rules page shows a rule's versions (with the version asked for)."""
    query = urlencode({"rule": rule_id, "version": version})
    return f"/app/rules?{query}#rule-{quote(rule_id, safe='')}"


def _checkpoint_ok(store: Store, cp: Checkpoint) -> str | None:
    """None when the checkpoint's signature holds under one of the workspace's keys."""
    for key in store.public_keys(cp.workspace):
        if key.key_id == cp.key_id:
            if verify_signature(key, cp.message(), cp.signature):
                return None
            return f"the checkpoint at seq {cp.seq} has a bad signature (key {cp.key_id})"
    return f"the checkpoint at seq {cp.seq} is signed by unknown key {cp.key_id}"


def verify_entry(store: Store, entry: Entry) -> dict[str, Any]:
    """Verify one entry: the chain from the signed checkpoint below it, through it, up to
    the signed checkpoint that covers it (every link, entry hash and record hash), and
    both checkpoints' signatures. Without a covering checkpoint yet, up to the entry."""
    workspace = entry.workspace
    found = store.checkpoints(workspace, since=entry.seq - 1, limit=1)
    covering = found[0] if found else None
    base = store.checkpoint_before(workspace, entry.seq)
    out: dict[str, Any] = {
        "from_seq": (base.seq + 1) if base else 1,
        "to_seq": covering.seq if covering else entry.seq,
        "covered": covering is not None,
        "problems": [],
    }
    target: Entry | None = entry
    if covering is not None:
        target = entry_at(store, workspace, covering.seq)
        if target is None:
            out["problems"].append(f"the entry at seq {covering.seq} the checkpoint signs is gone")
        elif target.hash != covering.hash:
            out["problems"].append(
                f"seq {covering.seq} hashes to {target.hash}, the checkpoint signed {covering.hash}"
            )
    if target is not None:
        try:
            verify_before_signing(store, target)
        except ChainBrokenError as exc:
            out["problems"].append(str(exc).removeprefix("not signing: "))
    for cp in (base, covering):
        problem = _checkpoint_ok(store, cp) if cp is not None else None
        if problem:
            out["problems"].append(problem)
    out["ok"] = not out["problems"]
    return out


def _rules(store: Store, workspace: str, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for rule in row.get("rules") or []:
        if not isinstance(rule, Mapping):
            continue
        ref = f"{rule.get('id')}@{rule.get('version')}"
        version = store.get_record(workspace, "rule_version", ref)
        closed = store.get_record(workspace, "rule_version_close", ref)
        out.append(
            {
                **rule,
                "written": (version or {}).get("rule"),
                "closed": closed,
                "link": rule_link(str(rule.get("id")), rule.get("version")),
            }
        )
    return out


def _ask(store: Store, principal: Principal, ask_id: str) -> dict[str, Any] | None:
    doc = store.get_doc(principal.workspace, ASKS, ask_id)
    if doc is None:
        return None
    view = ask_view(doc.value)
    # The key that made the check (or one minted from it) never answers its ask.
    view["own_key"] = principal.derives_from(str(doc.value.get("key_id")))
    approval = store.get_record(principal.workspace, "approval", ask_id)
    if approval is not None:
        view["approval"] = approval
    return view


def check_detail(store: Store, principal: Principal, check_id: str) -> dict[str, Any]:
    """Everything about one check (the body of ``GET /api/checks/{check_id}``). A check the
    caller may not see does not exist for them (404, as one that does not exist)."""
    workspace = principal.workspace
    row = store.get_record(workspace, "check", check_id)
    if row is None or not (may_see(principal, row) or asked_of(store, principal, row)):
        raise NotFoundError(f"no check {check_id!r}")
    outcome = store.get_record(workspace, "outcome", check_id)
    entry = store.record_entry(workspace, "check", check_id)
    ledger: dict[str, Any] | None = None
    if entry is not None:
        found = store.checkpoints(workspace, since=entry.seq - 1, limit=1)
        ledger = {
            **entry.to_json(),
            "checkpoint": found[0].to_json() if found else None,
            "verify": verify_entry(store, entry),
        }
    agent = row.get("agent") or {}
    ask_id = row.get("ask_id")
    return {
        "check_id": check_id,
        "ts": row.get("ts"),
        "call": {
            "app": row.get("app"),
            "tool": row.get("tool"),
            "arguments": row.get("arguments") or {},
        },  # fmt: skip
        "agent": agent,
        "key_id": row.get("key_id"),
        "on_behalf_of": row.get("on_behalf_of"),
        "obo_source": row.get("obo_source"),
        "result": row.get("result"),
        "decided": row.get("decided"),
        "allowed": row.get("allowed"),
        "reason": row.get("reason"),
        "shadow_result": row.get("shadow_result"),
        "not_judged": row.get("not_judged") or [],
        "severity": row.get("severity"),
        "amount": row.get("amount"),
        "currency": row.get("currency"),
        "amount_path": row.get("amount_path"),
        "rules": _rules(store, workspace, row),
        "facts": {k: row.get(k) for k in _FACTS if row.get(k)},
        "resolved": bool(row.get("resolved")),
        "ask": _ask(store, principal, str(ask_id)) if ask_id else None,
        "approval": row.get("approval"),
        "overrides": check_overrides(store, workspace, check_id),
        "outcome": outcome_view(outcome) if outcome else None,
        "ledger": ledger,
    }
