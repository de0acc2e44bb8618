"""THREATS.md §3: a compromised request-serving role writes another function's docs.

Every role that appends may write ``*#doc#*`` items of the state table (template.yaml,
``WriteDocsOnly``), less the identity docs (``IdentityIsNotTheirs``). So the outcome role,
which only records what a checked call did, could rewrite a workspace's rule doc (the rule
the check function then applies: ``response: allow``), or an open ask's doc (``approved``,
which ``GET /v1/asks/{id}`` then tells the waiting guard), with no ledger entry and no
person. Each role now writes the doc collections its own routes write, and no others
(``dynamodb:LeadingKeys``, template.yaml). ``test_every_function_works_within_its_role``
runs every sample event with each function's DynamoDB calls gated by its role's policies,
so a collection a function needs and its role lacks fails here, not in production.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.events import events_in_order, load_event
from tests.iam import GatedDynamoDB, Request
from tests.security.aws.test_aws_roles_cannot_rewrite import World
from tests.stack import ADMIN, STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS

# The logical id of the function each sample event's name starts with.
FUNCTION_OF = {
    "check": "CheckFunction",
    "outcome": "OutcomeFunction",
    "evidence": "EvidenceFunction",
    "admin": "AdminFunction",
    "web": "WebFunction",
    "checkpoint": "CheckpointFunction",
    "export": "ExportFunction",
    "prune": "PruneFunction",
    "authorizer": "AuthorizerFunction",
}


class Gate:
    """Every function's DynamoDB client, gated by its own role (tests/iam.py)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.current = ""
        self.refused: list[tuple[str, Request]] = []
        self.clients: dict[str, GatedDynamoDB] = {}
        self.writes: set[tuple[str, str]] = set()

    def note(self, function: str, operation: str, kw: dict[str, Any]) -> None:
        """Which state partitions ``function`` writes (shown when the test fails)."""
        items: list[Any] = []
        if operation in ("put_item", "update_item", "delete_item"):
            items = [kw]
        elif operation == "transact_write_items":
            items = [next(iter(i.values())) for i in kw["TransactItems"]]
        for body in items:
            key = body.get("Key") or body.get("Item") or {}
            if "pk" in key:
                pk = key["pk"]["S"]
                self.writes.add((function, pk.split("#", 1)[1] if "#" in pk else pk))

    def client(self) -> Any:
        function = self.current
        assert function, "a DynamoDB client made outside a function's invocation"
        if function not in self.clients:
            self.clients[function] = self.world.as_role(function)
        return _Recorded(self, function, self.clients[function])


class _Recorded:
    def __init__(self, gate: Gate, function: str, client: GatedDynamoDB) -> None:
        self._gate, self._function, self._client = gate, function, client

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._client, name)
        if not callable(call):
            return call

        def run(*args: Any, **kw: Any) -> Any:
            self._gate.note(self._function, name, kw)
            before = len(self._client.refused)
            try:
                return call(*args, **kw)
            except ClientError:
                if os.environ.get("GATE_LOG") and len(self._client.refused) > before:
                    return getattr(self._client._client, name)(*args, **kw)
                raise
            finally:
                for request in self._client.refused[before:]:
                    self._gate.refused.append((self._function, request))

        return run


@pytest.fixture
def gate(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    import claros.wiring

    found = Gate(world)
    monkeypatch.setattr(claros.wiring, "_dynamodb", found.client)
    invoke = world.functions.invoke

    def invoke_as(name: str, event: Any) -> Any:
        found.current = FUNCTION_OF[name]
        try:
            return invoke(name, event)
        finally:
            found.current = ""

    monkeypatch.setattr(world.functions, "invoke", invoke_as)
    yield found


def _refused(call: Callable[[], Any]) -> bool:
    try:
        call()
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
        return True
    return False


def _state(world: World) -> str:
    return world.table("StateTable")


def _ask_rule(world: World) -> None:
    """refund-half (an ask over half the order) and the shop's tools, as the samples make
    them: the check sample's refund then asks."""
    for name in ("check-register-tools",):
        status, body = world.functions.http("check", load_event(name, world.keys.agent))
        assert status == 200, body
    for name in ("admin-create-rule", "admin-put-mapping"):
        status, body = world.functions.http("admin", load_event(name, world.keys.admin))
        assert status in (200, 201, 409), (name, body)  # 409: the samples made it already


def _check(world: World, **extra: str) -> dict[str, Any]:
    """The sample refund ($120.00) on an order of 100: over half, so refund-half asks."""
    event = load_event("check-check", world.keys.agent)
    body = json.loads(event["body"]) | extra
    event["body"] = json.dumps(body)
    status, answer = world.functions.http("check", event)
    assert status in (200, 409), answer
    if answer.get("need"):
        body["fetched"] = {need["key"]: {"total": 100} for need in answer["need"]}
        event = load_event("check-check", world.keys.agent)
        event["body"] = json.dumps(body)
        status, answer = world.functions.http("check", event)
        assert status in (200, 409), answer
    return {"allowed": False, "refused": answer} if status == 409 else dict(answer)


def test_every_function_works_within_its_role(world: World, gate: Gate) -> None:
    """Every sample event, each function's calls gated by its own role: nothing refused."""
    for name in events_in_order():
        event = load_event(name)
        if "routeKey" not in event:
            continue
        function = name.split("-", 1)[0]
        status, body = world.functions.http(function, load_event(name, world.keys.admin))
        assert status in (200, 201, 404, 409), (name, status, body)
    _ask_rule(world)
    asked = _check(world)
    assert asked["allowed"] is False and asked.get("ask"), asked
    status, body = world.functions.http(
        "admin", load_event("admin-answer-ask", world.keys.admin, ask_id=asked["ask"]["ask_id"])
    )
    assert status in (200, 201), body
    status, body = world.functions.http(
        "check", load_event("check-ask-status", world.keys.agent, ask_id=asked["ask"]["ask_id"])
    )
    assert status == 200, body
    # The guard repeats the call under the approval (the check uses it up), with an
    # Idempotency-Key, and reports the outcome with one.
    repeat = _check(world, approval=asked["ask"]["ask_id"])
    assert repeat["allowed"] is True, repeat
    keyed = load_event("outcome-check-outcome", world.keys.agent, check_id=repeat["check_id"])
    keyed["headers"]["idempotency-key"] = "outcome-1"
    status, body = world.functions.http("outcome", keyed)
    assert status in (200, 201), body
    keyed = load_event("check-check", world.keys.agent)
    keyed["headers"]["idempotency-key"] = "check-1"
    status, body = world.functions.http("check", keyed)
    assert status == 200, body
    for name in ("outcome-outcomes", "outcome-unchecked"):
        keyed = load_event(name, world.keys.agent)
        keyed["headers"]["idempotency-key"] = name
        status, body = world.functions.http("outcome", keyed)
        assert status in (200, 201, 404, 409), (name, body)
    assert gate.refused == [], (gate.refused, sorted(gate.writes))


@pytest.mark.parametrize("function", ["CheckFunction", "OutcomeFunction", "PruneFunction"])
def test_a_request_role_cannot_loosen_a_rule(world: World, function: str) -> None:
    _ask_rule(world)
    assert _check(world)["allowed"] is False  # refund-half asks
    role = world.as_role(function)
    key = {"pk": {"S": f"{WS}#doc#rule"}, "sk": {"S": "refund-half"}}
    item = world.client.get_item(TableName=_state(world), Key=key, ConsistentRead=True)["Item"]
    doc = json.loads(item["body"]["S"])
    text = json.dumps(doc)
    assert '"ask"' in text, doc
    loosened = text.replace('"response": "ask"', '"response": "allow"')
    assert loosened != text, doc
    # The rule, loosened; and the workspace's rule stamp, renewed, so that every check
    # function's cached rule set is read again (claros.rules.service.STAMP_DOC).
    stamp = {"pk": {"S": f"{WS}#doc#rule_stamp"}, "sk": {"S": "rules"}}
    stamp_item = world.client.get_item(TableName=_state(world), Key=stamp)["Item"]
    refused = _refused(lambda: role.put_item(
        TableName=_state(world), Item=item | {"body": {"S": loosened}}
    )) | _refused(lambda: role.put_item(
        TableName=_state(world), Item=stamp_item | {"body": {"S": '{"stamp": "forged"}'}}
    ))  # fmt: skip
    # Safe behaviour: the refund still asks, because the role may not write the rule's doc.
    answer = _check(world)
    assert answer["allowed"] is False, ("the loosened rule let the refund through", answer)
    assert refused


# Not the check function: it opens asks and uses up their approvals (the same doc), and it
# answers the check itself, so a compromised one needs no forged approval (docs/deploy.md).
@pytest.mark.parametrize("function", ["OutcomeFunction", "PruneFunction"])
def test_a_request_role_cannot_approve_an_ask(world: World, function: str) -> None:
    _ask_rule(world)
    asked = _check(world)
    ask_id = asked["ask"]["ask_id"]
    role = world.as_role(function)
    key = {"pk": {"S": f"{WS}#doc#ask"}, "sk": {"S": ask_id}}
    item = world.client.get_item(TableName=_state(world), Key=key, ConsistentRead=True)["Item"]
    doc = json.loads(item["body"]["S"])
    assert doc["status"] == "open", doc
    approved = doc | {
        "status": "approved", "decision": "approve", "decided_by": ADMIN, "authority": "admin",
        "decided_at": doc["opened_at"] + 60_000, "approval_expires_at": 2**53,
    }  # fmt: skip
    refused = _refused(lambda: role.put_item(
        TableName=_state(world), Item=item | {"body": {"S": json.dumps(approved)}}
    ))  # fmt: skip
    # Safe behaviour: the guard's repeat of the call under that ask is not let through ...
    repeat = _check(world, approval=ask_id)
    assert repeat["allowed"] is False, ("the refund ran on the forged approval", repeat)
    # ... and the guard waiting on it still hears "open": the role may not write its doc.
    status, body = world.functions.http(
        "check", load_event("check-ask-status", world.keys.agent, ask_id=ask_id)
    )
    assert status == 200 and body["status"] == "open", ("the forged approval stands", body)
    assert refused


def test_the_admin_and_web_functions_work_within_their_roles(world: World, gate: Gate) -> None:
    """What the sample events leave out of the admin and web functions' writes, each
    function's calls gated by its own role: overrides (the admin API's under an
    Idempotency-Key), a device sign-in from start to key, and a web sign-in."""
    _ask_rule(world)
    first, second = _check(world), _check(world)
    override = load_event("admin-override", world.keys.admin, check_id=first["check_id"])
    override["headers"]["idempotency-key"] = "override-1"
    status, body = world.functions.http("admin", override)
    assert status in (200, 201), body
    status, body = world.functions.http(
        "web", load_event("web-app-check-override", world.keys.admin, check_id=second["check_id"])
    )
    assert status in (200, 201, 303), body
    status, started = world.functions.http("web", load_event("web-device-code", "none"))
    assert status in (200, 201), started
    answer = load_event("web-app-device-answer", world.keys.admin)
    answer["body"] = json.dumps({"user_code": started["user_code"], "decision": "approve"})
    status, body = world.functions.http("web", answer)
    assert status in (200, 303), body
    poll = load_event("web-device-token", "none")
    poll["body"] = json.dumps({"device_code": started["device_code"]})
    status, body = world.functions.http("web", poll)
    assert status == 200 and body["key"].startswith("ck_"), body
    status, body = world.functions.http("web", load_event("web-app-sign-in", world.keys.admin))
    assert status in (200, 303), body
    assert gate.refused == [], (gate.refused, sorted(gate.writes))
    wrote = {(function, pk.split(":", 1)[0]) for function, pk in gate.writes}
    assert {("AdminFunction", "doc#overrides"), ("AdminFunction", "doc#idempotency"),
            ("WebFunction", "doc#overrides"), ("WebFunction", "doc#device"),
            ("WebFunction", "doc#device_secret"), ("WebFunction", "doc#device_expiry"),
            ("WebFunction", "doc#device_address"), ("WebFunction", "doc#session"),
            ("WebFunction", "doc#session_expiry")} <= wrote, sorted(wrote)  # fmt: skip
