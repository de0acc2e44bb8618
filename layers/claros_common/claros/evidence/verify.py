"""Server-side verification: the chain, every record, every checkpoint signature.

One snapshot, whatever is being written meanwhile: the checkpoints are read first, then
the keys (a key is stored before anything is signed with it), then the chain head once,
and the entries up to that head and no further. Every checkpoint read lies at or below
that head (it signs an entry that was committed with a head at least as far on), so
agents appending during a verify never make a healthy log look cut off; a log really cut
short still is. The same reads on SQLite and DynamoDB (its head and queries are read
consistently).
"""

from __future__ import annotations

from claros import jsonutil
from claros.ledger import ChainVerifier, Failure, VerifyReport
from claros.store.base import Store

__all__ = ["verify_workspace"]


def verify_workspace(store: Store, workspace: str) -> VerifyReport:
    checkpoints = store.checkpoints(workspace)
    keys = store.public_keys(workspace)
    head = store.head(workspace)
    verifier = ChainVerifier(workspace, checkpoints, keys, compare_records=True)
    # Each record as the bytes the store keeps (its canonical JSON): hashing them compares
    # it without a parse; bytes that do not hash right are parsed and compared as a record.
    # A pruned log starts right after a signed checkpoint, which the verifier checks; the
    # rule and mapping versions kept below it go first, checked against the prune entries.
    first = next(iter(store.entries(workspace, limit=1)), None)
    if first is not None and first.seq > 1:
        for kept in store.kept_records(workspace, first.seq - 1):
            verifier.feed_kept(kept.seq, kept.kind, kept.ref_id, jsonutil.loads(kept.raw))
    for entry, raw in store.entries_with_raw_records(workspace):
        if head is not None and entry.seq > head.seq:
            break  # written after the snapshot's head: the next verify covers it
        verifier.feed_raw(entry, raw)
    report = verifier.finish()
    # The store keeps the head apart from the entries: entries cut off the end show here.
    if head is not None and (report.last_seq or 0) < head.seq:
        report.failures.append(
            Failure(
                head.seq,
                head.kind,
                f"tail cut off: the chain head is seq {head.seq} but the log ends at seq "
                f"{report.last_seq or 0}",
            )
        )
    return report
