"""Signing checkpoints: every N entries, on demand, and when the tail stays unsigned.

A checkpoint signs ``claros-ledger-checkpoint\\n{workspace}\\n{seq}\\n{hash}\\n{ts}`` with
the workspace's active Ed25519 key; the key's public half is registered in the store first,
so every checkpoint in the store can be verified from the store's key list.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from claros import jsonutil
from claros.anchor import Anchor
from claros.auth import workspaces
from claros.clock import now_ms
from claros.ledger import (
    PUBLIC_KEY_KIND,
    ZERO_HASH,
    Checkpoint,
    Entry,
    PublicKey,
    checkpoint_message,
)
from claros.signing import RotationPendingError, Signer, SigningError
from claros.store.base import DocWrite, NewRecord, Store
from claros.wiring import Services

log = logging.getLogger("claros.checkpoints")

__all__ = [
    "ChainBrokenError",
    "Tail",
    "due_checkpoints",
    "entry_at",
    "record",
    "rotate_key",
    "sign_checkpoint",
    "sign_due",
    "unsigned_tails",
    "wait_for_checkpoint",
]


class ChainBrokenError(SigningError):
    """The chain from the last signed checkpoint to the entry to sign does not hold."""


def verify_before_signing(store: Store, entry: Entry) -> None:
    """Read the ledger from the last signed checkpoint below ``entry`` up to it and check
    every link, every entry's hash and every payload hash against its record, as stored.
    Only what the store holds counts: ``entry`` must be the stored entry at its seq."""
    workspace = entry.workspace
    base = store.checkpoint_before(workspace, entry.seq)
    since, prev = (base.seq, base.hash) if base else (0, ZERO_HASH)
    expected = since + 1
    last: Entry | None = None
    listed: set[tuple[str, str]] | None = None  # the workspace's keys, read at the first intro
    for stored, raw in store.entries_with_raw_records(
        workspace, since=since, limit=entry.seq - since
    ):
        where = f"seq {stored.seq} ({stored.kind})"
        if stored.seq != expected:
            raise ChainBrokenError(f"not signing: seq {expected} is missing from the ledger")
        if stored.prev_hash != prev:
            raise ChainBrokenError(
                f"not signing: {where} links to {stored.prev_hash}, expected {prev}"
            )
        if stored.expected_hash() != stored.hash:
            raise ChainBrokenError(
                f"not signing: {where} hash is {stored.hash}, its fields hash to "
                f"{stored.expected_hash()}"
            )
        if raw is None:
            raise ChainBrokenError(f"not signing: {where} has no record")
        got = hashlib.sha256(raw).hexdigest()
        if got != stored.payload_sha256:
            raise ChainBrokenError(
                f"not signing: {where} record hashes to {got}, the entry says "
                f"{stored.payload_sha256}"
            )
        if stored.kind == PUBLIC_KEY_KIND:
            if listed is None:
                listed = {(k.key_id, k.public_key) for k in store.public_keys(workspace)}
            _introduces_a_listed_key(stored, raw, listed)
        prev, expected, last = stored.hash, expected + 1, stored
    if last != entry:
        raise ChainBrokenError(
            f"not signing: seq {entry.seq} in the ledger is not the entry asked for"
        )


def _introduces_a_listed_key(stored: Entry, raw: bytes, listed: set[tuple[str, str]]) -> None:
    """A checkpoint over a ``public_key`` entry vouches for its key: a verify that pinned
    this workspace's keys trusts it from then on. So the key must be one of the keys the
    workspace lists (``Store.public_keys``: rotate-key lists a new key before it appends
    the entry; in AWS only the signer role writes that list). Any role that appends may
    write the entry itself, with a key it made: signing over that would hand it a key
    auditors trust (tests/security/aws/test_request_role_introduces_a_key_of_its_own.py)."""
    try:
        record = jsonutil.loads(raw)
        key = (str(record["key_id"]), str(record["public_key"]))
    except (ValueError, TypeError, KeyError):
        key = None
    if key is None or key not in listed:
        named = key[0] if key is not None else "(no key)"
        raise ChainBrokenError(
            f"not signing: seq {stored.seq} introduces key {named}, which is not one of "
            f"workspace {stored.workspace!r}'s keys (rotate-key lists a key before it "
            "announces it): a checkpoint over it would vouch for a key Claros did not make"
        )


def sign_checkpoint(
    store: Store, signer: Signer, entry: Entry, anchor: Anchor | None = None
) -> Checkpoint:
    """Sign a checkpoint at ``entry``; an existing checkpoint at that seq is returned. With
    an anchor, the checkpoint is also copied there (again, when it existed: a retry after a
    failed copy must still land it).

    Nothing is signed on anyone's word: the chain from the last signed checkpoint to
    ``entry`` is read from the store and verified first (``ChainBrokenError``)."""
    existing = store.checkpoints(entry.workspace, since=entry.seq - 1, limit=1)
    if existing and existing[0].seq == entry.seq:
        if anchor is not None:
            anchor(existing[0])
        return existing[0]
    verify_before_signing(store, entry)
    public = signer.active_key(entry.workspace)
    store.add_public_key(public)
    ts = now_ms()
    key_id, signature = signer.sign(
        entry.workspace, checkpoint_message(entry.workspace, entry.seq, entry.hash, ts)
    )
    if key_id != public.key_id:
        # rotate-key ran in between (another process): list the key that signed, too.
        public = signer.active_key(entry.workspace)
        if public.key_id != key_id:
            raise SigningError(f"the signing key changed while signing at seq {entry.seq}")
        store.add_public_key(public)
    cp = Checkpoint(
        entry.workspace, entry.seq, entry.hash, ts, key_id, base64.b64encode(signature).decode()
    )
    if not store.add_checkpoint(cp):
        existing = store.checkpoints(entry.workspace, since=entry.seq - 1, limit=1)
        if existing and existing[0].seq == entry.seq:
            cp = existing[0]
    if anchor is not None:
        anchor(cp)
    # The segment up to this checkpoint verified once, for the Evidence page (issue 13).
    from claros.evidence.verified import advance_quietly

    advance_quietly(store, entry.workspace)
    return cp


# How long an AWS rotate-key waits for the checkpoint function to sign the entry that
# introduces the new key (the ledger's stream brings it within seconds).
ROTATE_WAIT_S = 30.0
CHECKPOINT_POLL_S = 0.25


def wait_for_checkpoint(store: Store, entry: Entry, wait_s: float) -> bool:
    """Whether a signed checkpoint at or after ``entry`` is in the store, waiting up to
    ``wait_s`` seconds for the checkpoint function to sign one (AWS: only it may sign)."""
    deadline = time.monotonic() + wait_s
    while True:
        latest = store.latest_checkpoint(entry.workspace)
        if latest is not None and latest.seq >= entry.seq:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(CHECKPOINT_POLL_S)


def rotate_key(
    services: Services, workspace: str, *, resume: str | None = None
) -> tuple[PublicKey, PublicKey]:
    """A new active signing key, introduced in the chain by the old one: (old, new).

    Before the new key signs anything, a ``public_key`` entry with its public half is
    appended and a checkpoint at that entry is signed with the old key. An auditor who
    pinned the old key (saved checkpoints, ``--keys``) thereby trusts the new one from that
    seq on; a key that appears without such an entry is refused by their verify.

    In AWS whoever rotates (an operator) may not sign: only the signer role may. The
    checkpoint function signs a ``public_key`` entry as soon as the ledger's stream shows
    it, with the key the alias still names; this waits for that checkpoint and only then
    moves the alias. If none comes in time, the alias stays (the old key goes on signing)
    and RotationPendingError names the new key: ``resume`` with it finishes the rotation
    with the entry already written, rather than announce yet another key."""
    store, signer = services.store, services.signer
    old = signer.active_key(workspace)
    store.add_public_key(old)

    def vouch(new: PublicKey) -> None:
        store.add_public_key(new)  # listed before anything is signed with it
        entry = store.record_entry(workspace, PUBLIC_KEY_KIND, new.key_id)
        if entry is None:  # a resumed rotation goes on with the entry it wrote
            body = {**new.to_json(), "replaces": old.key_id}
            [entry] = record(services, workspace, [NewRecord(PUBLIC_KEY_KIND, new.key_id, body)])
        if services.settings.inline_checkpoints:
            sign_checkpoint(store, signer, entry, services.anchor)  # still the old key
        elif not wait_for_checkpoint(store, entry, ROTATE_WAIT_S):
            raise RotationPendingError(
                f"the public_key entry (seq {entry.seq}) announcing key {new.key_id} is "
                "written, but no signed checkpoint covers it yet, so the old key stays "
                "active: the checkpoint function signs it from the ledger's stream"
            )

    new = signer.rotate(workspace, vouch, resume)
    store.add_public_key(new)
    return old, new


def entry_at(store: Store, workspace: str, seq: int) -> Entry | None:
    for entry in store.entries(workspace, since=seq - 1, limit=1):
        return entry if entry.seq == seq else None
    return None


def record(
    services: Services,
    workspace: str,
    records: Sequence[NewRecord],
    writes: Sequence[DocWrite] = (),
) -> list[Entry]:
    """Append records (and doc writes) in one transaction; locally, also sign a checkpoint
    in the same request when an entry's seq reaches a multiple of N (in AWS the ledger
    table's stream feeds the checkpoint function instead).

    Once the append has committed, the entries are the answer: a checkpoint that cannot be
    signed now (a key file with loose permissions, KMS or the anchor unreachable) never
    fails the request, or a retry would append the records again. It is logged loudly,
    counted (``CheckpointSignFailed``), and signed later: the next append at a multiple of
    N covers it, and the heartbeat signs a tail that stays unsigned."""
    entries = services.store.append_many(workspace, records, writes=writes)
    settings = services.settings
    if settings.inline_checkpoints:
        for entry in entries:
            if entry.seq % settings.checkpoint_every == 0:
                _sign_inline(services, entry)
    return entries


def _sign_inline(services: Services, entry: Entry) -> None:
    try:
        sign_checkpoint(services.store, services.signer, entry, services.anchor)
    except Exception:  # the entry is committed whatever happens here; see record()
        log.exception(
            "CHECKPOINT NOT SIGNED: workspace %s seq %s was recorded but its checkpoint "
            "could not be signed; the next append or the heartbeat retries",
            entry.workspace,
            entry.seq,
        )
        services.metric("CheckpointSignFailed", 1)


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class Tail(NamedTuple):
    """A workspace's entries after its last checkpoint."""

    head: Entry
    last_seq: int  # the last signed seq (0: none)
    oldest_ts: int  # when the oldest unsigned entry was written

    @property
    def entries(self) -> int:
        return self.head.seq - self.last_seq

    def due(self, *, every: int, max_age_s: int, now: int) -> bool:
        # The tail's age is that of its oldest unsigned entry: steady traffic slower than
        # N entries per max age must not postpone the heartbeat forever.
        return self.entries >= every or now - self.oldest_ts >= max_age_s * 1000


def unsigned_tails(store: Store) -> Iterator[Tail]:
    """Each workspace whose chain has entries after its last checkpoint. A workspace whose
    items do not read (an item a role planted: IAM cannot hold a put to the store's shape)
    is logged and passed over: it must not keep every other workspace unsigned."""
    for workspace in workspaces(store):
        try:
            tail = _tail(store, workspace)
        except Exception:  # whatever one workspace's items hold
            log.exception("CHECKPOINT REFUSED for workspace %s: its chain does not read", workspace)
            continue
        if tail is not None:
            yield tail


def _tail(store: Store, workspace: str) -> Tail | None:
    head = store.head(workspace)
    if head is None:
        return None
    last = store.latest_checkpoint(workspace)
    last_seq = last.seq if last else 0
    if head.seq <= last_seq:
        return None
    oldest = next(iter(store.entries(workspace, since=last_seq, limit=1)), head)
    return Tail(head, last_seq, oldest.ts)


def sign_due(
    store: Store,
    signer: Signer,
    tails: Iterable[Tail],
    *,
    every: int,
    max_age_s: int,
    now: int | None = None,
    anchor: Anchor | None = None,
) -> list[Checkpoint]:
    now = now or now_ms()
    signed = []
    for tail in tails:
        if not tail.due(every=every, max_age_s=max_age_s, now=now):
            continue
        try:
            signed.append(sign_checkpoint(store, signer, tail.head, anchor))
        except Exception:  # a SigningError, or items that do not read
            # One workspace whose chain does not verify (or whose signing is stopped) must
            # not keep the others unsigned; it is logged and stays unsigned.
            log.exception("CHECKPOINT REFUSED for workspace %s", tail.head.workspace)
    return signed


def due_checkpoints(
    store: Store,
    signer: Signer,
    *,
    every: int,
    max_age_s: int,
    now: int | None = None,
    anchor: Anchor | None = None,
) -> list[Checkpoint]:
    """The heartbeat: sign each workspace's head when it is N entries past its last
    checkpoint, or has stayed unsigned for ``max_age_s``. Safe to run anywhere, any time."""
    return sign_due(
        store, signer, unsigned_tails(store), every=every, max_age_s=max_age_s, now=now,
        anchor=anchor,
    )  # fmt: skip
