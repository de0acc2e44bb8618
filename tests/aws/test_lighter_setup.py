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


def test_update_expressions_are_parsed_once_and_refused_every_time(
    dynamodb_client: Any, dynamo_tables: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One tree per update expression serves every update (moto validates and runs a copy
    of it, so the second update sees the first one's result, not its tree); an expression
    moto refuses is refused again, with moto's words."""
    from moto.dynamodb.parsing.tokens import ExpressionTokenizer

    tokenize = ExpressionTokenizer.make_list
    parsed: list[str] = []

    def counted(cls: type, expression: str) -> Any:
        parsed.append(expression)
        return tokenize(expression)

    monkeypatch.setattr(ExpressionTokenizer, "make_list", classmethod(counted))
    table, key = dynamo_tables["StateTable"], {"pk": {"S": "acme#n"}, "sk": {"S": "n"}}
    add = (
        "SET n = if_not_exists(n, :zero) + :one, seen = list_append(if_not_exists(seen, :no), :me)"
    )
    values = {
        ":zero": {"N": "0"},
        ":one": {"N": "1"},
        ":no": {"L": []},
        ":me": {"L": [{"S": "x"}]},
    }
    for _ in range(3):
        dynamodb_client.update_item(
            TableName=table, Key=key, UpdateExpression=add, ExpressionAttributeValues=values
        )
    item = dynamodb_client.get_item(TableName=table, Key=key)["Item"]
    assert item["n"] == {"N": "3"} and item["seen"] == {"L": [{"S": "x"}] * 3}
    refusals = []
    for _ in range(2):
        with pytest.raises(dynamodb_client.exceptions.ClientError) as refused:
            dynamodb_client.update_item(
                TableName=table, Key=key, UpdateExpression="SET n = = :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )  # fmt: skip
        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1] and "Invalid UpdateExpression" in refusals[0]
    assert parsed.count(add) == 1
    assert parsed.count("SET n = = :one") == 2


def test_moto_reads_a_json_template_as_json_and_the_rest_as_yaml(aws_env: None) -> None:
    """tests/stack.py's ``json_templates_read_as_json``: the translated template the tests
    deploy is the same dict either way; a YAML body (short-form tags) still goes to moto's
    YAML path, and a JSON body that is not a template's object too."""
    import json

    from moto.cloudformation.models import Stack as MotoStack

    from tests.aws import load_template
    from tests.stack import json_templates_read_as_json, translate

    cfn, _ = translate(load_template())
    body = json.dumps(cfn)
    original = MotoStack.parse_template
    by_moto = original(body)
    yaml_body = (
        "Resources:\n  T:\n    Type: AWS::SNS::Topic\n    Properties:\n      TopicName: !Ref N\n"
    )
    listed = '["a", 1]'
    with json_templates_read_as_json():
        assert MotoStack.parse_template is not original  # patched
        assert MotoStack.parse_template(body) == by_moto == cfn
        from_yaml = MotoStack.parse_template(yaml_body)
        assert MotoStack.parse_template(listed) == ["a", 1]
    assert MotoStack.parse_template is original  # put back
    assert from_yaml == original(yaml_body)
    assert from_yaml["Resources"]["T"]["Properties"] == {"TopicName": {"Ref": "N"}}
