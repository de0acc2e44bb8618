"""Retention and pruning (evidence.txt, "Retention").

A workspace keeps every record until an admin sets a retention of at least 183 days (six
months, as EU AI Act Art 26(6) asks of deployers). Pruning, run on demand only (never on a
schedule), first signs a checkpoint at the last entry it drops (the last entry older than
the retention), then deletes those entries and their checks, approvals, overrides and
outcomes; rule and mapping versions are never deleted. The chain then verifies from that
checkpoint. The newest entry is never dropped, so the log always shows where it goes on.
"""

from __future__ import annotations

import hashlib
from typing import Any

from claros.auth import Principal
from claros.checkpoints import entry_at, record, sign_checkpoint, wait_for_checkpoint
from claros.clock import now_ms
from claros.errors import BadRequestError, ConflictError
from claros.evidence.activity import DAY_MS
from claros.ledger import PRUNE_KIND, RETENTION_FLOOR_DAYS, Checkpoint, Entry, kept_digest
from claros.store.base import Doc, DocWrite, NewRecord, Store
from claros.wiring import Services

__all__ = [
    "FLOOR_DAYS",
    "MAX_DAYS",
    "get_retention",
    "prune",
    "prune_through",
    "retention_days",
    "set_retention",
]

FLOOR_DAYS = RETENTION_FLOOR_DAYS  # every verifier refuses a prune entry naming fewer
MAX_DAYS = 36_500
# The setting's own doc collection: in AWS the prune role writes it and no other settings
# (the ask webhook is ``settings``/``ask_webhook``, which the prune role once could rewrite:
# tests/security/aws/test_prune_role_redirects_the_ask_webhook.py). A setting made before
# is read from ``settings``/``retention`` while the new doc is absent; clearing writes a
# ``cleared`` doc, so the old one never comes back.
SETTINGS, KEY = "retention", "days"
OLD_SETTINGS, OLD_KEY = "settings", "retention"
# In AWS, how long a prune waits for the checkpoint function to sign its entry (the
# stream delivers within seconds; the prune function's timeout is 29 s).
COVER_WAIT_S = 12.0
_FLOOR_REASON = "six months, as EU AI Act Art 26(6) asks of deployers"


def _setting(store: Store, workspace: str) -> Doc | None:
    """The retention setting's doc (None: none is set, or it was cleared)."""
    doc = store.get_doc(workspace, SETTINGS, KEY)
    if doc is None:
        doc = store.get_doc(workspace, OLD_SETTINGS, OLD_KEY)
    return None if doc is None or doc.value.get("cleared") else doc


def retention_days(store: Store, workspace: str) -> int | None:
    """The workspace's retention in days (None: none is set), as a prune may use it:
    ConflictError when the stored setting is not one ``set_retention`` could have written
    (below the floor, above ``MAX_DAYS``, not a whole number). The setting is a doc, and in
    AWS every role that appends may write docs (template.yaml): a prune never trusts it
    past the bounds every verifier holds it to."""
    doc = _setting(store, workspace)
    if doc is None:
        return None
    problem = _setting_problem(doc.value.get("days"))
    if problem is not None:
        raise ConflictError(problem)
    return int(doc.value["days"])


def _setting_problem(days: object) -> str | None:
    """Why a stored retention setting is refused, or None when it is one an admin could
    have set (``set_retention``'s bounds)."""
    if isinstance(days, bool) or not isinstance(days, int) or not FLOOR_DAYS <= days <= MAX_DAYS:
        return (
            f"the stored retention setting ({days!r} days) is not one PUT "
            f"/api/evidence/retention accepts ({FLOOR_DAYS} to {MAX_DAYS} days: "
            f"{_FLOOR_REASON}); nothing is pruned until an admin sets the retention again"
        )
    return None


def set_retention(store: Store, principal: Principal, days: int | None) -> dict[str, Any]:
    workspace = principal.workspace
    if days is None:
        cleared = {"cleared": True, "set_by": principal.person or principal.key_id,
                   "set_at": now_ms()}  # fmt: skip
        store.write_docs([DocWrite(workspace, SETTINGS, KEY, cleared)])
        return get_retention(store, workspace)
    if days < FLOOR_DAYS:
        raise BadRequestError(
            f"retention must be at least {FLOOR_DAYS} days ({_FLOOR_REASON}); got {days}"
        )
    if days > MAX_DAYS:
        raise BadRequestError(f"retention is at most {MAX_DAYS} days; got {days}")
    value = {"days": days, "set_by": principal.person or principal.key_id, "set_at": now_ms()}
    store.write_docs([DocWrite(workspace, SETTINGS, KEY, value)])
    return get_retention(store, workspace)


def _checkpoint_at(store: Store, workspace: str, seq: int) -> Checkpoint | None:
    found = store.checkpoints(workspace, since=seq - 1, limit=1)
    return found[0] if found and found[0].seq == seq else None


def _brief(entry: Entry) -> dict[str, Any]:
    return {"seq": entry.seq, "kind": entry.kind, "ref_id": entry.ref_id, "ts": entry.ts}


def get_retention(store: Store, workspace: str) -> dict[str, Any]:
    doc = _setting(store, workspace)
    first = next(iter(store.entries(workspace, limit=1)), None)
    oldest = _brief(first) if first else None
    if first is not None and first.seq > 1:
        # Below a prune's cut only rule and mapping versions stay; the oldest is older.
        kept = store.kept_records(workspace, first.seq - 1)
        if kept:
            k = kept[0]
            oldest = {"seq": k.seq, "kind": k.kind, "ref_id": k.ref_id, "kept": True}
    body: dict[str, Any] = {
        "workspace": workspace,
        "days": None,
        "floor_days": FLOOR_DAYS,
        "oldest_record": oldest,
        "pruned_through": None,
        "verifies_from": None,
    }
    if doc is None:
        body["message"] = "no retention is set: every record is kept"
    else:
        days = doc.value.get("days")
        body.update(
            days=days if isinstance(days, int) and not isinstance(days, bool) else None,
            set_by=doc.value.get("set_by"),
            set_at=doc.value.get("set_at"),
        )
        problem = _setting_problem(days)
        body["message"] = problem or f"records older than {days} days may be pruned"
    if first is not None and first.seq > 1:
        body["pruned_through"] = first.seq - 1
        anchor = _checkpoint_at(store, workspace, first.seq - 1)
        body["verifies_from"] = anchor.to_json() if anchor else None
        body["chain"] = (
            f"the chain verifies from the signed checkpoint at seq {first.seq - 1}"
            if anchor
            else f"no signed checkpoint at seq {first.seq - 1}: the chain cannot verify"
        )
    elif first is not None:
        body["chain"] = "nothing was pruned: the chain verifies from its first entry"
    return body


def _last_older_than(store: Store, workspace: str, cutoff: int) -> Entry | None:
    """The last entry of the run of entries older than ``cutoff`` at the start of the log,
    never the newest entry. Reads only the entries it would drop, and one more."""
    head = store.head(workspace)
    last: Entry | None = None
    for entry in store.entries(workspace):
        if entry.ts >= cutoff or (head is not None and entry.seq >= head.seq):
            break
        last = entry
    return last


def prune(services: Services, workspace: str, *, now: int | None = None) -> dict[str, Any]:
    store = services.store
    days = retention_days(store, workspace)
    if days is None:
        raise ConflictError("no retention is set: every record is kept, nothing is pruned")
    cutoff = (now if now is not None else now_ms()) - days * DAY_MS
    last = _last_older_than(store, workspace, cutoff)
    body: dict[str, Any] = {"workspace": workspace, "days": days, "cutoff": cutoff}
    if last is None:
        return {**body, "pruned": False, "message": f"nothing is older than {days} days"}
    return {**body, **prune_through(services, last, days)}


def prune_through(
    services: Services, last: Entry, days: int, *, cover_wait_s: float | None = None
) -> dict[str, Any]:
    """Drop the entries through ``last`` as a prune does (the steps every verifier checks):
    a checkpoint signed at ``last``, a ``prune`` entry naming it and ``days`` (covered by
    a checkpoint of its own), then the deletes."""
    store, workspace = services.store, last.workspace
    problem = _setting_problem(days)
    if problem is not None:
        raise ConflictError(problem)
    # Sign first: the deletes are allowed only at a signed checkpoint, and the chain
    # verifies from it afterwards. In AWS the prune role may not sign (only the signer
    # role may): the prune goes through the last checkpoint signed at or below the cut.
    if services.settings.inline_checkpoints:
        cp = sign_checkpoint(store, services.signer, last, services.anchor)
    else:
        below = [c for c in store.checkpoints(workspace) if c.seq <= last.seq]
        at = entry_at(store, workspace, below[-1].seq) if below else None
        if at is None:
            return {
                "pruned": False,
                "message": f"no signed checkpoint at or below seq {last.seq} yet: the "
                "checkpoint function signs one within CheckpointMaxAge",
            }
        cp, last = below[-1], at
    # Then say in the chain what stays below the cut: the rule and mapping versions lose
    # their entries, and this entry (covered by later checkpoints) vouches for them. It is
    # written before the deletes, so a prune cut short is finished by running it again.
    kept = store.kept_records(workspace, last.seq)
    items = [(k.seq, k.kind, k.ref_id, hashlib.sha256(k.raw).hexdigest()) for k in kept]
    listed = {
        "through_seq": last.seq,
        "checkpoint": {"seq": cp.seq, "hash": cp.hash},
        "kept": {"count": len(items), "sha256": kept_digest(items)},
        "retention_days": days,
    }
    # One prune entry per cut (its ref_id names the cut): a prune run again, after one cut
    # short or one that waited in vain for its checkpoint, goes on with the entry written.
    ref_id = f"prn_{last.seq}_{cp.seq}"
    written = store.record_entry(workspace, PRUNE_KIND, ref_id)
    if written is not None:
        entry = written
    else:
        [entry] = record(services, workspace, [NewRecord(PRUNE_KIND, ref_id, listed)])
    # Signed before anything is dropped: a prune entry no checkpoint covers accounts for
    # nothing (anyone who can write the store but not sign could have appended it), and a
    # chain cut before its prune entry is signed verifies nowhere. In AWS the prune role
    # may not sign: the checkpoint function signs a prune entry as soon as the ledger's
    # stream shows it (claros.api.checkpoint.on_stream, the same sign_checkpoint), and the
    # prune waits for that checkpoint before it deletes.
    if services.settings.inline_checkpoints:
        sign_checkpoint(store, services.signer, entry, services.anchor)
    elif not wait_for_checkpoint(
        store, entry, COVER_WAIT_S if cover_wait_s is None else cover_wait_s
    ):
        return {
            "pruned": False,
            "prune_entry": entry.seq,
            "message": (
                f"the prune entry (seq {entry.seq}) is written but no signed checkpoint "
                f"covers it yet, so nothing was dropped: the checkpoint function signs it "
                f"from the ledger's stream; run the prune again to drop the entries"
            ),
        }
    done = store.prune(workspace, last.seq)
    return {
        "pruned": True,
        "through_seq": done.through_seq,
        "entries_deleted": done.entries_deleted,
        "records_deleted": done.records_deleted,
        "checkpoint": cp.to_json(),
        "message": (
            f"dropped the entries through seq {last.seq}; the chain verifies from the "
            f"checkpoint signed there; {len(items)} rule and mapping versions are kept"
        ),
        "kept_versions": len(items),
    }
