"""THREATS.md §3: a role appends an entry whose record inflates to ~400 MB.

A role that appends may put entries and records as it likes (IAM cannot hold a put to the
store's shape). A check role appends, at the head, an entry that links to the one before
it and whose payload hash is that of a ~400 MB record (a JSON string of zeros), stored as
its 400 KB zlib body: a chain that links. Every reader inflated a record whole: the
checkpoint function, verifying the tail before it signs, held the whole record in memory,
more than its 512 MB, and was killed. The schedule signs every workspace in one
invocation: killed on this one, it signed no other workspace's tail, every minute; the
stream batches that reached the entry failed until the failure queue took them, and a
LedgerTampered counted in such a batch was lost with the process (the tampering record
stays, so it is never counted again).

Shown with a smaller record (64 MiB inflated, 64 KiB stored), measured: verifying the
tail must not allocate what the record inflates to.

Closed: a record is read whole only up to ``RECORD_MAX_BYTES`` (8 MiB; a check's record
comes from a request of at most 1 MB); a larger one reads as no record, so verify reports
the entry's record as missing and the workspace is not signed, while the others are.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import hashlib
import tracemalloc
import zlib

from claros.checkpoints import unsigned_tails
from claros.evidence.verify import verify_workspace
from claros.ledger import Entry
from claros.store.dynamo import DynamoStore, record_key
from tests.security.aws.test_aws_roles_cannot_rewrite import World, _entry, _item, _ledger, _seed
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS

BOMB = 64 * 1024 * 1024


def test_a_record_bomb_does_not_take_the_verifiers_memory(world: World) -> None:
    _seed(world)  # seq 1-3, a checkpoint at seq 2
    head = _entry(_ledger(world)[-1])
    raw = b'{"x":"' + b"0" * BOMB + b'"}'
    body = zlib.compress(raw, 9)
    assert len(body) < 128 * 1024  # one item, far under DynamoDB's 400 KB
    entry = Entry.build(
        WS, head.seq + 1, "check", "chk_bomb", head.ts + 1, {}, head.hash,
        payload=hashlib.sha256(raw).hexdigest(),
    )  # fmt: skip
    del raw
    role = world.as_role("CheckFunction")
    role.put_item(
        TableName=world.table("RecordsTable"),
        Item={**record_key(WS, "check", "chk_bomb"), "seq": {"N": str(entry.seq)},
              "body": {"B": body}},
    )  # fmt: skip
    role.put_item(TableName=world.table("LedgerTable"), Item=_item(entry))
    assert not role.refused, role.refused
    store = world.stack.store(world.client)
    assert isinstance(store, DynamoStore)
    [tail] = [t for t in unsigned_tails(store) if t.head.workspace == WS]
    assert tail.head == entry
    tracemalloc.start()
    try:
        report = verify_workspace(store, WS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < BOMB // 2, (
        f"verifying the tail allocated {peak / 2**20:.0f} MiB for a {len(body)} byte record: "
        "a 400 KB one inflates to ~400 MiB, past the checkpoint function's memory"
    )
    assert not report.ok  # the entry's record does not read: the chain does not verify
