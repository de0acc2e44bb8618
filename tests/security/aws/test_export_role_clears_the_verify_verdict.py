"""THREATS.md §3: the export function's role clears the verdict verify gives.

``GET /api/evidence/verify`` (and the Evidence page) answer from the verified-through state
(claros.evidence.verified): the chain verified up to a seq once, with the failures found,
and only what came after is verified again. The state is the checkpoint function's to keep
(``{workspace}#verified``, the signer role), but the export function, internet-facing
(``GET /api/evidence/export``, ``/report``), runs as the same role, and so could write it
though it never does (``CLAROS_ROLE_WRITES: ""``). A role that appends puts an entry that
links to nothing (an INSERT: the tamper watch judges changes, not appends) and verify says
so; the compromised export function then puts the state back with no failures, and verify
answers ok over the broken chain. The same write reached the tampering records.

Closed: template.yaml denies ``PutItem`` of ``#verified`` and ``#tampering`` items to every
caller but the checkpoint function's own code (``lambda:SourceFunctionArn``; the role's
credentials used outside Lambda carry none, and are denied as well).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from claros.ledger import Entry
from tests.events import load_event
from tests.iam import GatedDynamoDB
from tests.security.aws.test_aws_roles_cannot_rewrite import World, _entry, _item, _ledger, _seed
from tests.stack import STACK_WARNINGS, WS, Json

pytestmark = STACK_WARNINGS


def _state(world: World) -> Json:
    got = world.client.get_item(
        TableName=world.table("StateTable"),
        Key={"pk": {"S": f"{WS}#verified"}, "sk": {"S": "state"}},
        ConsistentRead=True,
    )
    return dict(got["Item"])


def test_the_export_role_cannot_clear_what_verify_found(world: World) -> None:
    _seed(world)
    world.functions.invoke("checkpoint", load_event("checkpoint-schedule"))  # the state, made
    head = _entry(_ledger(world)[-1])
    loose = Entry.build(
        WS, head.seq + 1, "check", "chk_loose", head.ts + 1, {}, "0" * 64, payload="1" * 64
    )
    appender = world.as_role("CheckFunction")
    appender.put_item(TableName=world.table("LedgerTable"), Item=_item(loose))
    assert not appender.refused
    world.functions.invoke("checkpoint", load_event("checkpoint-schedule"))  # state advanced
    assert world.verify_report()["ok"] is False
    item = _state(world)
    body = json.loads(item["body"]["S"])
    assert body["failure_count"] > 0
    cleared = {**body, "failures": [], "failure_count": 0}
    exporter = world.as_role("ExportFunction")
    with pytest.raises(ClientError, match="AccessDenied"):
        exporter.put_item(
            TableName=world.table("StateTable"),
            Item={**item, "body": {"S": json.dumps(cleared)}},
        )
    report = world.verify_report()
    assert report["ok"] is False, "verify answered ok over a broken chain"
    # Nor may it write a tampering record (a made-up one, or one rewritten).
    with pytest.raises(ClientError, match="AccessDenied"):
        exporter.put_item(
            TableName=world.table("StateTable"),
            Item={"pk": {"S": f"{WS}#tampering"}, "sk": {"S": "tmp_x"}, "body": {"S": "{}"}},
        )


def test_the_checkpoint_function_still_judges(world: World) -> None:
    """Its own code keeps both writes; the role's credentials outside Lambda do not."""
    signer = world.as_role("CheckpointFunction")
    for pk in (f"{WS}#verified", f"{WS}#tampering"):
        signer.put_item(
            TableName=world.table("StateTable"),
            Item={"pk": {"S": pk}, "sk": {"S": "probe"}, "body": {"S": "{}"}},
        )
    assert not signer.refused
    elsewhere = GatedDynamoDB(world.client, world.statements("CheckpointFunction"))
    with pytest.raises(ClientError, match="AccessDenied"):
        elsewhere.put_item(
            TableName=world.table("StateTable"),
            Item={"pk": {"S": f"{WS}#verified"}, "sk": {"S": "probe"}, "body": {"S": "{}"}},
        )
    # Checkpoints and public keys stay the role's, the export function's included.
    exporter = world.as_role("ExportFunction")
    exporter.put_item(
        TableName=world.table("StateTable"),
        Item={"pk": {"S": f"{WS}#pubkey"}, "sk": {"S": "probe"}, "body": {"S": "{}"}},
    )
    assert not exporter.refused
