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

Who keeps it: in AWS only the checkpoint function's role may write the state
(``Settings.keeps_verified_state``, passed in as ``keep``); the other functions show the
state brought up to the head without saving it. The checkpoint function also makes the
first state (``catch_up``): the chain verified from its first entry, ``CATCH_UP_ENTRIES``
entries per invocation (after each checkpoint it signs and on each schedule tick), so a
large ledger is bootstrapped over a few invocations, each of bounded work, and the readers
verify only what the signer has not reached yet.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from claros.clock import now_ms
from claros.evidence.verify import verify_workspace
from claros.ledger import PRUNE_KIND, ChainVerifier, Failure, VerifyReport
from claros.store.base import Store

__all__ = [
    "CATCH_UP_ENTRIES",
    "advance",
    "advance_quietly",
    "catch_up",
    "catch_up_quietly",
    "keep_full",
    "state_json",
    "verified_report",
    "verify_now",
]

log = logging.getLogger("claros.evidence.verified")

MAX_FAILURES = 100  # kept in the state; the count says how many there were
# Entries one catch-up step verifies at most (the checkpoint function: a Lambda's time).
CATCH_UP_ENTRIES = 20_000


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


def _segment(
    store: Store, workspace: str, state: Mapping[str, Any] | None, *, most: int | None = None
) -> VerifyReport | None:
    """The entries after the state's seq (with no state: from the log's first entry, seq 1),
    at most ``most`` of them, verified; None when only a full verify will do."""
    head = store.head(workspace)
    if head is None:
        return None
    since = int(state["seq"]) if state is not None else 0
    until = head.seq if most is None else min(head.seq, since + most)
    checkpoints = [c for c in store.checkpoints(workspace, since=since) if c.seq <= until]
    keys = store.public_keys(workspace)
    verifier = ChainVerifier(workspace, checkpoints, keys, compare_records=True)
    if state is not None:
        anchor = next(iter(store.entries(workspace, since=since - 1, limit=1)), None)
        if anchor is None or anchor.seq != since or anchor.hash != state["hash"]:
            return None
        verifier._prev = anchor  # noqa: SLF001 - the segment links on to the entry verified last
    elif _first_seq(store, workspace) != 1:
        return None  # a pruned log: checked against what the prune kept, the whole chain
    for entry, raw in store.entries_with_raw_records(workspace, since=since):
        if entry.seq > until:
            break
        if entry.kind == PRUNE_KIND and state is not None:
            return None  # checked against everything the prune kept: the whole chain
        verifier.feed_raw(entry, raw)
    report = verifier.finish()
    if (report.last_seq or since) < until:
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


def _save(
    store: Store, workspace: str, new: dict[str, Any], expect: int | None, *, keep: bool
) -> dict[str, Any]:
    if not keep:  # not this role's to write (Settings.keeps_verified_state): shown only
        return new
    try:
        saved = store.save_verified_state(workspace, new, expect_seq=expect)
    except Exception:  # noqa: BLE001 - a state that could not be saved is shown all the same
        log.warning("verified-through state of %s shown but not kept", workspace, exc_info=True)
        return new
    if saved:
        return new
    # Another verify moved the state first: theirs stands when it got as far.
    theirs = store.verified_state(workspace)
    if theirs is not None and int(theirs["seq"]) >= int(new["seq"]):
        return theirs
    return new


def verify_now(store: Store, workspace: str, *, keep: bool = True) -> dict[str, Any]:
    """The whole chain verified again; the state starts from this (``keep``: saved, where
    this role may write it)."""
    return keep_full(store, workspace, verify_workspace(store, workspace), keep=keep)


def keep_full(
    store: Store, workspace: str, report: VerifyReport, *, keep: bool = True
) -> dict[str, Any]:
    """A full verify's ``report`` as the new state (saved when ``keep``)."""
    now = now_ms()
    before = store.verified_state(workspace)
    new = _state(report, full_at=now, now=now)
    kept = _save(store, workspace, new, int(before["seq"]) if before else None, keep=keep)
    if kept is not new:  # a segment landed meanwhile: the full verify's answer is kept
        current = store.verified_state(workspace)
        _save(store, workspace, new, int(current["seq"]) if current else None, keep=keep)
    return new


def advance(
    store: Store, workspace: str, *, allow_full: bool = True, keep: bool = True
) -> dict[str, Any] | None:
    """The state brought up to the head: the new segment verified, or (``allow_full``) the
    whole chain when there is no state yet or a prune moved the log's start. ``keep``:
    save it (only where this role may write it; otherwise it is shown, not saved)."""
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
    return _save(store, workspace, new, int(state["seq"]) if state else None, keep=keep)


def catch_up(
    store: Store, workspace: str, *, most: int = CATCH_UP_ENTRIES
) -> dict[str, Any] | None:
    """One bounded step of the signer (who keeps the state): at most ``most`` entries
    verified, making the first state from the log's first entry when there is none, or
    moving an existing one on. A pruned log, or a prune in the next segment, needs the
    whole chain verified once: that is done here too (prunes are rare, an admin's act)."""
    state = store.verified_state(workspace)
    head = store.head(workspace)
    if head is None:
        return state
    if state is not None and (
        state.get("first_seq") != _first_seq(store, workspace) or int(state["seq"]) > head.seq
    ):
        state = None  # the log's start moved (a prune): start again
    if state is not None and int(state["seq"]) == head.seq:
        return state
    now = now_ms()
    seg = _segment(store, workspace, state, most=most)
    if seg is None:
        new = _state(verify_workspace(store, workspace), full_at=now, now=now)
    elif state is None:
        # The first state, from seq 1: verified in full once it reaches the head.
        new = _state(seg, full_at=now if seg.last_seq == head.seq else None, now=now)
    else:
        new = _combined(state, seg, now)
        if state.get("full_at") is None and seg.last_seq == head.seq:
            new["full_at"] = now  # the bootstrap from seq 1 reached the head
    before = store.verified_state(workspace)
    return _save(store, workspace, new, int(before["seq"]) if before else None, keep=True)


def advance_quietly(store: Store, workspace: str, *, keep: bool = True) -> None:
    """After a checkpoint is signed: the new segment verified where this role keeps the
    state, never a full verify in the signing path, and never an error for the write that
    triggered it."""
    if not keep:
        return
    try:
        advance(store, workspace, allow_full=False)
    except Exception:  # the checkpoint stands; the next read advances the state
        log.exception("verified-through state of %s not advanced", workspace)


def catch_up_quietly(store: Store, workspace: str, *, most: int | None = None) -> None:
    """The checkpoint function's step for a workspace (``catch_up``, ``CATCH_UP_ENTRIES``
    unless ``most`` says), never an error for the stream batch or tick that ran it."""
    try:
        catch_up(store, workspace, most=CATCH_UP_ENTRIES if most is None else most)
    except Exception:  # the next tick tries again
        log.exception("verified-through state of %s not caught up", workspace)


def verified_report(store: Store, workspace: str, *, keep: bool = True) -> VerifyReport:
    """The chain's verify result from the state, brought up to the head first (saved
    when ``keep``)."""
    state = advance(store, workspace, keep=keep) or {}
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
