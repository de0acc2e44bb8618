"""THREATS.md §3: a compromised admin function acknowledges tampering with no record of it.

Tampering stops every signature for its workspace until an admin acknowledges it, and the
acknowledgement is a ledger entry (``tampering_ack``) written in one transaction with the
doc the signer reads (``{workspace}#tampering_ack``, which only the admin function's role
may write: test_role_acknowledges_its_own_tampering.py). But the signer read the doc
alone: the admin role put it around the route, with no entry, and signing resumed over
the rewritten chain while the ledger said nobody had acknowledged anything. A compromised
admin function may act as an admin can, and an admin's acknowledgement is in the ledger
for every auditor to see; this one was in no record.

Now an acknowledgement counts only with its entry (claros.tamper.doc_recorded: the entry
of ref ``{id}@{at}`` whose record is the doc), and the route replaces a doc that has none,
so a planted doc stands in no admin's way.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json

import pytest

from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    World,
    _ledger,
    _seed,
    rewrite_entry_3,
    tampering_ids,
    world,
)
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS
_ = world  # the fixture, used by name


def _signs(world: World) -> int:
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status in (200, 201, 503), body
    return status


def test_the_admin_role_cannot_acknowledge_tampering_unrecorded(world: World) -> None:
    _seed(world)
    role = world.as_role("AdminFunction")
    rewrite_entry_3(world, role)  # the stream sees it: signing stops
    world.functions.invoke("checkpoint", world.stream())
    assert _signs(world) == 503
    # The admin role reads the tampering ids and puts the acknowledgement docs itself.
    state = world.table("StateTable")
    ids = tampering_ids(world, role)
    for tamper_id in ids:
        ack = {"tampering": {"id": tamper_id}, "by": "admin@acme.test", "at": 1, "note": "ok"}
        role.put_item(
            TableName=state,
            Item={"pk": {"S": f"{WS}#tampering_ack"}, "sk": {"S": tamper_id},
                  "rev": {"N": "1"}, "body": {"S": json.dumps(ack)}},
        )  # fmt: skip
    assert not role.refused, role.refused
    assert "tampering_ack" not in [i["kind"]["S"] for i in _ledger(world)]
    # Safe behaviour: signing stays stopped, and verify still fails on the tampering ...
    assert _signs(world) == 503, "signing resumed on an acknowledgement that is in no record"
    report = world.verify_report()
    assert report["ok"] is False and all(t["acknowledged"] is None for t in report["tampering"])
    # ... until an admin acknowledges it through the route: the planted docs are replaced,
    # each acknowledgement is an entry (once), and signing resumes.
    for tamper_id in ids:
        ack_event = load_event("admin-acknowledge-tampering", world.keys.admin, tamper_id=tamper_id)
        status, body = world.functions.http("admin", ack_event)
        assert status == 201, body
        assert world.functions.http("admin", ack_event)[0] == 409
    kinds = [i["kind"]["S"] for i in _ledger(world)]
    assert kinds.count("tampering_ack") == len(ids), kinds
    report = world.verify_report()
    assert all(t["acknowledged"]["note"] for t in report["tampering"]), report["tampering"]
    assert _signs(world) in (200, 201)


@pytest.mark.parametrize("function", ["EvidenceFunction", "WebFunction", "CheckpointFunction"])
def test_the_readers_of_acknowledgements_may_read_their_entries(
    world: World, function: str
) -> None:
    """The roles that read acknowledgements (verify, the Evidence page, the signer) may
    read an entry by its seq, as claros.tamper.doc_recorded does."""
    from tests.iam import Request, allowed

    table = world.arns()["LedgerTable.Arn"]
    request = Request("dynamodb:GetItem", table, {"dynamodb:LeadingKeys": [WS]})
    assert allowed(world.statements(function), request), function
