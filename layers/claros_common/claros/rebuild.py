"""Rebuild a workspace's aggregates from its ledger: ``python -m claros.aggregates rebuild
--workspace WS`` (issue 13: ledgers older than the aggregates).

A ledger written before the aggregates existed has none for its old hours (Home and
Evidence then count nothing there), and the hour of the upgrade has only what was appended
after it. The rebuild folds every entry of the ledger, in seq order as the appends do,
into its hour's and day's aggregate (``claros.aggregates.fold``) and replaces each stored
one. It is safe while appends go on, and running it twice gives the same aggregates:

* It reads the head H first and folds the entries up to H, as of then.
* Each aggregate is then replaced on condition (``Store.put_aggregate``): its version is
  read first, then the head again (H'); the entries in (H, H'] of that hour or day are
  folded in too, and the replacement is written only if the version is still the one read.
  An append that committed before the version was read is at or below H' (the head is
  read after the version), so it is in the rebuilt aggregate exactly once, from the
  ledger; one that commits after it moves the version, the put fails, and the rebuild
  folds the newer entries and tries again. No entry is counted twice (the stored
  aggregate is replaced, never added to) and none is lost.
* Aggregates of hours the ledger no longer has (pruned) are left as they are.

Cost: one pass over the ledger (entries and records, as a verify reads them) and, per
aggregate, a keyed read and a conditional write. Memory: one aggregate per hour and per day
that has entries.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from claros.aggregates import SPANS, fold
from claros.evidence.span_cache import STAMP_COLLECTION, STAMP_KEY
from claros.ledger import Entry
from claros.store.base import DocWrite, Store, StoreError

__all__ = ["RebuildResult", "main", "rebuild"]

MAX_TRIES = 50  # conditional puts per aggregate before giving up (a very busy hour)


@dataclass
class RebuildResult:
    workspace: str
    entries: int = 0  # entries folded
    through: int = 0  # the head the rebuild reached
    written: int = 0  # aggregates replaced
    retries: int = 0  # puts that lost to a concurrent append and were tried again
    spans: dict[str, int] = field(default_factory=dict)  # aggregates per span


class _Tail:
    """Entries appended after the first pass, read once and shared by every aggregate."""

    def __init__(self, store: Store, workspace: str, through: int) -> None:
        self.store, self.workspace, self.through = store, workspace, through
        self.items: list[tuple[Entry, dict[str, Any]]] = []

    def up_to(self, seq: int) -> None:
        if seq <= self.through:
            return
        for entry, record in self.store.entries_with_records(self.workspace, since=self.through):
            if entry.seq > seq:
                break
            if record is not None:
                self.items.append((entry, record))
            self.through = entry.seq
        self.through = max(self.through, seq)


def _head_seq(store: Store, workspace: str) -> int:
    head = store.head(workspace)
    return head.seq if head is not None else 0


def rebuild(store: Store, workspace: str) -> RebuildResult:
    """Every aggregate of ``workspace`` recomputed from its ledger (see the module)."""
    result = RebuildResult(workspace)
    first = _head_seq(store, workspace)
    buckets: dict[tuple[str, int], dict[str, Any]] = {}
    for entry, record in store.entries_with_records(workspace):
        if entry.seq > first:
            break  # appended during the pass: folded below, under the version check
        if record is None:
            continue  # a record the ledger no longer holds: nothing an append would fold
        for span, size in SPANS.items():
            fold(buckets.setdefault((span, entry.ts // size), {}), entry.seq, entry.kind, record)
        result.entries += 1
    tail = _Tail(store, workspace, first)
    for (span, start), bucket in sorted(buckets.items()):
        size = SPANS[span]
        folded = first  # this aggregate holds the entries through this seq
        for _ in range(MAX_TRIES):
            _, version = store.aggregate_version(workspace, span, start)
            head = _head_seq(store, workspace)  # read after the version: see the module
            tail.up_to(head)
            for entry, record in tail.items:
                if folded < entry.seq <= head and entry.ts // size == start:
                    fold(bucket, entry.seq, entry.kind, record)
            folded = max(folded, head)
            if store.put_aggregate(workspace, span, start, bucket, expect=version):
                break
            result.retries += 1
        else:
            raise StoreError(
                f"the {span} aggregate {start} kept changing under the rebuild "
                f"({MAX_TRIES} tries): run it again when the workspace is quieter"
            )
        result.written += 1
        result.spans[span] = result.spans.get(span, 0) + 1
        result.through = max(result.through, folded)
    result.entries += sum(1 for e, _ in tail.items if e.seq <= result.through)
    # Pages keep sums of past aggregates per ledger head (claros.evidence.span_cache), in
    # this process or the server's: a new stamp makes every one of them read again.
    stamp = {"stamp": secrets.token_hex(8), "through": result.through}
    store.write_docs([DocWrite(workspace, STAMP_COLLECTION, STAMP_KEY, stamp)])
    return result


_HELP = """{prog}: Home's and Evidence's aggregates, on the server.

  rebuild  recompute a workspace's hourly and daily aggregates from its ledger (after an
           upgrade from a version without them); safe while the server runs, and safe to
           run again

Errors are one line on stderr, exit 2."""


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=_HELP.format(prog=prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("rebuild", help="recompute a workspace's aggregates from its ledger")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--data", help="data directory (local mode; default $CLAROS_DATA)")
    where.add_argument(
        "--stack", help="a deployed Claros stack's name: its tables, from the stack's outputs"
    )
    run.add_argument("--workspace", required=True)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m claros.aggregates") -> int:
    from claros.auth import StackError, check_workspace_name, stack_tables
    from claros.config import ConfigError, Settings
    from claros.errors import ClarosError, NotFoundError
    from claros.store.base import GLOBAL
    from claros.wiring import open_store

    args = _parser(prog).parse_args(argv)
    name = "claros.aggregates"
    try:
        settings = Settings.from_env()
        if args.data:
            settings = settings.replace(data_dir=args.data)
        if args.stack:
            settings = settings.replace(**stack_tables(args.stack))
        workspace = check_workspace_name(args.workspace)
        store = open_store(settings, create=False)
        try:
            known = store.get_doc(GLOBAL, "workspace", workspace) is not None
            if not known and store.head(workspace) is None:
                raise NotFoundError(f"no workspace {workspace!r} here: nothing to rebuild")
            done = rebuild(store, workspace)
        finally:
            store.close()
    except ClarosError as exc:
        print(f"{name}: {exc.message}", file=sys.stderr)
        return 2
    except (ConfigError, StoreError, OSError, StackError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    spans = ", ".join(f"{n} {span}s" for span, n in sorted(done.spans.items()))
    print(
        f"rebuilt the aggregates of {workspace} from {done.entries} entries through seq "
        f"{done.through}: {spans or 'none'} ({done.retries} retried after a concurrent append)"
    )
    return 0
