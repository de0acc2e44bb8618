"""THREATS.md §3: a forged ``prune`` record makes deletes outside a prune go unseen.

The checkpoint function excuses every ``REMOVE`` at or below ``pruned_through`` (the highest
``through_seq`` of any ``prune#...`` item in the records table), without asking whether a
``prune`` *ledger entry*, signed, says so. But the records table takes a PutItem from every
role that appends (check, outcome, admin, prune), and a new item is an INSERT the tamper
watch never looks at. So a compromised role writes ``prune#x`` with a huge ``through_seq``,
and from then on the prune function's role (internet-facing: POST /api/evidence/prune; it
may BatchWriteItem deletes) cuts the unsigned tail of the chain, or any record, and no
``LedgerTampered`` is raised: the next check takes the freed seq and the next checkpoint
signs the shortened history.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import zlib

import pytest

from claros.canonical import canonical_bytes
from claros.store.dynamo import record_key
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


@pytest.mark.parametrize("forger", ["CheckFunction", "PruneFunction"])
def test_a_forged_prune_record_does_not_excuse_a_delete(
    world: World, forger: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)  # 3 checks, a checkpoint at seq 2; entry 3 is the unsigned tail
    ledger, records = world.table("LedgerTable"), world.table("RecordsTable")
    # 1. A records item no prune entry stands behind (an INSERT: never watched).
    forger_role = world.as_role(forger)
    forger_role.put_item(
        TableName=records,
        Item={"workspace": {"S": WS}, "rid": {"S": "prune#forged"}, "seq": {"N": "1"},
              "body": {"B": zlib.compress(canonical_bytes({"through_seq": 10**12}))}},
    )  # fmt: skip
    assert not forger_role.refused, forger_role.refused
    assert "prune" not in [i["kind"]["S"] for i in _ledger(world)]  # no real prune at all
    assert world.stream() == {"Records": []}  # the INSERT is filtered out of the stream

    # 2. The prune role (which IAM lets delete) cuts entry 3 and its record: no prune ran.
    [third] = [_entry(i) for i in _ledger(world) if i["seq"]["N"] == "3"]
    pruner = world.as_role("PruneFunction")
    pruner.batch_write_item(
        RequestItems={
            ledger: [{"DeleteRequest": {"Key": {"workspace": {"S": WS}, "seq": {"N": "3"}}}}],
            records: [{"DeleteRequest": {"Key": record_key(WS, third.kind, third.ref_id)}}],
        }
    )
    assert not pruner.refused, pruner.refused
    assert [int(i["seq"]["N"]) for i in _ledger(world)] == [1, 2]

    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    tampered = _tampered_metric(capsys.readouterr().out)
    # The history goes on over the cut: a new check takes seq 3, seq 4 is signed.
    run_check(world.functions, world.keys.agent)
    run_check(world.functions, world.keys.agent)
    world.functions.invoke("checkpoint", world.stream())
    report = world.verify_report()
    signed = [cp["seq"] for cp in world.checkpoints()]
    # Safe behaviour: the delete is tampering (the stream saw a REMOVE no prune accounts
    # for), verify says so, and nothing is signed over the cut.
    assert tampered >= 1, ("REMOVE of ledger seq 3 went unseen", report, signed)
    assert report["ok"] is False and report["tampering"], report
    assert signed == [2], signed
