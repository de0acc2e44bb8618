"""bench/units.py counts DynamoDB units by the service's published rules: item sizes from
the AWS examples, and each kind of call against moto, where moto's own ConsumedCapacity
is seen to be a fixed figure (the reason the bench counts them itself)."""

from __future__ import annotations

import base64
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from bench.units import Meter, item_size, value_size

TABLE = "units"


def test_item_sizes_follow_the_published_rules() -> None:
    assert value_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert value_size({"N": "123"}) == 3  # 3 significant digits: 2 bytes, plus 1
    assert value_size({"N": "-0012.3400"}) == 3  # zeros trimmed: 1234
    assert value_size({"N": "0"}) == 2
    assert value_size({"B": base64.b64encode(b"\x00" * 10).decode()}) == 10  # raw bytes
    assert value_size({"B": b"\x00" * 10}) == 10  # as botocore parses it
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1
    assert value_size({"SS": ["ab", "c"]}) == 3
    assert value_size({"NS": ["1", "22"]}) == 4
    assert value_size({"L": []}) == value_size({"M": {}}) == 3
    # 3 bytes, plus 1 per element, plus the elements (a map's with their names).
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"M": {"k": {"S": "ab"}}}) == 3 + 1 + 1 + 2
    assert item_size({"id": {"S": "x"}, "n": {"N": "10"}}) == (2 + 1) + (1 + 2)
    assert item_size(None) == 0
    with pytest.raises(ValueError, match="unknown AttributeValue type 'Q'"):
        value_size({"Q": "x"})


@pytest.fixture
def meter(moto_aws: None) -> tuple[Meter, Any]:
    """A hooked client on its own session, a table, and the unhooked probe."""
    probe = boto3.session.Session(region_name="us-east-1").client("dynamodb")
    probe.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "N"}],
        BillingMode="PAY_PER_REQUEST",
    )  # fmt: skip
    session = boto3.session.Session(region_name="us-east-1")
    found = Meter(probe)
    found.attach(session)
    return found, session.client("dynamodb")


def _item(sk: int, size: int) -> dict[str, Any]:
    """An item of exactly ``size`` bytes: pk (2 + 1), sk (2 + 2), body (4 + the rest)."""
    return {"pk": {"S": "p"}, "sk": {"N": str(sk)}, "body": {"S": "x" * (size - 11)}}


def _key(sk: int) -> dict[str, Any]:
    return {"pk": {"S": "p"}, "sk": {"N": str(sk)}}


def test_writes_count_a_unit_per_kb_of_the_larger_image_and_double_in_a_transaction(
    meter: tuple[Meter, Any],
) -> None:
    m, client = meter
    assert item_size(_item(10, 1500)) == 1500
    with m.phase("w") as calls:
        client.put_item(TableName=TABLE, Item=_item(10, 1500))  # 2 KB
        client.put_item(TableName=TABLE, Item=_item(10, 100))  # replaces 1.5 KB: still 2
        client.update_item(TableName=TABLE, Key=_key(10), UpdateExpression="SET body = :b",
                           ExpressionAttributeValues={":b": {"S": "y" * 3000}})  # fmt: skip
        client.delete_item(TableName=TABLE, Key=_key(10))  # the 3 KB it deleted
        client.batch_write_item(RequestItems={TABLE: [
            {"PutRequest": {"Item": _item(11, 1025)}},  # 2, rounded per item
            {"PutRequest": {"Item": _item(12, 20)}},  # 1
        ]})  # fmt: skip
        client.transact_write_items(TransactItems=[
            {"Put": {"TableName": TABLE, "Item": _item(13, 1024)}},  # 2 x 1
            {"ConditionCheck": {"TableName": TABLE, "Key": _key(11),
                                "ConditionExpression": "attribute_exists(pk)"}},  # 2 reads
        ])  # fmt: skip
        with pytest.raises(ClientError, match="ConditionalCheckFailed"):
            client.put_item(TableName=TABLE, Item=_item(12, 20),
                            ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
    assert [(c.op, c.wcu, c.rcu) for c in calls] == [
        ("PutItem", 2, 0), ("PutItem", 2, 0), ("UpdateItem", 3, 0), ("DeleteItem", 3, 0),
        ("BatchWriteItem", 3, 0), ("TransactWriteItems", 2, 2), ("PutItem", 1, 0),
    ]  # fmt: skip
    assert calls[-1].failed and not calls[0].failed
    # moto's own figure: 1.0 for a put of any size, 0.5 for a 3 KB update, nothing for a
    # transaction.
    assert [c.moto for c in calls] == [1.0, 1.0, 0.5, 1.0, 1.0, None, None]


def test_reads_count_what_was_read_not_what_was_returned(meter: tuple[Meter, Any]) -> None:
    m, client = meter
    for sk, size in ((1, 5000), (2, 3000), (3, 100)):
        client.put_item(TableName=TABLE, Item=_item(sk, size))  # outside a phase: uncounted
    assert m.calls == {}
    with m.phase("r") as calls:
        client.get_item(TableName=TABLE, Key=_key(1), ConsistentRead=True)  # 5 KB: 2
        client.get_item(TableName=TABLE, Key=_key(1), ProjectionExpression="pk")  # 2 x 0.5
        client.get_item(TableName=TABLE, Key=_key(9), ConsistentRead=True)  # none: still 1
        # 8,100 bytes read before the filter and the projection: 2 units, then halved.
        values = {":p": {"S": "p"}, ":three": {"N": "3"}}
        client.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                     FilterExpression="sk = :three", ProjectionExpression="sk",
                     ExpressionAttributeValues=values)  # fmt: skip
        client.query(TableName=TABLE, KeyConditionExpression="pk = :p", Limit=1,
                     ConsistentRead=True, ExpressionAttributeValues={":p": {"S": "p"}})  # fmt: skip
        client.batch_get_item(RequestItems={TABLE: {"Keys": [_key(2), _key(3)],
                                                    "ConsistentRead": True}})  # fmt: skip
        client.transact_get_items(TransactItems=[{"Get": {"TableName": TABLE, "Key": _key(2)}}])
    assert [(c.op, c.rcu) for c in calls] == [
        ("GetItem", 2), ("GetItem", 1), ("GetItem", 1), ("Query", 1), ("Query", 2),
        ("BatchGetItem", 2), ("TransactGetItems", 2),
    ]  # fmt: skip
    assert [c.bytes for c in calls[:5]] == [5000, 5000, 0, 8100, 5000]
    # moto: 0.5 for a get even when strongly consistent, 1.0 for a query of any size.
    assert [c.moto for c in calls[:5]] == [0.5, 0.5, 0.5, 1.0, 1.0]
