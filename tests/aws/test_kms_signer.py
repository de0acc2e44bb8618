"""KmsSigner against moto's KMS, with ECC_NIST_EDWARDS25519 keys (tests/aws.py)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_der_public_key
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from claros.ledger import Checkpoint, PublicKey, key_id_for, verify_signature
from claros.signing import KmsSigner, SigningError

WS = "acme"
ALIAS = "alias/claros-ledger-acme"


def _aliases(kms: Any) -> dict[str, str]:
    return {
        a["AliasName"]: a["TargetKeyId"]
        for a in kms.list_aliases()["Aliases"]
        if a["AliasName"].startswith("alias/claros-ledger-")
    }


def _raw_public_key(kms: Any, key_id: str) -> bytes:
    der = kms.get_public_key(KeyId=key_id)["PublicKey"]
    key = load_der_public_key(der)
    assert isinstance(key, Ed25519PublicKey)
    raw = key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert len(der) == 44 and der[-32:] == raw
    return raw


def test_key_is_made_on_first_use_with_alias_and_tags(kms_ed25519: Any) -> None:
    kms = kms_ed25519
    assert _aliases(kms) == {}
    public = KmsSigner(kms).active_key(WS)
    aliases = _aliases(kms)
    assert list(aliases) == [ALIAS]
    meta = kms.describe_key(KeyId=ALIAS)["KeyMetadata"]
    assert meta["KeySpec"] == "ECC_NIST_EDWARDS25519"
    assert meta["KeyUsage"] == "SIGN_VERIFY"
    assert meta["SigningAlgorithms"] == ["ED25519_SHA_512"]
    tags = {t["TagKey"]: t["TagValue"] for t in kms.list_resource_tags(KeyId=meta["KeyId"])["Tags"]}
    assert tags == {"claros:workspace": WS, "claros:purpose": "ledger-checkpoint"}
    raw = _raw_public_key(kms, meta["KeyId"])
    assert public.key_id == key_id_for(raw)
    assert base64.b64decode(public.public_key) == raw
    assert public.workspace == WS and public.algorithm == "Ed25519"
    assert public.created_at > 1_600_000_000_000


def test_signature_is_plain_ed25519(kms_ed25519: Any) -> None:
    signer = KmsSigner(kms_ed25519)
    cp = Checkpoint(WS, 100, "ab" * 32, 1_767_000_000_000, "", "")
    key_id, signature = signer.sign(WS, cp.message())
    public = signer.active_key(WS)
    assert key_id == public.key_id and len(signature) == 64
    VerifyKey(base64.b64decode(public.public_key)).verify(cp.message(), signature)
    with pytest.raises(BadSignatureError):
        VerifyKey(base64.b64decode(public.public_key)).verify(cp.message() + b"x", signature)
    assert verify_signature(public, cp.message(), base64.b64encode(signature).decode())
    # The fixture signs as KMS does: the RAW message, not a digest of it.
    answer = kms_ed25519.verify(
        KeyId=ALIAS,
        Message=cp.message(),
        MessageType="RAW",
        Signature=signature,
        SigningAlgorithm="ED25519_SHA_512",
    )
    assert answer["SignatureValid"] is True


def test_kms_double_refuses_what_kms_refuses(kms_ed25519: Any) -> None:
    KmsSigner(kms_ed25519).active_key(WS)
    with pytest.raises(kms_ed25519.exceptions.ClientError, match="RAW"):
        kms_ed25519.sign(
            KeyId=ALIAS, Message=b"x" * 64, MessageType="DIGEST", SigningAlgorithm="ED25519_SHA_512"
        )
    with pytest.raises(kms_ed25519.exceptions.ClientError):
        kms_ed25519.sign(KeyId=ALIAS, Message=b"x", SigningAlgorithm="ECDSA_SHA_256")


def test_messages_over_4096_bytes_are_refused(kms_ed25519: Any) -> None:
    signer = KmsSigner(kms_ed25519)
    with pytest.raises(SigningError, match="4096"):
        signer.sign(WS, b"x" * 4097)
    assert signer.sign(WS, b"x" * 4096)[1]


def test_rotation_moves_the_alias_and_old_signatures_still_verify(kms_ed25519: Any) -> None:
    kms = kms_ed25519
    signer = KmsSigner(kms)
    old = signer.active_key(WS)
    old_target = _aliases(kms)[ALIAS]
    message = b"claros-ledger-checkpoint\nacme\n1\nhash\n1"
    old_id, old_signature = signer.sign(WS, message)

    new = signer.rotate(WS)
    assert new.key_id != old.key_id
    new_target = _aliases(kms)[ALIAS]
    assert new_target != old_target
    assert key_id_for(_raw_public_key(kms, new_target)) == new.key_id
    assert signer.active_key(WS) == new
    new_id, new_signature = signer.sign(WS, message)
    assert (old_id, new_id) == (old.key_id, new.key_id)
    sig = base64.b64encode
    assert verify_signature(old, message, sig(old_signature).decode())
    assert verify_signature(new, message, sig(new_signature).decode())
    assert not verify_signature(new, message, sig(old_signature).decode())
    # The old key stays in KMS, enabled, so its public key can still be fetched.
    assert kms.describe_key(KeyId=old_target)["KeyMetadata"]["KeyState"] == "Enabled"
    assert key_id_for(_raw_public_key(kms, old_target)) == old.key_id
    # A fresh signer (a new Lambda container) follows the alias to the new key.
    assert KmsSigner(kms).active_key(WS) == new


def test_a_second_signer_finds_the_same_key(kms_ed25519: Any) -> None:
    kms = kms_ed25519
    first = KmsSigner(kms).active_key(WS)
    keys_before = len(kms.list_keys()["Keys"])
    second = KmsSigner(kms)
    assert second.active_key(WS) == first
    key_id, signature = second.sign(WS, b"m")
    assert key_id == first.key_id
    assert verify_signature(first, b"m", base64.b64encode(signature).decode())
    assert len(kms.list_keys()["Keys"]) == keys_before
    # Workspaces get keys of their own.
    assert KmsSigner(kms).active_key("other").key_id != first.key_id
    assert set(_aliases(kms)) == {ALIAS, "alias/claros-ledger-other"}


def test_losing_the_race_to_make_the_key_uses_the_winners(kms_ed25519: Any) -> None:
    kms = kms_ed25519
    winner = KmsSigner(kms)

    class LateClient:
        """Sees no alias yet; the winner makes the key before this one's alias lands."""

        def __init__(self) -> None:
            self.exceptions = kms.exceptions
            self.looked = False

        def __getattr__(self, name: str) -> Any:
            return getattr(kms, name)

        def describe_key(self, **kwargs: Any) -> Any:
            if kwargs["KeyId"] == ALIAS and not self.looked:
                self.looked = True
                raise kms.exceptions.NotFoundException(
                    {"Error": {"Code": "NotFoundException", "Message": "no alias"}}, "DescribeKey"
                )
            return kms.describe_key(**kwargs)

        def create_key(self, **kwargs: Any) -> Any:
            winner.active_key(WS)
            return kms.create_key(**kwargs)

    loser = KmsSigner(LateClient())  # type: ignore[arg-type]
    assert loser.active_key(WS) == winner.active_key(WS)
    states = [
        kms.describe_key(KeyId=k["KeyId"])["KeyMetadata"]["KeyState"]
        for k in kms.list_keys()["Keys"]
    ]
    # The loser's key stays, unaliased: no Claros role may schedule a key's deletion.
    assert sorted(states) == ["Enabled", "Enabled"]
    aliased = kms.describe_key(KeyId=f"alias/claros-ledger-{WS}")["KeyMetadata"]["KeyId"]
    assert aliased == winner._active(WS)[0]


@pytest.mark.parametrize("workspace", ["", "Acme", "../acme", "a" * 64, "acme/x"])
def test_bad_workspace_names_are_refused(kms_ed25519: Any, workspace: str) -> None:
    with pytest.raises(SigningError, match="workspace"):
        KmsSigner(kms_ed25519).active_key(workspace)
    assert _aliases(kms_ed25519) == {}


def test_kms_refusing_to_sign_is_a_signing_error(kms_ed25519: Any) -> None:
    """KMS refusing (here: the workspace's alias names a key that cannot sign; a disabled
    key, throttling or a missing permission look the same) is a SigningError naming KMS's
    reason, which the API answers as a 503, never a bare 500."""
    wrong = kms_ed25519.create_key(KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]["KeyId"]
    kms_ed25519.create_alias(AliasName=ALIAS, TargetKeyId=wrong)
    with pytest.raises(SigningError, match=r"KMS could not sign for workspace acme: \w+"):
        KmsSigner(kms_ed25519).sign(WS, b"message")


def test_kms_unreachable_is_a_signing_error() -> None:
    import boto3
    from botocore.config import Config

    kms = boto3.client(
        "kms", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="x", aws_secret_access_key="x",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )  # fmt: skip
    with pytest.raises(SigningError, match="KMS could not sign for workspace acme"):
        KmsSigner(kms).sign(WS, b"message")


def test_rotation_lets_the_old_key_vouch_for_the_new_one(kms_ed25519: Any) -> None:
    signer = KmsSigner(kms_ed25519)
    old = signer.active_key(WS)
    seen: list[tuple[str, str]] = []

    def vouch(new: PublicKey) -> None:  # the alias still names the old key meanwhile
        seen.append((new.key_id, signer.sign(WS, b"m")[0]))
        assert key_id_for(_raw_public_key(kms_ed25519, _aliases(kms_ed25519)[ALIAS])) == old.key_id

    new = signer.rotate(WS, vouch)
    assert seen == [(new.key_id, old.key_id)]
    assert signer.sign(WS, b"m")[0] == new.key_id


def test_a_warm_signer_follows_a_rotation_made_elsewhere(kms_ed25519: Any) -> None:
    """A Lambda container signs with the key its alias names: after rotate-key (another
    process) moved the alias, within KEY_CACHE_S of its last reading of it, not never."""
    from claros.signing import KEY_CACHE_S

    now = [1000.0]
    warm = KmsSigner(kms_ed25519, clock=lambda: now[0])
    old = warm.active_key(WS)
    new = KmsSigner(kms_ed25519).rotate(WS)  # the operator's run
    now[0] += KEY_CACHE_S - 1
    assert warm.sign(WS, b"m")[0] == old.key_id  # read a moment ago: one DescribeKey a minute
    now[0] += 1
    key_id, signature = warm.sign(WS, b"m")
    assert key_id == new.key_id != old.key_id
    assert verify_signature(new, b"m", base64.b64encode(signature).decode())
