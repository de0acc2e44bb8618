"""THREATS.md §3: a compromised request-serving role sets the retention below the floor.

``PUT /api/evidence/retention`` refuses fewer than 183 days, but the setting is a doc
(``{workspace}#doc#settings``, ``retention``), and every role that appends may write
``*#doc#*`` items (the check and outcome roles no longer may: they write only their own
doc collections). The prune function read ``days`` back as it found it: a check role that
wrote ``{"days": 1}`` made the next prune (an admin's, run as usual) delete every entry
and record older than a day, months inside the floor, from the tables themselves. The
stream then saw the deletes as tampering and verify refused the prune entry, but what was
deleted was gone (short of a point-in-time restore).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from claros.evidence import retention
from tests.api.seed import OCT_1, install_clock
from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    World,
    _ledger,
    _seed,
)
from tests.stack import (
    STACK_WARNINGS,
    WS,
)

pytestmark = STACK_WARNINGS

DAY_MS = 86_400_000


@pytest.mark.parametrize("function", ["CheckFunction", "OutcomeFunction", "PruneFunction"])
def test_a_retention_below_the_floor_prunes_nothing(
    world: World, function: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = install_clock(monkeypatch, OCT_1)
    _seed(world)  # seq 1-3, a checkpoint at seq 2
    role = world.as_role(function)
    setting = {
        "pk": {"S": f"{WS}#doc#retention"},
        "sk": {"S": "days"},
        "rev": {"N": "1"},
        "body": {"S": json.dumps({"days": 1, "set_by": "dana@acme.test", "set_at": 1})},
    }
    if function != "PruneFunction":
        # The check and outcome roles may not write the settings doc at all any more
        # (template.yaml, WriteItsOwnDocsOnly; test_request_role_loosens_a_rule_or_approves_an_ask).
        with pytest.raises(ClientError, match="AccessDenied"):
            role.put_item(TableName=world.table("StateTable"), Item=setting)
        return
    role.put_item(TableName=world.table("StateTable"), Item=setting)
    assert not role.refused, role.refused
    clock.at(OCT_1 + 10 * DAY_MS)  # ten days on: well inside the 183-day floor
    monkeypatch.setattr(retention, "COVER_WAIT_S", 0.0)  # the test signs the prune entry

    # An admin prunes, as they do (twice: the second run goes on once the checkpoint
    # function has signed the prune entry from the ledger's stream).
    prune = load_event("prune-prune", world.keys.admin)
    first = world.functions.http("prune", prune)
    batch = world.stream()
    if batch["Records"]:  # the prune entry, if one was written
        world.functions.invoke("checkpoint", batch)
    second = world.functions.http("prune", prune)
    seqs = [int(i["seq"]["N"]) for i in _ledger(world)]

    # Safe behaviour: a setting below the floor is refused with the reason, nothing is
    # deleted, no prune entry is written.
    assert seqs[0] == 1, ("entries ten days old were pruned", first, second, seqs)
    assert "prune" not in [i["kind"]["S"] for i in _ledger(world)], (first, second)
    for status, body in (first, second):
        assert status == 409 and "183" in body["message"], (status, body)
    status, body = world.functions.http(
        "prune", load_event("prune-get-retention", world.keys.admin)
    )
    assert status == 200 and "183" in body["message"], body
