"""THREATS.md §3: a compromised request-serving role makes itself an admin key.

Keys are docs: ``{"_#doc#key", sha256(key)}`` in the state table, beside each person's
member doc (``{workspace}#doc#member``). Every role that appends may write ``*#doc#*``
items (template.yaml, ``WriteDocsOnly``: the check, outcome, admin, web and prune roles), the
check and outcome roles so that a key's last use is noted in its doc. So a role that serves
checks can put a key doc of its own: kind ``admin``, an admin's person and terms (read from
their member doc, which it may read too). The key it chose then stands on every route.

With it, the role that rewrote an entry acknowledged its own tampering through the admin
function (``POST /api/evidence/tampering/{id}/acknowledge``, 201), and signing resumed over
the rewritten chain: what ``test_role_acknowledges_its_own_tampering`` closed for a records
item, reached through an identity instead. Now the template denies the check, outcome and
prune roles every write of the identity docs (``IdentityIsNotTheirs``), and a key's last
use is noted in a doc of its own (``_#doc#key_use``). The admin and web functions still
write them: a compromised one can act as an admin can (docs/deploy.md).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.events import load_event
from tests.iam import Request, allowed
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    World,
    _seed,
    _tampered_metric,
    rewrite_entry_3,
)
from tests.stack import (
    ADMIN,
    STACK_WARNINGS,
    WS,
)

pytestmark = STACK_WARNINGS


def _key_doc(world: World, function: str) -> tuple[str, dict[str, Any]]:
    """What the role can read with its own permissions: the admin's member doc, whose terms
    a key doc of kind admin under the hash of a key it chose would need."""
    member = world.as_role(function).get_item(
        TableName=world.table("StateTable"),
        Key={"pk": {"S": f"{WS}#doc#member"}, "sk": {"S": ADMIN}},
        ConsistentRead=True,
    )["Item"]
    terms = json.loads(member["body"]["S"])
    key = "ck_" + secrets.token_urlsafe(32)
    doc = {
        "workspace": WS, "kind": "admin", "person": ADMIN, "made_by": ADMIN, "label": "",
        "created_at": 1, "term": terms["term"], "admin_term": terms["admin_term"],
    }  # fmt: skip
    item = {
        "pk": {"S": "_#doc#key"},
        "sk": {"S": hashlib.sha256(key.encode()).hexdigest()},
        "rev": {"N": "1"},
        "body": {"S": json.dumps(doc)},
    }
    return key, item


@pytest.mark.parametrize("function", ["CheckFunction", "OutcomeFunction", "PruneFunction"])
def test_a_request_role_cannot_mint_an_admin_key(
    world: World, function: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)
    rewrite_entry_3(world, world.as_role("CheckFunction"))
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    assert _tampered_metric(capsys.readouterr().out) >= 1  # seen, signing stopped
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503 and "tamper" in body["message"], body
    role = world.as_role(function)
    ids = [
        item["sk"]["S"]
        for item in role.query(
            TableName=world.table("StateTable"),
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"{WS}#tampering"}},
            ConsistentRead=True,
        )["Items"]
    ]
    assert ids

    forged, item = _key_doc(world, function)
    # Safe behaviour: the role may not put the key doc ...
    with pytest.raises(ClientError, match="AccessDenied"):
        role.put_item(TableName=world.table("StateTable"), Item=item)
    # ... so the key it chose stands nowhere, acknowledges nothing, and signing stays stopped.
    status, body = world.functions.http("check", load_event("check-me", forged))
    assert status == 401, ("a key no admin made stands", status, body)
    for tamper_id in ids:
        ack = load_event("admin-acknowledge-tampering", forged, tamper_id=tamper_id)
        status, body = world.functions.http("admin", ack)
        assert status == 401, ("the role acknowledged its own tampering", status, body)
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503, ("signing resumed over the rewritten entry 3", status, body)


IDENTITY = [
    ("_#doc#key", "0" * 64),
    (f"{WS}#doc#member", ADMIN),
    (f"{WS}#doc#key_id", "0123456789abcdef"),
    (f"{WS}#doc#key_list", "0000000000001-0123456789abcdef"),
    (f"{WS}#doc#key_index", "v1"),
    ("_#doc#session", "0" * 64),
    ("_#doc#session_expiry", "9999999999999:" + "0" * 64),
    ("_#doc#device", "ABCDEFGH"),
    ("_#doc#device_secret", "0" * 64),
    ("_#doc#workspace", WS),
]
KEYS_AND_MEMBERS = {pk for pk, _ in IDENTITY[:5]}
# Sessions and device sign-ins are the web function's; the list of workspaces is no
# function's (the operator's first key of a workspace adds it:
# test_admin_or_web_role_stops_a_workspaces_signing.py).
WEB_ONLY = {pk for pk, _ in IDENTITY[5:9]}


@pytest.mark.parametrize(
    ("function", "writes"),
    [("CheckFunction", set()), ("OutcomeFunction", set()), ("PruneFunction", set()),
     ("EvidenceFunction", set()), ("CheckpointFunction", set()),
     ("AdminFunction", KEYS_AND_MEMBERS), ("WebFunction", KEYS_AND_MEMBERS | WEB_ONLY)],
)  # fmt: skip
def test_only_the_admin_and_web_functions_write_identity(
    world: World, function: str, writes: set[str]
) -> None:
    """Every identity doc (put, update, delete), under the template's real policies; a key's
    last use stays writable by every role that takes keys and writes docs."""
    statements = world.statements(function)
    table = world.arns()["StateTable.Arn"]
    for pk, _ in IDENTITY:
        for action in ("PutItem", "UpdateItem", "DeleteItem"):
            request = Request(f"dynamodb:{action}", table, {"dynamodb:LeadingKeys": [pk]})
            assert allowed(statements, request) is (pk in writes), (function, action, pk)
    use = Request("dynamodb:PutItem", table, {"dynamodb:LeadingKeys": ["_#doc#key_use"]})
    writes_docs = function not in ("EvidenceFunction", "CheckpointFunction")
    assert allowed(statements, use) is writes_docs, function


def test_a_keys_last_use_is_noted_apart_and_shown(world: World) -> None:
    """The functions still note a key's last use (in its own doc) and the key list shows
    it; a last use noted in the key's own doc before stays shown."""
    status, _ = world.functions.http("check", load_event("check-me", world.keys.agent))
    assert status == 200
    digest = hashlib.sha256(world.keys.agent.encode()).hexdigest()
    use = world.client.get_item(
        TableName=world.table("StateTable"),
        Key={"pk": {"S": "_#doc#key_use"}, "sk": {"S": digest}},
        ConsistentRead=True,
    ).get("Item")
    assert use is not None and json.loads(use["body"]["S"])["at"] > 0
    key = world.client.get_item(
        TableName=world.table("StateTable"),
        Key={"pk": {"S": "_#doc#key"}, "sk": {"S": digest}},
        ConsistentRead=True,
    )["Item"]
    assert "last_used_at" not in json.loads(key["body"]["S"])  # the key's doc is untouched
    status, body = world.functions.http(
        "admin", load_event("admin-api-keys-list", world.keys.admin)
    )
    assert status == 200, body
    [agent] = [k for k in body["keys"] if k["key_id"] == digest[:16]]
    assert agent["last_used_at"] == json.loads(use["body"]["S"])["at"]
