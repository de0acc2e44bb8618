"""Signing checkpoints: every N entries, on demand, and when the tail stays unsigned.

A checkpoint signs ``claros-ledger-checkpoint\\n{workspace}\\n{seq}\\n{hash}\\n{ts}`` with
the workspace's active Ed25519 key; the key's public half is registered in the store first,
so every checkpoint in the store can be verified from the store's key list.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from claros.anchor import Anchor
from claros.clock import now_ms
from claros.ledger import Checkpoint, Entry, checkpoint_message
from claros.signing import Signer
from claros.store.base import GLOBAL, DocWrite, NewRecord, Store
from claros.wiring import Services

__all__ = ["due_checkpoints", "entry_at", "record", "sign_checkpoint"]


def sign_checkpoint(
    store: Store, signer: Signer, entry: Entry, anchor: Anchor | None = None
) -> Checkpoint:
    """Sign a checkpoint at ``entry``; an existing checkpoint at that seq is returned. With
    an anchor, the checkpoint is also copied there (again, when it existed: a retry after a
    failed copy must still land it)."""
    store.add_public_key(signer.active_key(entry.workspace))
    ts = now_ms()
    key_id, signature = signer.sign(
        entry.workspace, checkpoint_message(entry.workspace, entry.seq, entry.hash, ts)
    )
    cp = Checkpoint(
        entry.workspace, entry.seq, entry.hash, ts, key_id, base64.b64encode(signature).decode()
    )
    if not store.add_checkpoint(cp):
        existing = store.checkpoints(entry.workspace, since=entry.seq - 1, limit=1)
        if existing and existing[0].seq == entry.seq:
            cp = existing[0]
    if anchor is not None:
        anchor(cp)
    return cp


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
    table's stream feeds the checkpoint function instead)."""
    entries = services.store.append_many(workspace, records, writes=writes)
    settings = services.settings
    if settings.inline_checkpoints:
        for entry in entries:
            if entry.seq % settings.checkpoint_every == 0:
                sign_checkpoint(services.store, services.signer, entry, services.anchor)
    return entries


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
    now = now or now_ms()
    signed = []
    after: str | None = None
    while True:
        page = store.query_docs(GLOBAL, "workspace", after=after, limit=100)
        for doc in page:
            head = store.head(doc.key)
            if head is None:
                continue
            last = store.latest_checkpoint(doc.key)
            last_seq = last.seq if last else 0
            if head.seq <= last_seq:
                continue
            # The tail's age is that of its oldest unsigned entry: steady traffic slower
            # than N entries per max age must not postpone the heartbeat forever.
            oldest = next(iter(store.entries(doc.key, since=last_seq, limit=1)), head)
            if head.seq - last_seq >= every or now - oldest.ts >= max_age_s * 1000:
                signed.append(sign_checkpoint(store, signer, head, anchor))
        if len(page) < 100:
            return signed
        after = page[-1].key
