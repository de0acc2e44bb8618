"""THREATS.md §3: the prune role deletes an old entry from inside the chain, unseen.

A ``REMOVE`` counts as a prune's when a ``prune#...`` record's ``through_seq`` reaches the
item and a checkpoint covering it was signed longer ago than the retention floor
(claros.tamper._prunable). A prune drops a *prefix* of the chain, but nothing asks that
the item removed is one: the prune function's role (internet-facing: POST
/api/evidence/prune), which may put records and delete, writes a prune record with a huge
``through_seq`` and deletes any single entry (or record) older than the floor, say one
check from seven months ago, leaving the entries before it. The stream raises no
``LedgerTampered`` and signing goes on; only a full verify shows the gap.

Closing it needs the watch to tell a prefix cut from a hole while a prune's pages of
deletes (records first, then their entries) are still landing: kept as a strict xfail.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import zlib

import pytest

from claros.canonical import canonical_bytes
from tests.api.seed import OCT_1, install_clock
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    World,
    _ledger,
    _seed,
    _tampered_metric,
)
from tests.stack import (
    STACK_WARNINGS,
    WS,
    run_check,
)

pytestmark = STACK_WARNINGS

DAY_MS = 86_400_000


@pytest.mark.xfail(
    strict=True,
    reason="the tamper watch excuses any REMOVE below a forged prune record's through_seq "
    "once a checkpoint older than the floor covers it, a hole as well as a prefix",
)
def test_the_prune_role_cannot_cut_a_hole_in_the_chain(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = install_clock(monkeypatch, OCT_1)
    _seed(world)  # seq 1-3, a checkpoint at seq 2 signed at OCT_1
    clock.at(OCT_1 + 200 * DAY_MS)  # seven months on: past the 183-day floor
    run_check(world.functions, world.keys.agent)
    world.functions.invoke("checkpoint", world.stream())  # seq 4 signed now
    pruner = world.as_role("PruneFunction")
    pruner.put_item(
        TableName=world.table("RecordsTable"),
        Item={"workspace": {"S": WS}, "rid": {"S": "prune#hole"}, "seq": {"N": "1"},
              "body": {"B": zlib.compress(canonical_bytes({"through_seq": 10**12}))}},
    )  # fmt: skip
    # Entry 2 goes; entry 1, before it, stays: a hole, no prune's prefix.
    pruner.batch_write_item(
        RequestItems={
            world.table("LedgerTable"): [
                {"DeleteRequest": {"Key": {"workspace": {"S": WS}, "seq": {"N": "2"}}}}
            ]
        }
    )
    assert not pruner.refused, pruner.refused
    assert [int(i["seq"]["N"]) for i in _ledger(world)] == [1, 3, 4]
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    assert _tampered_metric(capsys.readouterr().out) >= 1, "a hole in the chain went unseen"
