"""THREATS.md §3: a compromised outcome function plants the answer a check retry returns.

A guard that lost the answer to a check sends it again, same body, same Idempotency-Key,
and Claros sends back the answer it kept under that key (claros.api.idempotency). The
kept answers were docs of one global collection, ``idempotency``, which the check and the
outcome roles both wrote (``WriteItsOwnDocsOnly``: IAM's ``LeadingKeys`` sees the
collection, not the doc). So the outcome role, which may read the whole state table, found
the check's record (its answer says ``allowed: false``, an ask) and rewrote the answer to
``allowed: true``: the guard's retry was let through, with no check in the ledger and no
person asked. Each route family now keeps its answers in its own collection
(``idempotency_check``, ``idempotency_outcome``), and each role writes only its own.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World, _ledger, world
from tests.security.aws.test_request_role_loosens_a_rule_or_approves_an_ask import _ask_rule
from tests.stack import STACK_WARNINGS

pytestmark = STACK_WARNINGS
_ = world  # the fixture, used by name

KEY = "check-retry-1"  # the Idempotency-Key the guard sends, and sends again


def _keyed_check(world: World) -> tuple[int, dict[str, Any]]:
    """The sample refund ($120.00, on an order of 100: refund-half asks), its order read
    already (``fetched``), under the guard's Idempotency-Key."""
    event = load_event("check-check", world.keys.agent)
    body = json.loads(event["body"])
    status, answer = world.functions.http("check", event)
    assert status == 200, answer
    body["fetched"] = {need["key"]: {"total": 100} for need in answer.get("need", [])}
    event = load_event("check-check", world.keys.agent)
    event["body"] = json.dumps(body)
    event["headers"]["idempotency-key"] = KEY
    status, answer = world.functions.http("check", event)
    return status, dict(answer)


def _kept_answers(world: World) -> list[dict[str, Any]]:
    """Every Idempotency-Key record the outcome role can read (it reads the state table)."""
    found = []
    for collection in ("idempotency", "idempotency_check", "idempotency_outcome"):
        got = world.client.query(
            TableName=world.table("StateTable"),
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"_#doc#{collection}"}},
        )
        found += got["Items"]
    return found


def plant_and_retry(world: World, function: str) -> None:
    """The check asks; ``function``'s role rewrites the answer kept under the guard's
    Idempotency-Key to an allow; the guard sends the check again. Safe: the retry gets the
    ask it was given, and the role was refused."""
    _ask_rule(world)
    status, first = _keyed_check(world)
    assert status == 200 and first["allowed"] is False and first.get("ask"), first
    entries = len(_ledger(world))

    role = world.as_role(function)
    planted = refused = 0
    for item in _kept_answers(world):
        record = json.loads(item["body"]["S"])
        answer = json.loads(record.get("data", {}).get("body", "{}"))
        if answer.get("check_id") != first["check_id"]:
            continue
        answer |= {"allowed": True, "result": "allow", "ask": None, "check_id": "chk_planted"}
        record["data"]["body"] = json.dumps(answer)
        try:
            role.put_item(
                TableName=world.table("StateTable"),
                Item=item | {"body": {"S": json.dumps(record)}},
            )
            planted += 1
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
            refused += 1
    assert planted + refused == 1, "the check's answer was not kept under its key"

    # The guard lost the answer and asks again, as it was: same body, same key.
    status, again = _keyed_check(world)
    assert status == 200, again
    assert again["allowed"] is False, (f"a retry got the {function} role's planted allow", again)
    assert again["check_id"] == first["check_id"], again
    assert len(_ledger(world)) == entries  # the kept answer, not a second check
    assert refused == 1


def test_the_outcome_role_cannot_plant_a_check_answer(world: World) -> None:
    plant_and_retry(world, "OutcomeFunction")
