"""THREATS.md §3: the prune role deletes an old entry from inside the chain, unseen.

A ``REMOVE`` counts as a prune's when a ``prune#...`` record's ``through_seq`` reaches the
item and a checkpoint covering it was signed longer ago than the retention floor
(claros.tamper._prunable). A prune drops a *prefix* of the chain, but nothing asks that
the item removed is one: the prune function's role (internet-facing: POST
/api/evidence/prune), which may put records and delete, writes a prune record with a huge
``through_seq`` and deletes any single entry (or record) older than the floor, say one
check from seven months ago, leaving the entries before it. The stream raises no
``LedgerTampered`` and signing goes on; only a full verify shows the gap.

Closed: a prune drops a prefix, so the watch also wants no entry left at or below what was
removed (claros.tamper.PruneReads.entry_at_or_below). A prune's page of deletes (records
first, then their entries, in batches of 25) may still be landing when the stream delivers
its first events: the watch waits for it, bounded (``PAGE_WAIT_S`` per stream batch).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import zlib

import pytest

from claros import tamper
from claros.canonical import canonical_bytes
from claros.tamper import DynamoTamperLog, PruneReads, tampering_in
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
    Json,
    run_check,
)

pytestmark = STACK_WARNINGS

DAY_MS = 86_400_000


def _cut_a_hole(world: World, monkeypatch: pytest.MonkeyPatch) -> Json:
    """Entry 2 of 1-4 removed under a prune record of the prune role's own, everything older
    than the floor; the stream batch that carries the REMOVE."""
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
    return world.stream()


def test_the_prune_role_cannot_cut_a_hole_in_the_chain(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = _cut_a_hole(world, monkeypatch)
    monkeypatch.setattr(tamper, "PAGE_WAIT_S", 0.0)  # entry 1 stays: waiting changes nothing
    capsys.readouterr()
    world.functions.invoke("checkpoint", batch)
    assert _tampered_metric(capsys.readouterr().out) >= 1, "a hole in the chain went unseen"
    found = world.verify_report()["tampering"]
    assert [(t["table"], t["event"], t["key"]) for t in found] == [
        ("ledger", "REMOVE", {"seq": 2})
    ], found


def _tamper_log(world: World) -> DynamoTamperLog:
    return DynamoTamperLog(
        world.client, world.table("StateTable"), world.table("RecordsTable"),
        world.table("LedgerTable"),
    )  # fmt: skip


def _removes(batch: Json) -> list[Json]:
    return [r for r in batch["Records"] if r["eventName"] == "REMOVE"]


def test_a_prune_page_still_landing_is_no_hole(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same REMOVE judged while the rest of its page is still being deleted: the watch
    waits, the page lands (entry 1 goes), and the cut is a prefix after all."""
    batch = _cut_a_hole(world, monkeypatch)
    log_ = _tamper_log(world)
    waits: list[float] = []

    def page_lands(seconds: float) -> None:
        waits.append(seconds)
        world.client.delete_item(
            TableName=world.table("LedgerTable"),
            Key={"workspace": {"S": WS}, "seq": {"N": "1"}},
        )

    (remove,) = _removes(batch)
    assert tampering_in(remove, log_, reads=PruneReads(log_, sleep=page_lands)) is None
    assert waits == [0.25]


def test_a_page_that_never_lands_is_a_hole_after_the_wait(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = _cut_a_hole(world, monkeypatch)
    log_ = _tamper_log(world)
    waits: list[float] = []
    reads = PruneReads(log_, sleep=waits.append)
    (remove,) = _removes(batch)
    found = tampering_in(remove, log_, reads=reads)
    assert found is not None and found.key == {"seq": 2}
    # The wait is per batch: the next event of it is judged at once.
    assert sum(waits) == tamper.PAGE_WAIT_S
    assert tampering_in(remove, log_, reads=reads) is not None
    assert sum(waits) == tamper.PAGE_WAIT_S
