"""Pending appends: the queue, in the state table, through which appends of one workspace
made by different processes (Lambda execution environments) share transactions.

An append that lost a race for the chain head puts a pending item here and tries again;
every append, before its transaction, reads the workspace's pending items (oldest first)
and carries as many as fit, each as its entries, its records and a conditional delete of
its pending item, in the one transaction (claros.store.dynamo). Its key:

=============================  =========================  ==============================
pk                             sk                         attributes
=============================  =========================  ==============================
``{workspace}#doc#_pending``   ``{ms:013d}#{16 hex}``     ``exp`` (N, ms), ``recs`` (B),
                                                          ``ts`` (N, optional)
=============================  =========================  ==============================

A ``#doc#`` key: the roles that append may write it (template.yaml's LeadingKeys), and
nothing in it is more than a request to append, which those roles can make directly. A
committer trusts nothing of it: it re-canonicalizes each record (claros.store.base
``record_bytes``) and computes its hash, decompresses at most ``MAX_PENDING_BYTES``, takes
the workspace from the key, and drops an item it cannot read. The sort key is the
arrival time, so the oldest appends are carried first, and the carried records keep it
(attribute ``pend``) so that a writer whose item is gone can tell its own record from
another append's of the same id.
"""

from __future__ import annotations

import secrets
import zlib
from typing import Any

from claros import jsonutil
from claros.store.base import NewRecord

__all__ = [
    "MAX_PENDING_BYTES",
    "decode_pending",
    "encode_pending",
    "new_pending_key",
    "pending_pk",
]

# A pending item's records, uncompressed: DynamoDB keeps 400 KB an item compressed; a
# committer inflates no more than this, whatever an item claims.
MAX_PENDING_BYTES = 4_000_000
# The item holds the records compressed together; above this the append stays direct.
MAX_PENDING_ITEM_BYTES = 350_000

Item = dict[str, Any]


def pending_pk(workspace: str) -> str:
    return f"{workspace}#doc#_pending"


def new_pending_key(now_ms: int) -> str:
    """Sorts by arrival; the random tail keeps two appends of one millisecond apart."""
    return f"{now_ms:013d}#{secrets.token_hex(8)}"


def encode_pending(records: list[tuple[str, str, bytes]]) -> bytes:
    """(kind, ref_id, the record's canonical JSON) each, as one compressed JSON list: the
    records go in as their canonical bytes, so a committer parses exactly what the writer
    would have written."""
    parts = [
        f'{{"kind":{jsonutil.dumps(kind)},"ref_id":{jsonutil.dumps(ref_id)},"record":{raw.decode()}}}'
        for kind, ref_id, raw in records
    ]
    return zlib.compress(f"[{','.join(parts)}]".encode())


def decode_pending(item: Item) -> tuple[list[NewRecord], int | None] | None:
    """The records and explicit ts of a pending item, or None when it is not one Claros
    wrote (it is then dropped from the queue, never carried)."""
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(item["recs"]["B"], MAX_PENDING_BYTES)
        if inflate.unconsumed_tail:
            return None
        body = jsonutil.loads(raw)
        ts = int(item["ts"]["N"]) if "ts" in item else None
        records = [NewRecord(str(r["kind"]), str(r["ref_id"]), r["record"]) for r in body]
    except (KeyError, TypeError, ValueError, zlib.error):
        return None
    if not records or not all(isinstance(r.record, dict) and r.kind and r.ref_id for r in records):
        return None
    return records, ts
