"""Server-side verification: the chain, every record, every checkpoint signature."""

from __future__ import annotations

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
    for entry, record in store.entries_with_records(workspace):
        verifier.feed(entry, record)
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
