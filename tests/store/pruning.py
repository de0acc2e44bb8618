"""A prune as the server makes one, for the window tests: a signed checkpoint at the cut,
the prune entry (stamped when the test says), its own checkpoint, then the store's prune."""

from __future__ import annotations

import base64
from pathlib import Path

from claros.ledger import Checkpoint, Entry, kept_digest
from claros.signing import FileSigner
from claros.store.base import Store


def sign(signer: FileSigner, store: Store, entry: Entry) -> Checkpoint:
    ws = entry.workspace
    message = Checkpoint(ws, entry.seq, entry.hash, entry.ts, "", "").message()
    key_id, signature = signer.sign(ws, message)
    cp = Checkpoint(ws, entry.seq, entry.hash, entry.ts, key_id,
                    base64.b64encode(signature).decode())  # fmt: skip
    store.add_public_key(signer.active_key(ws))
    assert store.add_checkpoint(cp) is True
    return cp


def prune_through(store: Store, keys: Path, workspace: str, seq: int, *, ts: int) -> None:
    """Entries 1..``seq`` pruned, the prune entry stamped ``ts``."""
    signer = FileSigner(keys)
    cut = next(e for e in store.entries(workspace) if e.seq == seq)
    cp = sign(signer, store, cut)
    said = store.append(workspace, "prune", "prn1", {
        "through_seq": seq, "checkpoint": {"seq": seq, "hash": cp.hash}, "retention_days": 200,
        "kept": {"count": 0, "sha256": kept_digest([])}}, ts=ts)  # fmt: skip
    sign(signer, store, said)
    assert store.prune(workspace, seq).entries_deleted == seq
