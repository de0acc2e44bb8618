"""THREATS.md §3: a compromised function reads a secret it does not need, in clear.

Every secret Claros hands out is kept as a hash where it is kept at all: keys
(``_#doc#key`` by sha256), web sessions (the cookie's sha256, the hand's sha256; the CSRF
token is derived from the cookie), and device sign-ins (the device code's sha256; the user
code is what a person reads out, not a credential). The one kept in clear is the ask
webhook's signing secret, which the check function needs to sign deliveries and the admin
function sets. The test makes each of those secrets on the stack (a member added, keys
minted, a device sign-in approved and one left pending, a web sign-in, the hook set) and
then reads every item of the three tables each role may read, item by item and partition
by partition, records and compressed bodies opened: no role may get a secret but the
hook's, and that only the check and admin roles.

The web role read the hook's doc (``{workspace}#doc#ask_webhook``): no page of it sets or
delivers the hook (the AIUC-1 pack reads only that one is set, from ``settings``), and with
the secret one signs asks of one's own to the receiver, as Claros. It is now denied it
(``TheAskWebhookIsNotTheirs``), as the outcome, evidence, prune and signer roles were.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.events import load_event
from tests.iam import GatedDynamoDB
from tests.security.aws.test_aws_roles_cannot_rewrite import World, world
from tests.security.aws.test_request_role_loosens_a_rule_or_approves_an_ask import (
    _ask_rule,
    _check,
)
from tests.stack import STACK_WARNINGS

pytestmark = STACK_WARNINGS
_ = world  # the fixture, used by name

FUNCTIONS = ["CheckFunction", "OutcomeFunction", "EvidenceFunction", "AdminFunction",
             "WebFunction", "PruneFunction", "CheckpointFunction", "ExportFunction",
             "AuthorizerFunction"]  # fmt: skip
# The functions that need the hook's secret: the check function signs deliveries with it,
# the admin function sets it (and shows it to an admin).
HOOK_READERS = {"CheckFunction", "AdminFunction"}
TABLES = ("StateTable", "LedgerTable", "RecordsTable")


def _ok(status: int, body: Any) -> Any:
    assert status in (200, 201), body
    return body


def _secrets(world: World) -> tuple[dict[str, str], str]:
    """Every secret the stack hands out, by what it is; and the hook's secret."""
    made = {"admin key": world.keys.admin, "agent key": world.keys.agent}
    fns = world.functions
    added = _ok(*fns.http("admin", load_event("admin-api-member-add", world.keys.admin)))
    made["person key"] = added["key"]
    approved = _ok(*fns.http("web", load_event("web-device-code", "none")))
    pending = _ok(*fns.http("web", load_event("web-device-code", "none")))
    made["device code (approved)"] = approved["device_code"]
    made["device code (pending)"] = pending["device_code"]
    answer = load_event("web-app-device-answer", world.keys.admin)
    answer["body"] = json.dumps({"user_code": approved["user_code"], "decision": "approve"})
    _ok(*fns.http("web", answer))
    poll = load_event("web-device-token", "none")
    poll["body"] = json.dumps({"device_code": made["device code (pending)"]})
    assert fns.http("web", poll)[0] == 400  # authorization_pending: the code stays pending
    poll["body"] = json.dumps({"device_code": made["device code (approved)"]})
    made["device sign-in's key"] = _ok(*fns.http("web", poll))["key"]
    response = fns.invoke("web", load_event("web-app-sign-in", added["key"]))
    signed_in = json.loads(response["body"])
    [cookie] = response["cookies"]
    made["session id"] = cookie.split(";", 1)[0].split("=", 1)[1]
    made["hand"], made["csrf token"] = signed_in["hand"], signed_in["csrf"]
    hook = load_event("admin-put-ask-webhook", world.keys.admin)
    secret = str(json.loads(hook["body"])["secret"])
    _ok(*fns.http("admin", hook))
    _ask_rule(world)
    assert _check(world).get("ask")  # an ask, delivered with the hook
    assert all(len(s) >= 20 for s in made.values()), made
    return made, secret


def _text(value: Any) -> Iterator[str]:
    """An item's values as text, binary ones (compressed bodies) opened."""
    if isinstance(value, dict):
        for kind, inner in value.items():
            if kind == "B":
                raw = inner if isinstance(inner, bytes) else base64.b64decode(inner)
                try:
                    raw = zlib.decompress(raw)
                except zlib.error:
                    pass
                yield raw.decode("utf-8", "replace")
            else:
                yield from _text(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _text(inner)
    else:
        yield str(value)


def _items(world: World, table: str) -> list[dict[str, Any]]:
    pages = world.client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    return [item for page in pages for item in page["Items"]]


def _read_by(role: GatedDynamoDB, world: World) -> str:
    """All the role gets, reading every item of the three tables as it may: each item by
    its key, and each partition by a query."""
    got: list[str] = []
    for logical in TABLES:
        table = world.table(logical)
        schema = world.client.describe_table(TableName=table)["Table"]["KeySchema"]
        names = [k["AttributeName"] for k in schema]
        calls: list[tuple[str, dict[str, Any]]] = []
        partitions: dict[str, Any] = {}
        for item in _items(world, table):
            key = {name: item[name] for name in names}
            calls.append(("get_item", {"Key": key, "ConsistentRead": True}))
            partitions[json.dumps(key[names[0]], sort_keys=True)] = key[names[0]]
        for value in partitions.values():
            calls.append(("query", {"KeyConditionExpression": "#p = :p",
                                    "ExpressionAttributeNames": {"#p": names[0]},
                                    "ExpressionAttributeValues": {":p": value}}))  # fmt: skip
        for operation, kw in calls:
            try:
                answer = getattr(role, operation)(TableName=table, **kw)
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
                continue
            got += _text([answer.get("Item", {}), *answer.get("Items", [])])
    return "\n".join(got)


def test_no_role_reads_a_secret_in_clear_but_the_hooks_where_it_is_needed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    import claros.webhook

    queued: list[str] = []  # the deliveries, kept here: the hook's URL is no real host
    monkeypatch.setattr(claros.webhook._QUEUE, "put", lambda d: queued.append(d.secret) or True)
    made, hook_secret = _secrets(world)
    assert queued == [hook_secret]
    everything = _read_by(GatedDynamoDB(world.client, [{"Effect": "Allow", "Action": "*",
                                                        "Resource": "*"}]), world)  # fmt: skip
    assert hook_secret in everything  # the scan reads what is there, compressed or not
    assert [what for what, secret in made.items() if secret in everything] == []
    read: dict[str, list[str]] = {}
    for function in FUNCTIONS:
        text = _read_by(world.as_role(function), world)
        read[function] = [what for what, secret in made.items() if secret in text]
        if hook_secret in text:
            read[function].append("the ask webhook's secret")
    # Safe behaviour: only the hook's secret is in clear, and only its two readers get it.
    expected = {f: ["the ask webhook's secret"] if f in HOOK_READERS else [] for f in FUNCTIONS}
    assert read == expected, read
