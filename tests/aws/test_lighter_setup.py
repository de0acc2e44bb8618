"""tests/aws.py's ``lighten_aws_setup`` (installed by the ``aws_env`` fixture) changes what
set-up costs, not what the tests see: sessions share botocore's parsed data unless they
name their own, and moto's KMS keys still encrypt and sign as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest

from tests.conftest import AWS_REGION


def test_sessions_share_botocore_data_unless_they_name_their_own(
    moto_aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = botocore.session.Session(), botocore.session.Session()
    assert first.get_component("data_loader") is second.get_component("data_loader")
    # Clients of either session work, against moto.
    for made in (first, second):
        client = made.create_client("dynamodb", region_name=AWS_REGION)
        assert client.list_tables()["TableNames"] == []
    # A session given its own data path reads from it, with a loader of its own.
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    own = botocore.session.Session()
    loader = own.get_component("data_loader")
    assert loader is not first.get_component("data_loader")
    assert str(tmp_path) in loader.search_paths


def test_kms_keys_still_encrypt_and_sign_with_their_own_material(moto_aws: None) -> None:
    kms: Any = boto3.client("kms", region_name=AWS_REGION)
    a, b = (kms.create_key()["KeyMetadata"]["KeyId"] for _ in range(2))
    sealed = kms.encrypt(KeyId=a, Plaintext=b"ledger export")["CiphertextBlob"]
    assert kms.decrypt(CiphertextBlob=sealed)["Plaintext"] == b"ledger export"
    assert kms.encrypt(KeyId=b, Plaintext=b"ledger export")["CiphertextBlob"] != sealed
    # Key pairs stay per key: two RSA signing keys have two public keys, and each verifies.
    rsa = [
        kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
        for _ in range(2)
    ]
    assert (
        kms.get_public_key(KeyId=rsa[0])["PublicKey"]
        != kms.get_public_key(KeyId=rsa[1])["PublicKey"]
    )
    signed = kms.sign(
        KeyId=rsa[0], Message=b"m", MessageType="RAW", SigningAlgorithm="RSASSA_PSS_SHA_256"
    )["Signature"]
    verified = kms.verify(
        KeyId=rsa[0], Message=b"m", MessageType="RAW", Signature=signed,
        SigningAlgorithm="RSASSA_PSS_SHA_256",
    )  # fmt: skip
    assert verified["SignatureValid"] is True


def test_dynamodb_answers_are_written_as_moto_writes_them(
    dynamodb_client: Any, dynamo_tables: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each member's names, found once per shape, pick what moto's own look-up picks: the
    same requests answer byte for byte the same with moto's ``get_value`` put back."""
    from moto.core import serialize

    table = dynamo_tables["StateTable"]
    item = {
        "pk": {"S": "acme#doc#rules"}, "sk": {"S": "refund-half"}, "n": {"N": "12.50"},
        "b": {"B": b"\x00\xff"}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]},
        "bs": {"BS": [b"x"]}, "m": {"M": {"in": {"L": [{"S": "x"}, {"NULL": True}]}}},
        "flag": {"BOOL": False}, "none": {"NULL": True},
    }  # fmt: skip
    dynamodb_client.put_item(TableName=table, Item=item)
    bodies: list[bytes] = []

    def keep(response_dict: dict[str, Any], **_: Any) -> None:
        bodies.append(response_dict["body"])

    dynamodb_client.meta.events.register("before-parse.dynamodb.*", keep)

    def ask() -> None:
        key = {"pk": item["pk"], "sk": item["sk"]}
        dynamodb_client.get_item(TableName=table, Key=key, ReturnConsumedCapacity="TOTAL")
        dynamodb_client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": item["pk"]},
        )
        dynamodb_client.describe_table(TableName=table)
        dynamodb_client.list_tables()
        with pytest.raises(dynamodb_client.exceptions.ConditionalCheckFailedException):
            dynamodb_client.put_item(
                TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )  # fmt: skip

    ask()
    lighter = list(bodies)
    patched: Any = serialize.ResponseSerializer.get_value
    assert patched.looked_up_by_moto is not patched  # the patch is in place
    monkeypatch.setattr(serialize.ResponseSerializer, "get_value", patched.looked_up_by_moto)
    bodies.clear()
    ask()
    assert len(lighter) == 5
    assert lighter == bodies
    assert b'"BOOL": false' in lighter[0] and b'"NS": ["1", "2"]' in lighter[0]
