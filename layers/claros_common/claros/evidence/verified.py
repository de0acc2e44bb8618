"""The verified-through state: how far the chain was verified, kept up to date a segment
at a time, so that a page never verifies the whole ledger on its way.

Each segment (the entries after the state's seq, up to the head) is verified once, as
``claros.evidence.verify`` verifies the whole chain: every entry's hash recomputed, every
link, every record compared, every checkpoint in it checked against its signature and
entry. The state keeps the totals and the failures found so far; it is advanced when a
checkpoint is signed (locally inline, in AWS by the checkpoint function) and when the
Evidence page or ``GET /api/evidence/verify`` is read (the unsigned tail, under a hundred
entries). "Verify everything now" (``POST /app/evidence/verify``,
``POST /api/evidence/verify``) verifies the whole chain again and starts the state afresh.

A segment is verified from the entry the state ends at, read again and compared with the
hash kept; an entry changed below it is what the full verify (and in AWS the tamper log,
which every answer adds) is for. A prune, which changes where the log starts, or a prune
entry in the segment makes the next advance a full verify.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from claros.clock import now_ms
from claros.evidence.verify import verify_workspace
from claros.ledger import PRUNE_KIND, ChainVerifier, Failure, VerifyReport
from claros.store.base import Store

__all__ = [
    "advance",
    "advance_quietly",
    "keep_full",
    "state_json",
    "verified_report",
    "verify_now",
]

log = logging.getLogger("claros.evidence.verified")

MAX_FAILURES = 100  # kept in the state; the count says how many there were


def _failure_json(f: Failure) -> dict[str, Any]:
    return {"seq": f.seq, "kind": f.kind, "problem": f.problem}


def _state(
    report: VerifyReport, *, full_at: int | None, now: int, prior: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    failures = [_failure_json(f) for f in report.failures]
    return {
        "seq": report.last_seq or 0,
        "hash": report.last_hash,
        "first_seq": report.first_seq,
        "entries": report.entries,
        "records_compared": report.records_compared,
        "checkpoints_verified": report.checkpoints_verified,
        "last_checkpoint_seq": report.last_checkpoint_seq,
        "kept_records": report.kept_records,
        "failures": failures[:MAX_FAILURES],
        "failure_count": len(failures),
        "verified_at": now,
        "full_at": full_at if full_at is not None else (prior or {}).get("full_at"),
        "segments": int((prior or {}).get("segments", 0)) + 1,
    }


def _first_seq(store: Store, workspace: str) -> int | None:
    first = next(iter(store.entries(workspace, limit=1)), None)
    return first.seq if first is not None else None


def _segment(store: Store, workspace: str, state: Mapping[str, Any]) -> VerifyReport | None:
    """The entries after the state's seq, verified; None when only a full verify will do."""
    since = int(state["seq"])
    checkpoints = store.checkpoints(workspace, since=since)
    keys = store.public_keys(workspace)
    head = store.head(workspace)
    anchor = next(iter(store.entries(workspace, since=since - 1, limit=1)), None)
    if head is None or anchor is None or anchor.seq != since or anchor.hash != state["hash"]:
        return None
    verifier = ChainVerifier(workspace, checkpoints, keys, compare_records=True)
    verifier._prev = anchor  # noqa: SLF001 - the segment links on to the entry verified last
    for entry, raw in store.entries_with_raw_records(workspace, since=since):
        if entry.seq > head.seq:
            break
        if entry.kind == PRUNE_KIND:
            return None  # checked against everything the prune kept: the whole chain
        verifier.feed_raw(entry, raw)
    report = verifier.finish()
    if (report.last_seq or since) < head.seq:
        report.failures.append(
            Failure(
                head.seq,
                head.kind,
                f"tail cut off: the chain head is seq {head.seq} but the log ends at seq "
                f"{report.last_seq or since}",
            )
        )
    return report


def _combined(state: Mapping[str, Any], seg: VerifyReport, now: int) -> dict[str, Any]:
    failures = [*state.get("failures", []), *(_failure_json(f) for f in seg.failures)]
    return {
        **state,
        "seq": seg.last_seq or state["seq"],
        "hash": seg.last_hash or state["hash"],
        "entries": int(state["entries"]) + seg.entries,
        "records_compared": int(state["records_compared"]) + seg.records_compared,
        "checkpoints_verified": int(state["checkpoints_verified"]) + seg.checkpoints_verified,
        "last_checkpoint_seq": seg.last_checkpoint_seq or state.get("last_checkpoint_seq"),
        "failures": failures[:MAX_FAILURES],
        "failure_count": int(state.get("failure_count", 0)) + len(seg.failures),
        "verified_at": now,
        "segments": int(state.get("segments", 0)) + 1,
    }


def _keeps_state() -> bool:
    """Whether this process keeps the state: in AWS only the checkpoint function (the
    signer role, the one LeadingKeys lets write it); the others show the state they
    computed without a write IAM would refuse (template.yaml, CLAROS_VERIFIED_STATE)."""
    return os.environ.get("CLAROS_VERIFIED_STATE", "keep") != "show"


def _save(store: Store, workspace: str, new: dict[str, Any], expect: int | None) -> dict[str, Any]:
    if not _keeps_state():
        return new
    try:
        saved = store.save_verified_state(workspace, new, expect_seq=expect)
    except Exception:  # noqa: BLE001 - in AWS only the signer role may keep it: shown, not kept
        log.info("verified-through state of %s shown but not kept (not this role's)", workspace)
        return new
    if saved:
        return new
    # Another verify moved the state first: theirs stands when it got as far.
    theirs = store.verified_state(workspace)
    if theirs is not None and int(theirs["seq"]) >= int(new["seq"]):
        return theirs
    return new


def verify_now(store: Store, workspace: str) -> dict[str, Any]:
    """The whole chain verified again; the state starts from this."""
    return keep_full(store, workspace, verify_workspace(store, workspace))


def keep_full(store: Store, workspace: str, report: VerifyReport) -> dict[str, Any]:
    """A full verify's ``report`` as the new state (kept where this role may keep it)."""
    now = now_ms()
    before = store.verified_state(workspace)
    new = _state(report, full_at=now, now=now)
    kept = _save(store, workspace, new, int(before["seq"]) if before else None)
    if kept is not new:  # a segment landed meanwhile: the full verify's answer is kept
        current = store.verified_state(workspace)
        _save(store, workspace, new, int(current["seq"]) if current else None)
    return new


def advance(store: Store, workspace: str, *, allow_full: bool = True) -> dict[str, Any] | None:
    """The state brought up to the head: the new segment verified, or (``allow_full``) the
    whole chain when there is no state yet or a prune moved the log's start."""
    state = store.verified_state(workspace)
    head = store.head(workspace)
    if head is None:
        return state
    needs_full = (
        state is None
        or state.get("first_seq") != _first_seq(store, workspace)
        or int(state["seq"]) > head.seq
    )
    if not needs_full and state is not None and int(state["seq"]) == head.seq:
        return state
    now = now_ms()
    seg = None if needs_full or state is None else _segment(store, workspace, state)
    if seg is None:
        if not allow_full:
            return state
        report = verify_workspace(store, workspace)
        new = _state(report, full_at=now, now=now)
    else:
        assert state is not None
        new = _combined(state, seg, now)
    return _save(store, workspace, new, int(state["seq"]) if state else None)


def advance_quietly(store: Store, workspace: str) -> None:
    """After a checkpoint is signed: the new segment verified, never a full verify in the
    signing path, and never an error for the write that triggered it."""
    try:
        advance(store, workspace, allow_full=False)
    except Exception:  # the checkpoint stands; the next read advances the state
        log.exception("verified-through state of %s not advanced", workspace)


def verified_report(store: Store, workspace: str) -> VerifyReport:
    """The chain's verify result from the state, brought up to the head first."""
    state = advance(store, workspace) or {}
    report = VerifyReport(workspace)
    report.entries = int(state.get("entries", 0))
    report.records_compared = int(state.get("records_compared", 0))
    report.first_seq = state.get("first_seq")
    report.last_seq = state.get("seq") or None
    report.last_hash = state.get("hash")
    report.checkpoints_verified = int(state.get("checkpoints_verified", 0))
    report.last_checkpoint_seq = state.get("last_checkpoint_seq")
    report.kept_records = int(state.get("kept_records", 0))
    report.failures = [
        Failure(f.get("seq"), f.get("kind"), str(f.get("problem")))
        for f in state.get("failures", [])
    ]
    return report


def state_json(store: Store, workspace: str) -> dict[str, Any]:
    """What the page shows beside the verify result: when, how far, when last in full."""
    state = store.verified_state(workspace) or {}
    return {k: state.get(k) for k in ("seq", "verified_at", "full_at", "segments", "failure_count")}
