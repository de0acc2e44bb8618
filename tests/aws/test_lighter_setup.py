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
