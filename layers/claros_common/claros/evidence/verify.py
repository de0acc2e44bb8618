"""Server-side verification: the chain, every record, every checkpoint signature."""

from __future__ import annotations

from claros import jsonutil
from claros.ledger import ChainVerifier, Failure, VerifyReport
from claros.store.base import Store

__all__ = ["verify_workspace"]


def verify_workspace(store: Store, workspace: str) -> VerifyReport:
    verifier = ChainVerifier(
        workspace,
        store.checkpoints(workspace),
        store.public_keys(workspace),
        compare_records=True,
    )
    # Each record as the bytes the store keeps (its canonical JSON): hashing them compares
    # it without a parse; bytes that do not hash right are parsed and compared as a record.
    # A pruned log starts right after a signed checkpoint, which the verifier checks; the
    # rule and mapping versions kept below it go first, checked against the prune entries.
    first = next(iter(store.entries(workspace, limit=1)), None)
    if first is not None and first.seq > 1:
        for kept in store.kept_records(workspace, first.seq - 1):
            verifier.feed_kept(kept.seq, kept.kind, kept.ref_id, jsonutil.loads(kept.raw))
    for entry, raw in store.entries_with_raw_records(workspace):
        verifier.feed_raw(entry, raw)
    report = verifier.finish()
    # The store keeps the head apart from the entries: entries cut off the end show here.
    head = store.head(workspace)
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
