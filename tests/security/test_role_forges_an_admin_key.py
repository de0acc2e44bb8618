"""THREATS.md §3: a compromised request-serving role makes itself an admin key.

Keys are docs: ``{"_#doc#key", sha256(key)}`` in the state table, beside each person's
member doc (``{workspace}#doc#member``). Every role that appends may write ``*#doc#*``
items (template.yaml, ``WriteDocsOnly``: the check, outcome, admin, web and prune roles), the
check and outcome roles so that a key's last use is noted in its doc. So a role that serves
checks can put a key doc of its own: kind ``admin``, an admin's person and terms (read from
their member doc, which it may read too). The key it chose then stands on every route.

With it, the role that rewrote an entry acknowledges its own tampering through the admin
function (``POST /api/evidence/tampering/{id}/acknowledge``), and signing resumes over the
rewritten chain: what ``test_role_acknowledges_its_own_tampering`` closed for a records
item, reached through an identity instead. Closing it needs the identity docs (keys, key
ids, members, sessions) in partitions only the admin and web roles may write, with a key's
last use kept apart: kept as a strict xfail until then (docs/deploy.md, "Limits").
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import hashlib
import json
import secrets
import zlib

import pytest

from claros.canonical import canonical_bytes
from claros.ledger import Entry
from claros.store.dynamo import record_key
from tests.events import load_event
from tests.security.test_aws_roles_cannot_rewrite import (  # noqa: F401 - fixtures
    World,
    _entry,
    _item,
    _ledger,
    _seed,
    _tampered_metric,
    world,
)
from tests.stack import (  # noqa: F401 - fixtures, used through ``world``
    ADMIN,
    STACK_WARNINGS,
    WS,
    functions,
    keys,
    run_check,
    stack,
    stack_store,
    stream_batches,
)

pytestmark = STACK_WARNINGS


def _rewrite_entry_3(world: World, function: str) -> None:
    """The rewrite IAM cannot refuse (as in test_role_acknowledges_its_own_tampering)."""
    role = world.as_role(function)
    [second, third] = [_entry(i) for i in _ledger(world) if i["seq"]["N"] in ("2", "3")]
    forged_body = canonical_bytes({"forged": True, "result": "allow"})
    key = record_key(WS, third.kind, third.ref_id)
    old = world.client.get_item(TableName=world.table("RecordsTable"), Key=key)["Item"]
    role.put_item(
        TableName=world.table("RecordsTable"),
        Item=old | {"body": {"B": zlib.compress(forged_body)}},
    )
    forged = Entry.build(
        WS, third.seq, third.kind, third.ref_id, third.ts, {}, second.hash,
        payload=hashlib.sha256(forged_body).hexdigest(),
    )  # fmt: skip
    role.put_item(TableName=world.table("LedgerTable"), Item=_item(forged))


def _forge_admin_key(world: World, function: str) -> str:
    """What the role can do with its own permissions: read the admin's member doc, put a
    key doc of kind admin in that person's terms, under the hash of a key it chose."""
    role = world.as_role(function)
    state = world.table("StateTable")
    member = role.get_item(
        TableName=state,
        Key={"pk": {"S": f"{WS}#doc#member"}, "sk": {"S": ADMIN}},
        ConsistentRead=True,
    )["Item"]
    terms = json.loads(member["body"]["S"])
    key = "ck_" + secrets.token_urlsafe(32)
    doc = {
        "workspace": WS, "kind": "admin", "person": ADMIN, "made_by": ADMIN, "label": "",
        "created_at": 1, "term": terms["term"], "admin_term": terms["admin_term"],
    }  # fmt: skip
    role.put_item(
        TableName=state,
        Item={
            "pk": {"S": "_#doc#key"},
            "sk": {"S": hashlib.sha256(key.encode()).hexdigest()},
            "rev": {"N": "1"},
            "body": {"S": json.dumps(doc)},
        },
    )
    return key


@pytest.mark.xfail(
    strict=True,
    reason="identity docs (keys, members, sessions) are *#doc#* items every appending role "
    "may write: a request role mints itself an admin key (docs/deploy.md, Limits)",
)
@pytest.mark.parametrize("function", ["CheckFunction", "OutcomeFunction"])
def test_a_request_role_cannot_mint_an_admin_key(
    world: World, function: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)
    _rewrite_entry_3(world, function)
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

    forged = _forge_admin_key(world, function)
    # Safe behaviour: the key the role chose stands nowhere ...
    status, body = world.functions.http("check", load_event("check-me", forged))
    assert status == 401, ("a key no admin made stands", status, body)
    # ... so it acknowledges nothing, and signing stays stopped.
    for tamper_id in ids:
        ack = load_event("admin-acknowledge-tampering", forged, tamper_id=tamper_id)
        status, body = world.functions.http("admin", ack)
        assert status == 401, ("the role acknowledged its own tampering", status, body)
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503, ("signing resumed over the rewritten entry 3", status, body)
