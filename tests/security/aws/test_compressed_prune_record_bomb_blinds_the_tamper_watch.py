"""THREATS.md §3: a planted prune record that inflates without bound blinds the tamper watch.

Every role that appends may put a records item; a ``prune#...`` one is an ``INSERT``, which
the records stream's filter leaves out, so planting it is seen by no one. The tamper watch
reads the workspace's prune records to judge any ``REMOVE`` (claros.tamper._prunable), and
inflated each body whole with ``zlib.decompress``. A body is at most one item (400 KB), and
zlib inflates up to ~1,000 times: ~400 MB, which with the runtime is more than the
checkpoint function's 512 MB. The function is killed on every delivery of a batch holding
a ``REMOVE`` of that workspace, Lambda retries and bisects it and finally sends it to the
failure queue unjudged: the delete raises no ``LedgerTampered``, records no tampering and
stops no signing (the round-two fix, test_poisoned_items_blind_the_tamper_watch.py, turned
the exceptions such a record raised into tampering; running out of memory raises none).

Shown here with a smaller bomb (32 MiB of zeros, a 32 KiB body), measured: judging the
REMOVE must not allocate anything like what the body inflates to.

Closed: a prune record is a few hundred bytes; the watch inflates at most
``PRUNE_RECORD_MAX_BYTES`` of one, and one that would be larger is no prune's (passed over,
as any prune record that does not read).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import tracemalloc
import zlib

import pytest

from claros import tamper
from claros.tamper import DynamoTamperLog, PruneReads, tampering_in
from tests.security.aws.test_aws_roles_cannot_rewrite import World, _ledger, _seed
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS

BOMB = 32 * 1024 * 1024


def test_a_prune_record_bomb_does_not_take_the_watchs_memory(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    _seed(world)  # seq 1-3, a checkpoint at seq 2
    body = zlib.compress(b"0" * BOMB, 9)
    assert len(body) < 64 * 1024  # one item, far under DynamoDB's 400 KB
    planter = world.as_role("CheckFunction")  # any role that appends
    planter.put_item(
        TableName=world.table("RecordsTable"),
        Item={"workspace": {"S": WS}, "rid": {"S": "prune#bomb"}, "seq": {"N": "1"},
              "body": {"B": body}},
    )  # fmt: skip
    assert not planter.refused, planter.refused
    pruner = world.as_role("PruneFunction")
    pruner.batch_write_item(
        RequestItems={
            world.table("LedgerTable"): [
                {"DeleteRequest": {"Key": {"workspace": {"S": WS}, "seq": {"N": "3"}}}}
            ]
        }
    )
    assert [int(i["seq"]["N"]) for i in _ledger(world)] == [1, 2]
    [remove] = [r for r in world.stream()["Records"] if r["eventName"] == "REMOVE"]
    log_ = DynamoTamperLog(
        world.client, world.table("StateTable"), world.table("RecordsTable"),
        world.table("LedgerTable"),
    )  # fmt: skip
    monkeypatch.setattr(tamper, "PAGE_WAIT_S", 0.0)
    tracemalloc.start()
    try:
        found = tampering_in(remove, log_, reads=PruneReads(log_))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < BOMB // 4, (
        f"judging one REMOVE allocated {peak / 2**20:.0f} MiB for a {len(body)} byte body: "
        "a 400 KB one would take ~400 MiB, past the checkpoint function's memory"
    )
    assert found is not None and found.key == {"seq": 3}  # the delete is tampering
