"""THREATS.md §3: a compromised request-serving role acknowledges its own tampering.

Tampering stops signing for the workspace "until an admin acknowledges it", and the
acknowledgement is meant to be a ledger entry of its own (claros.api.tampering). But
``claros.tamper.acknowledgement`` only looks for a *records* item ``tampering_ack#{id}``,
and every request-serving role may PutItem into the records table (a new item is an INSERT,
which the records stream filter does not even deliver) and Query the state table, where the
tampering ids are kept. So the role that rewrote an entry reads the id, writes the "ack"
record itself (no admin, no ledger entry), and signing resumes over the rewritten chain.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import zlib

import pytest
from botocore.exceptions import ClientError

from claros.canonical import canonical_bytes
from claros.store.dynamo import record_key
from claros.tamper import ACK_KIND
from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    REQUEST_SERVING,
    World,
    _ledger,
    _seed,
    _tampered_metric,
    rewrite_entry_3,
    tampering_ids,
)
from tests.stack import (
    STACK_WARNINGS,
    WS,
    run_check,
)

pytestmark = STACK_WARNINGS


@pytest.mark.parametrize("function", ["CheckFunction", "OutcomeFunction", "AdminFunction"])
def test_a_request_role_cannot_acknowledge_its_own_tampering(
    world: World, function: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert function in REQUEST_SERVING
    _seed(world)
    role = world.as_role(function)
    # 1. The rewrite IAM cannot refuse (rewrite_entry_3).
    rewrite_entry_3(world, role)
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    assert _tampered_metric(capsys.readouterr().out) >= 1  # seen, signing stopped
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503 and "tamper" in body["message"], body

    # 2. The same role reads the tampering ids (ReadState: Query on any partition) ...
    ids = tampering_ids(world, role)
    # ... and writes the "acknowledgement" records itself (PutItem on the records table).
    for tamper_id in ids:
        ack = {"by": "dana@example.com", "at": 1, "note": "looked into it",
               "tampering": {"id": tamper_id}}  # fmt: skip
        role.put_item(
            TableName=world.table("RecordsTable"),
            Item=record_key(WS, ACK_KIND, tamper_id)
            | {"seq": {"N": "999"}, "body": {"B": zlib.compress(canonical_bytes(ack))}},
        )
    assert not role.refused, role.refused
    # No admin acknowledged anything: no tampering_ack entry is in the ledger.
    assert "tampering_ack" not in [i["kind"]["S"] for i in _ledger(world)]

    # Safe behaviour: signing stays stopped (route, stream, heartbeat), and verify keeps
    # failing on the tampering.
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503, (
        "signing resumed without an admin's acknowledgement: a checkpoint now vouches for the "
        "rewritten entry 3", status, body,
    )  # fmt: skip
    run_check(world.functions, world.keys.agent)  # seq 4, a multiple of 2
    assert world.functions.invoke("checkpoint", world.stream()) == {"signed": []}
    assert [cp["seq"] for cp in world.checkpoints()] == [2]
    report = world.verify_report()
    assert report["ok"] is False, report
    assert all(t["acknowledged"] is None for t in report["tampering"]), report["tampering"]
    # The forged records stand in no admin's way: each real acknowledgement lands (once).
    for tamper_id in ids:
        ack = load_event("admin-acknowledge-tampering", world.keys.admin, tamper_id=tamper_id)
        status, body = world.functions.http("admin", ack)
        assert status == 201, body
        assert world.functions.http("admin", ack)[0] == 409
    report = world.verify_report()
    assert all(t["acknowledged"]["note"] for t in report["tampering"]), report["tampering"]


@pytest.mark.parametrize(
    ("function", "may"),
    [("CheckFunction", False), ("OutcomeFunction", False), ("EvidenceFunction", False),
     ("WebFunction", False), ("AdminFunction", True)],
)  # fmt: skip
def test_only_the_admin_function_writes_acknowledgements(
    world: World, function: str, may: bool
) -> None:
    """Where the signer reads acknowledgements (claros.tamper.acknowledgement): IAM lets the
    admin function's role write there, no other role that serves requests (a compromised
    admin function can act as an admin can: THREATS.md, 3)."""
    role = world.as_role(function)
    item = {
        "pk": {"S": f"{WS}#tampering_ack"},
        "sk": {"S": "tmp_0123"},
        "rev": {"N": "1"},
        "body": {"S": '{"by": "dana@example.com"}'},
    }
    if may:
        role.put_item(TableName=world.table("StateTable"), Item=item)
        return
    with pytest.raises(ClientError, match="AccessDenied"):
        role.put_item(TableName=world.table("StateTable"), Item=item)
