"""THREATS.md §3: the prune role deletes a ledger entry and puts another in its place, unseen.

The prune function's role (internet-facing: ``POST /api/evidence/prune``) may delete ledger
entries (``BatchWriteItem``; the ledger table's resource policy lets no other principal) and
append (``PutItem``). The ledger's stream carries new images only, so a ``REMOVE`` has no
old image, and the tamper watch let a ``REMOVE`` of an item "that is still there" pass as a
made-up event (claros.tamper._could_be). But the item there need not be the one removed:
the role deletes the newest check's entry and at once puts a forged one at the same seq,
chained on the entry before it and pointing to a record of its own (a new record is an
``INSERT``, which the records stream's filter leaves out). The watch judged the ``REMOVE``
against the forged entry, found "still there", and raised nothing; the next checkpoint
signed the forged chain, and verify passed it.

Closed: a ledger ``REMOVE`` carries no old image to compare with, so an entry found at its
seq cannot be told from a replacement: it counts, as a ledger ``MODIFY`` of an item that is
there always did (a made-up one raises a false alarm, never a signature).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import hashlib
import json
import zlib

import pytest

from claros.canonical import canonical_bytes
from claros.ledger import Entry
from claros.store.dynamo import record_key
from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    World,
    _entry,
    _item,
    _ledger,
    _seed,
    _tampered_metric,
)
from tests.stack import STACK_WARNINGS, WS, Json, run_check

pytestmark = STACK_WARNINGS


def _record(world: World, entry: Entry) -> Json:
    got = world.client.get_item(
        TableName=world.table("RecordsTable"),
        Key=record_key(WS, entry.kind, entry.ref_id),
        ConsistentRead=True,
    )
    return dict(json.loads(zlib.decompress(got["Item"]["body"]["B"])))


def _replace_the_newest_entry(world: World) -> tuple[Entry, Entry]:
    """Entry 4 (a check) deleted and a forged entry 4 put in its place by the prune role,
    over a forged record; the stream's events of it are left for the checkpoint function."""
    items = _ledger(world)
    before, newest = _entry(items[-2]), _entry(items[-1])
    record = _record(world, newest)
    forged_record = {**record, "forged": True, "tool": "refund_everything"}
    body = canonical_bytes(forged_record)
    forged_ref = newest.ref_id + "x"
    forged = Entry.build(
        WS, newest.seq, newest.kind, forged_ref, newest.ts, {}, before.hash,
        payload=hashlib.sha256(body).hexdigest(),
    )  # fmt: skip
    pruner = world.as_role("PruneFunction")
    pruner.put_item(
        TableName=world.table("RecordsTable"),
        Item={**record_key(WS, newest.kind, forged_ref), "seq": {"N": str(newest.seq)},
              "body": {"B": zlib.compress(body)}},
    )  # fmt: skip
    pruner.batch_write_item(
        RequestItems={
            world.table("LedgerTable"): [
                {"DeleteRequest": {"Key": {"workspace": {"S": WS}, "seq": {"N": str(newest.seq)}}}}
            ]
        }
    )
    pruner.put_item(TableName=world.table("LedgerTable"), Item=_item(forged))
    assert not pruner.refused, pruner.refused
    assert _entry(_ledger(world)[-1]) == forged
    return newest, forged


def test_the_prune_role_cannot_replace_an_entry_unseen(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)  # seq 1-3, a checkpoint at seq 2
    run_check(world.functions, world.keys.agent)  # seq 4, signed by the stream below
    world.functions.invoke("checkpoint", world.stream())
    assert [cp["seq"] for cp in world.checkpoints()] == [2, 4]
    run_check(world.functions, world.keys.agent)  # seq 5: the tail after the last checkpoint
    world.functions.invoke("checkpoint", world.stream())
    _original, forged = _replace_the_newest_entry(world)
    assert forged.seq == 5
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    assert _tampered_metric(capsys.readouterr().out) >= 1, (
        "an entry deleted and replaced by the prune role raised no LedgerTampered"
    )
    found = world.verify_report()["tampering"]
    assert [(t["table"], t["event"], t["key"]) for t in found] == [
        ("ledger", "REMOVE", {"seq": 5})
    ], found
    # Signing is stopped: the forged head is not signed on demand.
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503, (status, body)
    assert [cp["seq"] for cp in world.checkpoints()] == [2, 4]
