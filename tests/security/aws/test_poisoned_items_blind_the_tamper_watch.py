"""THREATS.md §3: an item a request role planted makes the tamper watch fail, not see.

The checkpoint function judges every MODIFY and REMOVE on the ledger's and the records'
streams (claros.tamper.tampering_in). It read what it found as it expected to find it:

* ``pruned_through`` decompressed every ``prune#...`` records item, and a role that
  appends may put one whose body is not zlib (an INSERT: the watch never sees it). From
  then on every REMOVE in the workspace raised ``zlib.error`` before it was judged;
* a records item's ``seq`` was read with ``int()``, and a role may put an item whose
  ``seq`` is ``1.5``: overwriting it (a MODIFY, which is tampering) raised ``ValueError``.

A batch that raises is retried by Lambda, halved, and after its retries sent to the stream
failure queue: the tampering is never recorded, signing never stops, and the next
checkpoint signs over the cut. A record the watch cannot read must count as tampering (or
be passed over where passing it over can only find more), never make the watch fail.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import zlib
from typing import Any

import pytest

from claros.canonical import canonical_bytes
from claros.evidence import retention
from claros.store.dynamo import record_key
from claros.tamper import Tampering, tampering_in
from tests.api.seed import OCT_1, install_clock
from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    World,
    _entry,
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


def test_a_prune_record_that_is_not_zlib_does_not_hide_a_delete(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)  # 3 checks, a checkpoint at seq 2; entry 3 is the unsigned tail
    ledger, records = world.table("LedgerTable"), world.table("RecordsTable")
    planter = world.as_role("CheckFunction")
    planter.put_item(
        TableName=records,
        Item={"workspace": {"S": WS}, "rid": {"S": "prune#poison"}, "seq": {"N": "1"},
              "body": {"B": b"not zlib at all"}},
    )  # fmt: skip
    assert not planter.refused, planter.refused
    assert world.stream() == {"Records": []}  # an INSERT: filtered out of the stream

    # The prune role (which IAM lets delete) cuts entry 3 and its record: no prune ran.
    [third] = [_entry(i) for i in _ledger(world) if i["seq"]["N"] == "3"]
    pruner = world.as_role("PruneFunction")
    pruner.batch_write_item(
        RequestItems={
            ledger: [{"DeleteRequest": {"Key": {"workspace": {"S": WS}, "seq": {"N": "3"}}}}],
            records: [{"DeleteRequest": {"Key": record_key(WS, third.kind, third.ref_id)}}],
        }
    )
    assert not pruner.refused, pruner.refused

    capsys.readouterr()
    batch = world.stream()
    try:
        world.functions.invoke("checkpoint", batch)
    except Exception as exc:  # noqa: BLE001 - what Lambda would retry, then give up on
        pytest.fail(f"the tamper watch failed on the batch instead of judging it: {exc!r}")
    assert _tampered_metric(capsys.readouterr().out) >= 1, "the REMOVE went unseen"
    run_check(world.functions, world.keys.agent)  # takes the freed seq 3
    run_check(world.functions, world.keys.agent)
    world.functions.invoke("checkpoint", world.stream())
    report = world.verify_report()
    assert report["ok"] is False and report["tampering"], report
    assert [cp["seq"] for cp in world.checkpoints()] == [2]


def test_a_records_item_with_a_fractional_seq_is_judged_when_overwritten(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)
    records = world.table("RecordsTable")
    role = world.as_role("CheckFunction")
    item = {"workspace": {"S": WS}, "rid": {"S": "check#planted"}, "seq": {"N": "1.5"},
            "body": {"B": zlib.compress(canonical_bytes({"planted": 1}))}}  # fmt: skip
    role.put_item(TableName=records, Item=item)
    assert world.stream() == {"Records": []}  # an INSERT: filtered out of the stream
    role.put_item(
        TableName=records,
        Item=item | {"body": {"B": zlib.compress(canonical_bytes({"planted": 2}))}},
    )
    assert not role.refused, role.refused
    capsys.readouterr()
    batch = world.stream()
    assert [r["eventName"] for r in batch["Records"]] == ["MODIFY"]
    try:
        world.functions.invoke("checkpoint", batch)
    except Exception as exc:  # noqa: BLE001 - what Lambda would retry, then give up on
        pytest.fail(f"the tamper watch failed on the batch instead of judging it: {exc!r}")
    assert _tampered_metric(capsys.readouterr().out) >= 1, "the MODIFY went unseen"
    report = world.verify_report()
    assert report["ok"] is False and report["tampering"], report


class _Unreadable:
    """A tamper log whose prune records do not read (as a planted one did)."""

    def record(self, tampering: Tampering) -> bool:
        return True

    def list(self, workspace: str) -> list[Tampering]:
        return []

    def pruned_through(self, workspace: str) -> int:
        raise zlib.error("Error -3 while decompressing data: incorrect header check")

    def signed_by(self, workspace: str, seq: int, when: int) -> bool:
        return True


@pytest.mark.parametrize(
    ("keys", "table", "key"),
    [({"workspace": {"S": WS}, "seq": {"N": "3"}}, "ledger", {"seq": 3}),
     ({"workspace": {"S": f"{WS}#07"}, "rid": {"S": "check#c"}}, "records", {"rid": "check#c"})],
)  # fmt: skip
def test_whatever_the_watch_cannot_read_counts_as_tampering(
    keys: dict[str, Any], table: str, key: dict[str, Any]
) -> None:
    """The rule behind both: any other item that does not read as expected fails closed."""
    record = {"eventID": "e1", "eventName": "REMOVE",
              "dynamodb": {"Keys": keys, "OldImage": keys | {"seq": {"N": "3"}},
                           "ApproximateCreationDateTime": 1.5}}  # fmt: skip
    found = tampering_in(record, _Unreadable())
    assert found is not None
    assert (found.workspace, found.table, found.event, found.key, found.seen_at) == (
        WS, table, "REMOVE", key, 1500,
    )  # fmt: skip
    # A record that names no workspace is no change of these tables (nothing to read).
    assert (
        tampering_in({**record, "dynamodb": {"Keys": {"seq": {"N": "3"}}}}, _Unreadable()) is None
    )


def test_a_prune_record_that_is_not_zlib_does_not_stop_every_prune(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prune function's own read of the prune records (``_prune_recorded``) decompressed
    each one too: a planted one made every prune a 500, before it deleted anything."""
    clock = install_clock(monkeypatch, OCT_1)
    _seed(world)
    world.as_role("CheckFunction").put_item(
        TableName=world.table("RecordsTable"),
        Item={"workspace": {"S": WS}, "rid": {"S": "prune#poison"}, "seq": {"N": "1000000"},
              "body": {"B": b"not zlib at all"}},
    )  # fmt: skip
    status, body = world.functions.http(
        "prune", load_event("prune-put-retention", world.keys.admin)
    )
    assert status == 200 and body["days"] == 365, body
    clock.at(OCT_1 + 400 * 86_400_000)
    run_check(world.functions, world.keys.agent)  # a new head; 1-3 are over a year old
    monkeypatch.setattr(retention, "COVER_WAIT_S", 0.0)  # the test signs the prune entry
    prune = load_event("prune-prune", world.keys.admin)
    status, body = world.functions.http("prune", prune)
    assert status == 200 and body["pruned"] is False, body  # its entry is not signed yet
    world.functions.invoke("checkpoint", world.stream())
    status, body = world.functions.http("prune", prune)
    assert status == 200 and body["pruned"] is True, body
    assert [int(i["seq"]["N"]) for i in _ledger(world)][0] == 3
