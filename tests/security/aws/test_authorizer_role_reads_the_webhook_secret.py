"""THREATS.md §3: a compromised authorizer reads what it never needs.

The HTTP API's authorizer sees every request first (it parses each one's key and cookie),
and its role could ``GetItem`` any item of the state table. What it needs is a key's doc,
its person's member doc and a web session's doc. With the rest it read a workspace's ask
webhook, secret included (``{workspace}#doc#settings``, ``ask_webhook``): the shared secret
that signs every delivery, with which it could sign asks of its own to the receiver. Or
the open asks, rules and mappings. Its ``GetItem`` now names the partitions it reads
(``dynamodb:LeadingKeys``), and the authorizer still decides keys, revoked keys and
sessions under that role (its calls gated here by the role's own policies).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from claros.auth import Principal, create_key, hash_key
from claros.store.base import GLOBAL, DocWrite
from claros.web.sessions import SECURE_COOKIE, open_session
from tests.events import authorizer_event, load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World
from tests.security.aws.test_request_role_loosens_a_rule_or_approves_an_ask import (
    FUNCTION_OF,
    Gate,
    gate,  # noqa: F401
)
from tests.stack import ADMIN, STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS


def test_the_authorizer_role_cannot_read_the_webhook_secret(world: World) -> None:
    status, body = world.functions.http(
        "admin", load_event("admin-put-ask-webhook", world.keys.admin)
    )
    assert status in (200, 201), body
    role = world.as_role("AuthorizerFunction")
    key = {"pk": {"S": f"{WS}#doc#settings"}, "sk": {"S": "ask_webhook"}}
    try:
        got = role.get_item(TableName=world.table("StateTable"), Key=key, ConsistentRead=True)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
        got = {}
    # Safe behaviour: the role may not read it.
    assert "Item" not in got, ("the authorizer read the webhook's secret", got["Item"])
    for pk, sk in ((f"{WS}#doc#rule", "refund-half"), (f"{WS}#doc#ask", "ask_x")):
        with pytest.raises(ClientError, match="AccessDenied"):
            role.get_item(
                TableName=world.table("StateTable"), Key={"pk": {"S": pk}, "sk": {"S": sk}}
            )


def test_the_authorizer_decides_within_its_role(world: World, gate: Gate) -> None:
    assert FUNCTION_OF["authorizer"] == "AuthorizerFunction"
    stack_store = world.functions.stack.store(world.client)

    def decide(**kw: object) -> dict[str, object]:
        answer: dict[str, object] = world.functions.invoke("authorizer", authorizer_event(**kw))
        return answer

    assert decide(authorization=f"Bearer {world.keys.agent}")["isAuthorized"] is True
    assert decide(authorization=f"Bearer {world.keys.admin}")["isAuthorized"] is True
    assert decide(authorization="Bearer ck_" + "x" * 43)["isAuthorized"] is False
    person_key = create_key(stack_store, WS, "person", person=ADMIN)
    session_id, _ = open_session(stack_store, person_key)
    cookie = decide(route="POST /app/keys", cookies=[f"{SECURE_COOKIE}={session_id}"])
    assert cookie["isAuthorized"] is True, cookie
    dead = decide(route="GET /api/asks", cookies=[f"{SECURE_COOKIE}=nope"])
    assert dead["isAuthorized"] is False
    # A key minted from another (a device sign-in's): its lineage is read by key id.
    parent = Principal(WS, "person", ADMIN, hash_key(person_key)[:16])
    minted = create_key(stack_store, WS, "agent", person=ADMIN, made_by=ADMIN, parent=parent)
    assert decide(authorization=f"Bearer {minted}")["isAuthorized"] is True
    revoke = stack_store.get_doc(GLOBAL, "key", hash_key(person_key))
    assert revoke is not None
    stack_store.write_docs(
        [DocWrite(GLOBAL, "key", revoke.key, {**revoke.value, "revoked_at": 1}, revoke.rev)]
    )
    assert decide(authorization=f"Bearer {minted}")["isAuthorized"] is False
    digest = hash_key(world.keys.agent)
    doc = stack_store.get_doc(GLOBAL, "key", digest)
    assert doc is not None
    stack_store.write_docs(
        [DocWrite(GLOBAL, "key", digest, {**doc.value, "revoked_at": 1}, doc.rev)]
    )
    assert decide(authorization=f"Bearer {world.keys.agent}")["isAuthorized"] is False
    assert gate.refused == [], (gate.refused, sorted(gate.writes))
