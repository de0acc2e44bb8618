"""Attack: stop all signing for a workspace with a made-up stream event (THREATS.md §3).

Whoever can hand the checkpoint function an event could claim a MODIFY or REMOVE that never
happened; each such claim used to be recorded as tampering, counted as ``LedgerTampered``
and stop signing until an admin acknowledged it. Seen to work on the old code (a MODIFY of
a ledger seq that was never written, a MODIFY of a state-table doc, a REMOVE of an entry
that is still there: each recorded as tampering). What is tampering and what is not, on
moto DynamoDB, the tables read back (claros.tamper.tampering_in):

* tampering: a ledger item rewritten; a record rewritten (its old image is not what the
  table holds); a record or entry removed above the last prune;
* not: an event from the state table's stream (docs, keys, aggregates are updated in place
  by design), a MODIFY of an item that is not there, a REMOVE of a record that still is as
  its old image says, a record MODIFY whose old image is the record as it is. (The ledger's
  stream carries no old images: a ledger MODIFY or REMOVE of an entry that is there counts,
  since a made-up one cannot be told from a rewrite or a replacement.)"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from claros.api.checkpoint import on_stream
from claros.config import Settings
from claros.signing import FileSigner
from claros.store.dynamo import DynamoStore
from claros.tamper import DynamoTamperLog, tampering_in
from claros.wiring import Services
from tests.api.seed import install_clock, utc_ms

WS = "acme"


@pytest.fixture
def world(dynamo_store: DynamoStore, tmp_path: Path) -> Services:
    s = dynamo_store
    settings = Settings(
        data_dir=tmp_path / "data", store="dynamodb", ledger_table=s.ledger_table,
        records_table=s.records_table, state_table=s.state_table, checkpoint_every=1000,
        inline_checkpoints=False,
    )  # fmt: skip
    tamper = DynamoTamperLog(s.client, s.state_table, s.records_table, s.ledger_table)
    services = Services(settings, s, FileSigner(tmp_path / "data"), tamper=tamper)
    for i in range(3):
        s.append(WS, "check", f"c{i}", {"result": "allow", "n": i})
    return services


def arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2026-12-01T00:00:00"


def stream_image(item: dict[str, Any]) -> dict[str, Any]:
    """An item as a stream record carries it (binary values base64)."""
    return {k: {"B": base64.b64encode(v["B"]).decode()} if "B" in v else v for k, v in item.items()}


def event(name: str, table: str, keys: dict[str, Any], **images: Any) -> dict[str, Any]:
    return {"Records": [{"eventID": f"{name}-{table}-{sorted(keys)}-{len(images)}",
                         "eventName": name, "eventSourceARN": arn(table),
                         "dynamodb": {"Keys": keys, **images}}]}  # fmt: skip


def ledger_item(services: Services, seq: int) -> dict[str, Any]:
    s = services.store
    assert isinstance(s, DynamoStore)
    got = s.client.get_item(TableName=s.ledger_table, Key={"workspace": {"S": WS},
                            "seq": {"N": str(seq)}})  # fmt: skip
    return dict(got["Item"])


def record_item(services: Services, ref_id: str) -> dict[str, Any]:
    s = services.store
    assert isinstance(s, DynamoStore)
    page = s.client.scan(TableName=s.records_table)["Items"]
    [item] = [i for i in page if i["rid"]["S"] == f"check#{ref_id}"]
    return dict(item)


def tampering(services: Services) -> list[Any]:
    assert services.tamper is not None
    return services.tamper.list(WS)


def test_made_up_modify_of_a_seq_never_written_is_no_tampering(world: Services) -> None:
    s = world.store
    assert isinstance(s, DynamoStore)
    keys = {"workspace": {"S": WS}, "seq": {"N": "100"}}
    on_stream(world, event("MODIFY", s.ledger_table, keys, NewImage=keys))
    assert tampering(world) == []


def test_made_up_modify_of_a_state_table_doc_is_no_tampering(world: Services) -> None:
    s = world.store
    assert isinstance(s, DynamoStore)
    doc = {"pk": {"S": f"{WS}#doc#member"}, "sk": {"S": "dana@acme.test"}}
    on_stream(world, event("MODIFY", s.state_table, doc, NewImage=doc))
    # Even with a ledger item's key shape, an event from the state table's stream.
    keys = {"workspace": {"S": WS}, "seq": {"N": "2"}}
    on_stream(world, event("MODIFY", s.state_table, keys, NewImage=ledger_item(world, 2)))
    assert tampering(world) == []


def test_made_up_remove_of_a_record_still_there_is_no_tampering(world: Services) -> None:
    s = world.store
    assert isinstance(s, DynamoStore)
    item = record_item(world, "c1")
    keys = {"workspace": item["workspace"], "rid": item["rid"]}
    on_stream(world, event("REMOVE", s.records_table, keys, OldImage=stream_image(item)))
    on_stream(world, event("MODIFY", s.records_table, keys, OldImage=stream_image(item)))
    assert tampering(world) == []


def test_rewritten_ledger_item_is_tampering(world: Services) -> None:
    s = world.store
    assert isinstance(s, DynamoStore)
    forged = {**ledger_item(world, 2), "kind": {"S": "approval"}}
    s.client.put_item(TableName=s.ledger_table, Item=forged)
    keys = {"workspace": {"S": WS}, "seq": {"N": "2"}}
    on_stream(world, event("MODIFY", s.ledger_table, keys, NewImage=forged))
    [found] = tampering(world)
    assert (found.table, found.event, found.key) == ("ledger", "MODIFY", {"seq": 2})


def test_rewritten_or_removed_record_is_tampering(world: Services) -> None:
    s = world.store
    assert isinstance(s, DynamoStore)
    item = record_item(world, "c1")
    keys = {"workspace": item["workspace"], "rid": item["rid"]}
    s.client.put_item(TableName=s.records_table, Item={**item, "body": {"B": b"forged"}})
    on_stream(world, event("MODIFY", s.records_table, keys, OldImage=stream_image(item)))
    other = record_item(world, "c2")
    s.client.delete_item(TableName=s.records_table, Key={"workspace": other["workspace"],
                         "rid": other["rid"]})  # fmt: skip
    gone = {"workspace": other["workspace"], "rid": other["rid"]}
    on_stream(world, event("REMOVE", s.records_table, gone, OldImage=stream_image(other)))
    assert sorted(t.event for t in tampering(world)) == ["MODIFY", "REMOVE"]
    assert {t.table for t in tampering(world)} == {"records"}


def test_a_remove_of_a_ledger_entry_still_there_is_tampering(world: Services) -> None:
    """The ledger's stream has no old image: the entry there may be a replacement put at
    once after the delete (tests/security/aws/test_prune_role_replaces_an_entry_unseen.py),
    so a REMOVE counts, made up or not, as a ledger MODIFY of an entry that is there does."""
    s = world.store
    assert isinstance(s, DynamoStore)
    on_stream(world, event("REMOVE", s.ledger_table, {"workspace": {"S": WS}, "seq": {"N": "2"}}))
    [found] = tampering(world)
    assert (found.table, found.event, found.key) == ("ledger", "REMOVE", {"seq": 2})


def test_removed_ledger_entry_is_tampering(world: Services) -> None:
    s = world.store
    assert isinstance(s, DynamoStore)
    keys = {"workspace": {"S": WS}, "seq": {"N": "3"}}
    s.client.delete_item(TableName=s.ledger_table, Key=keys)
    on_stream(world, event("REMOVE", s.ledger_table, keys))
    [found] = tampering(world)
    assert (found.table, found.event, found.key) == ("ledger", "REMOVE", {"seq": 3})


@pytest.mark.parametrize(
    ("days_since_signed", "checkpoint_seq", "tampered"),
    [(200, 2, False), (183, 3, False), (181, 2, True), (400, None, True)],
    ids=["signed-200-days-ago", "signed-183-days-ago", "signed-181-days-ago", "never-signed"],
)
def test_a_remove_below_a_prune_is_excused_only_when_old_enough_to_be_pruned(
    world: Services,
    monkeypatch: pytest.MonkeyPatch,
    days_since_signed: int,
    checkpoint_seq: int | None,
    tampered: bool,
) -> None:
    """A prune record alone excuses nothing (every appending role may put one): a REMOVE
    at or below its through_seq counts as a prune's only when a checkpoint covering the
    entry was signed longer ago than the retention floor (183 days, a day's slack)."""
    s = world.store
    assert isinstance(s, DynamoStore)
    signed_at = utc_ms(2026, 1, 10)
    clock = install_clock(monkeypatch, signed_at)
    s.append(WS, "prune", "prn1", {"through_seq": 2})
    if checkpoint_seq is not None:
        s.client.put_item(TableName=s.state_table, Item={
            "pk": {"S": f"{WS}#checkpoint"}, "sk": {"S": f"{checkpoint_seq:020d}"},
            "ts": {"N": str(signed_at)},
        })  # fmt: skip
    clock.at(signed_at + days_since_signed * 86_400_000)
    assert world.tamper is not None
    for seq in (1, 2):  # a prefix, as a prune removes
        s.client.delete_item(
            TableName=s.ledger_table, Key={"workspace": {"S": WS}, "seq": {"N": str(seq)}}
        )
    record = event("REMOVE", s.ledger_table, {"workspace": {"S": WS}, "seq": {"N": "2"}})
    found = tampering_in(record["Records"][0], world.tamper)
    assert (found is not None) is tampered, found


def test_a_prunes_removes_in_one_batch_read_the_log_once_per_checkpoint(
    world: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prune removes thousands of items, each a REMOVE of the same stream batch: the
    prune records and the covering checkpoint are read once per batch and per checkpoint,
    not per event, and each event is still judged on its own seq."""
    s = world.store
    assert isinstance(s, DynamoStore)
    signed_at = utc_ms(2026, 1, 10)
    clock = install_clock(monkeypatch, signed_at)
    for i in range(3, 12):
        s.append(WS, "check", f"c{i}", {"result": "allow", "n": i})
    s.append(WS, "prune", "prn1", {"through_seq": 10})
    old, young = signed_at, signed_at + 300 * 86_400_000
    for seq, ts in ((4, old), (8, old), (10, young)):
        s.client.put_item(
            TableName=s.state_table,
            Item={
                "pk": {"S": f"{WS}#checkpoint"},
                "sk": {"S": f"{seq:020d}"},
                "ts": {"N": str(ts)},
            },
        )
    clock.at(young + 86_400_000)  # 4 and 8 were signed 301 days ago, 10 a day ago
    for seq in range(1, 12):
        s.client.delete_item(
            TableName=s.ledger_table, Key={"workspace": {"S": WS}, "seq": {"N": str(seq)}}
        )
    batch = {"Records": [
        {**event("REMOVE", s.ledger_table, {"workspace": {"S": WS}, "seq": {"N": str(seq)}})[
            "Records"][0], "eventID": f"remove-{seq}"}
        for seq in range(1, 12)
    ]}  # fmt: skip
    queries: list[str] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        queries.append(params["TableName"])

    s.client.meta.events.register("provide-client-params.dynamodb.Query", count)
    on_stream(world, batch)
    read = list(queries)
    # 1-8: under the prune and a checkpoint signed before the floor; 9-10: under the prune
    # but covered only by the young checkpoint at 10; 11: above the prune.
    assert sorted(t.key["seq"] for t in tampering(world)) == [9, 10, 11]
    # The prune records once; the checkpoints at 4, 8 and 10, once each.
    assert read.count(s.records_table) == 1, read
    assert read.count(s.state_table) == 3, read
    # The ledger's first entry (none left: a prefix was cut), once.
    assert read.count(s.ledger_table) == 1, read
