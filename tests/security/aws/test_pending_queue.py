"""THREATS.md §3, the pending appends' queue (claros.store.dynamo_pending): the roles that
append write it, so a compromised request role may put anything there. Each test puts
what such a role could and shows that a committer (another environment, appending as
usual) neither writes it as the attacker wanted nor stops: nothing in the queue picks a
seq, rewrites an entry, or blocks the chain."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest

from claros.canonical import canonical_bytes
from claros.store.dynamo import DynamoStore, record_key
from claros.store.dynamo_pending import pending_pk
from tests.aws import STORE_TABLES
from tests.security.aws.test_aws_roles_cannot_rewrite import World
from tests.store.test_pending_appends import Racing
from tests.store.test_pending_appends import _verifies as _chain

WS = "acme"

pytestmark = [  # the stack moto cannot build in full (as tests/security/test_aws_roles_...)
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy:UserWarning"),
]


def _store(client: Any, tables: dict[str, str], **options: Any) -> DynamoStore:
    options.setdefault("sleep", lambda _s: None)
    named: dict[str, Any] = {arg: tables[lid] for arg, lid in STORE_TABLES.items()}
    return DynamoStore(client, **named, **options)


@pytest.fixture
def make_store(dynamodb_client: Any, dynamo_tables: dict[str, str]) -> Callable[..., DynamoStore]:
    return lambda **options: _store(dynamodb_client, dynamo_tables, **options)


def _forge(client: Any, store: DynamoStore, sk: str, **attrs: Any) -> None:
    item = {"pk": {"S": pending_pk(WS)}, "sk": {"S": sk}, "exp": {"N": str(2**62)}, **attrs}
    client.put_item(TableName=store.state_table, Item=item)


def _queue(client: Any, store: DynamoStore) -> list[Any]:
    got = client.query(
        TableName=store.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pending_pk(WS)}},
        ConsistentRead=True,
    )
    return list(got["Items"])


def test_a_forged_pending_item_cannot_pick_its_seq_or_rewrite_an_entry(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    store = make_store()
    first = store.append(WS, "check", "real", {"result": "deny"})
    # A record for seq 1 with its own "hash", in a non-canonical form with an empty field:
    # the committer takes only kind, ref_id and the record, and canonicalizes it again.
    body = b'[{"kind":"check","ref_id":"forged","record":{"result":"allow",  "x":""},'
    body += b'"seq":1,"hash":"' + first.hash.encode() + b'"}]'
    _forge(dynamodb_client, store, "0000000000000#forged", recs={"B": zlib.compress(body)},
           seq={"N": "1"}, hash={"S": first.hash})  # fmt: skip
    make_store().append(WS, "check", "next", {})
    entries = _chain(store)
    assert entries[0] == first  # entry 1 is as it was
    assert [e.ref_id for e in entries] == ["real", "next", "forged"]
    assert store.get_record(WS, "check", "forged") == {"result": "allow"}
    got = dynamodb_client.get_item(
        TableName=store.records_table, Key=record_key(WS, "check", "forged"), ConsistentRead=True
    )["Item"]
    assert zlib.decompress(got["body"]["B"]) == canonical_bytes({"result": "allow"})


def test_a_decompression_bomb_in_the_queue_is_dropped_and_appends_go_on(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    store = make_store()
    store.append(WS, "check", "first", {})
    bomb = zlib.compress(b"[" + b" " * 50_000_000 + b"]", 9)  # 50 MB of nothing, ~50 KB
    _forge(dynamodb_client, store, "0000000000000#bomb", recs={"B": bomb})
    _forge(dynamodb_client, store, "0000000000001#junk", recs={"S": "not bytes"})
    _forge(dynamodb_client, store, "0000000000002#none")
    _forge(dynamodb_client, store, "0000000000003#empty", recs={"B": zlib.compress(b"[]")})
    make_store().append(WS, "check", "second", {})
    assert _queue(dynamodb_client, store) == []  # none of it carried, all of it removed
    assert [e.ref_id for e in _chain(store)] == ["first", "second"]


def test_a_pending_item_naming_one_record_twice_is_dropped_not_retried_forever(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    store = make_store()
    rec = b'{"kind":"check","ref_id":"twice","record":{}}'
    _forge(dynamodb_client, store, "0000000000000#twice",
           recs={"B": zlib.compress(b"[" + rec + b"," + rec + b"]")})  # fmt: skip
    store.append(WS, "check", "after", {})
    store.append(WS, "check", "again", {})
    assert _queue(dynamodb_client, store) == []
    assert [e.ref_id for e in _chain(store)] == ["after", "again"]


def test_request_roles_queue_and_carry_appends_with_only_their_permissions(
    world: World,  # noqa: F811
) -> None:
    """The check function loses a race and queues its append; the outcome function's
    next append carries it; both with only their roles' calls (tests/iam.py)."""
    from tests.stack import WS as STACK_WS

    tables = {lid: world.table(lid) for lid in STORE_TABLES.values()}
    check, outcome = world.as_role("CheckFunction"), world.as_role("OutcomeFunction")
    committer = _store(outcome, tables)
    committer.append(STACK_WS, "check", "c0", {})
    racing = Racing(check)
    backed_off: list[float] = []

    def outcome_appends_meanwhile(_s: float) -> None:
        backed_off.append(_s)
        if len(backed_off) == 1:
            committer.append(STACK_WS, "outcome", "o2", {})

    loser = _store(racing, tables, sleep=outcome_appends_meanwhile)
    loser.append(STACK_WS, "check", "c1", {})
    racing.before.append(lambda: committer.append(STACK_WS, "outcome", "o1", {}))
    answer = loser.append(STACK_WS, "check", "c2", {})
    assert not check.refused and not outcome.refused, (check.refused, outcome.refused)
    entries = list(committer.entries(STACK_WS))
    assert [e.ref_id for e in entries][-3:] == ["o1", "o2", "c2"]  # carried by outcome's
    assert entries[-1] == answer
