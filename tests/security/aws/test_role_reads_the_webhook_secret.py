"""THREATS.md §3: a compromised function that never delivers an ask reads the ask
webhook's URL and signing secret.

The secret signs every delivery (``X-Claros-Signature``); whoever holds it can post asks
of their own to the receiver, signed as Claros (and a webhook URL is often a credential
itself). Only the check function delivers asks, and only the admin function sets the
hook; but the outcome, evidence, prune and signer (checkpoint, export) roles could read
the whole state table, the hook's doc (``{workspace}#doc#settings``, ``ask_webhook``)
included. The hook now has a collection of its own (``{workspace}#doc#ask_webhook``),
which those roles are denied (``TheAskWebhookIsNotTheirs``); ``settings`` keeps only
that a hook is set, for the AIUC-1 pack. The web role, which neither sets nor delivers
it, is denied it too (test_role_reads_a_secret_in_clear.py). Every function still does its
work within its role (test_request_role_loosens_a_rule_or_approves_an_ask.py), the check function's
delivery included (below).
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World, world
from tests.security.aws.test_request_role_loosens_a_rule_or_approves_an_ask import (
    Gate,
    _ask_rule,
    _check,
    gate,
)
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS
_ = (world, gate)  # the fixtures, used by name

NOT_DELIVERING = [
    "OutcomeFunction",
    "EvidenceFunction",
    "WebFunction",
    "PruneFunction",
    "CheckpointFunction",
]


def _set_hook(world: World) -> str:
    event = load_event("admin-put-ask-webhook", world.keys.admin)
    status, body = world.functions.http("admin", event)
    assert status in (200, 201), body
    return str(json.loads(event["body"])["secret"])


def _read(role: Any, world: World, pk: str, sk: str) -> str:
    """What the role gets of the doc: its body, or "" (refused, or no such doc)."""
    table = world.table("StateTable")
    key = {"pk": {"S": pk}, "sk": {"S": sk}}
    found = ""
    try:
        got = role.get_item(TableName=table, Key=key, ConsistentRead=True)
        found += json.dumps(got.get("Item", {}))
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
    try:
        got = role.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
        )
        found += json.dumps(got.get("Items", []))
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
    return found


@pytest.mark.parametrize("function", NOT_DELIVERING)
def test_a_role_that_delivers_no_ask_cannot_read_the_webhook_secret(
    world: World, function: str
) -> None:
    secret = _set_hook(world)
    role = world.as_role(function)
    for pk, sk in ((f"{WS}#doc#settings", "ask_webhook"), (f"{WS}#doc#ask_webhook", "ask_webhook")):
        # Safe behaviour: wherever the hook is kept, the role does not get its secret.
        assert secret not in _read(role, world, pk, sk), (f"{function} read the secret", pk)


def test_the_check_function_still_delivers_and_the_pack_still_sees_the_hook(
    world: World, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under each role's own policies: the check function reads the hook to deliver an ask
    (the delivery queued with the secret), and the evidence function's AIUC-1 pack says a
    hook is set, from ``settings``; removing the hook clears both."""
    import claros.webhook

    queued: list[tuple[str, str]] = []

    def put(delivery: Any) -> bool:
        queued.append((delivery.url, delivery.secret))
        return True

    monkeypatch.setattr(claros.webhook._QUEUE, "put", put)
    secret = _set_hook(world)
    _ask_rule(world)
    asked = _check(world)
    assert asked["allowed"] is False and asked.get("ask"), asked
    assert [s for _, s in queued] == [secret]

    def configured() -> bool:
        status, body = world.functions.http(
            "evidence", load_event("evidence-aiuc1", world.keys.admin)
        )
        assert status == 200, body
        return bool(body["controls"]["B006"]["holds"]["ask_webhook_configured"])

    assert configured() is True
    status, body = world.functions.http(
        "admin", load_event("admin-delete-ask-webhook", world.keys.admin)
    )
    assert status in (200, 204), body
    assert configured() is False
    assert gate.refused == [], (gate.refused, sorted(gate.writes))
