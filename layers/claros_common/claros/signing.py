"""Who signs checkpoints: a key file on the server (local) or AWS KMS (cloud).

Both give plain RFC 8032 Ed25519 signatures that ``nacl`` verifies, and both name each key
by ``claros.ledger.key_id_for(raw public key)``. A workspace's key is made on first use.
Rotation makes a new key active; old public keys stay listed (the caller registers every
key it signs with in the store), so old checkpoints still verify.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from nacl.signing import SigningKey

from claros.ledger import PublicKey, key_id_for

if TYPE_CHECKING:  # the client package never imports boto3; only the KMS signer uses it
    from mypy_boto3_kms import KMSClient

__all__ = ["FileSigner", "KmsSigner", "Signer", "SigningError"]

_WORKSPACE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class SigningError(Exception):
    """The key could not be made, found or used."""


@contextlib.contextmanager
def _kms_errors(workspace: str) -> Iterator[None]:
    """KMS refusing or unreachable (throttled, key disabled, no permission) is a
    SigningError: the API answers 503 with the reason, never a bare 500."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise SigningError(
            f"KMS could not sign for workspace {workspace}: {error.get('Code', 'error')}: "
            f"{error.get('Message', exc)}"
        ) from exc
    except BotoCoreError as exc:
        raise SigningError(f"KMS could not sign for workspace {workspace}: {exc}") from exc


class Signer(Protocol):
    def active_key(self, workspace: str) -> PublicKey:
        """The key new checkpoints are signed with; made on first use."""
        ...

    def sign(self, workspace: str, message: bytes) -> tuple[str, bytes]:
        """(key_id, 64-byte Ed25519 signature) over ``message`` with the active key."""
        ...

    def rotate(self, workspace: str) -> PublicKey:
        """Make a new active key; the old one is kept for the record."""
        ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_workspace(workspace: str) -> str:
    if not _WORKSPACE.match(workspace):
        raise SigningError(f"not a workspace name: {workspace!r}")
    return workspace


class FileSigner:
    """Keys in ``<data>/ledger-keys/<workspace>/<created_ms>.key`` (dir 0700, file 0600).

    The newest file is the active key. Each file holds the 32-byte seed, hex-encoded.
    """

    def __init__(self, data_dir: str | Path) -> None:
        self.root = Path(data_dir) / "ledger-keys"
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[SigningKey, PublicKey]] = {}

    def _dir(self, workspace: str) -> Path:
        path = self.root / _check_workspace(workspace)
        for d in (self.root, path):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            d.chmod(0o700)
        return path

    @staticmethod
    def _public(workspace: str, key: SigningKey, created_at: int) -> PublicKey:
        raw = bytes(key.verify_key)
        return PublicKey(workspace, key_id_for(raw), base64.b64encode(raw).decode(), created_at)

    def _load_active(self, workspace: str) -> tuple[SigningKey, PublicKey] | None:
        files = sorted(self._dir(workspace).glob("*.key"), key=lambda p: int(p.stem))
        if not files:
            return None
        newest = files[-1]
        if newest.stat().st_mode & 0o077:
            raise SigningError(f"{newest.name} is readable by others; it must be mode 0600")
        key = SigningKey(bytes.fromhex(newest.read_text().strip()))
        return key, self._public(workspace, key, int(newest.stem))

    def _create(self, workspace: str) -> tuple[SigningKey, PublicKey]:
        key = SigningKey.generate()
        created = _now_ms()
        directory = self._dir(workspace)
        while (directory / f"{created}.key").exists():
            created += 1
        path = directory / f"{created}.key"
        # O_EXCL + 0600 from the start: the seed is never on disk with wider permissions.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(bytes(key).hex())
        return key, self._public(workspace, key, created)

    def _active(self, workspace: str) -> tuple[SigningKey, PublicKey]:
        with self._lock:
            found = self._cache.get(workspace) or self._load_active(workspace)
            if found is None:
                found = self._create(workspace)
            self._cache[workspace] = found
            return found

    def active_key(self, workspace: str) -> PublicKey:
        return self._active(workspace)[1]

    def sign(self, workspace: str, message: bytes) -> tuple[str, bytes]:
        key, public = self._active(workspace)
        return public.key_id, key.sign(message).signature

    def rotate(self, workspace: str) -> PublicKey:
        with self._lock:
            found = self._create(workspace)
            self._cache[workspace] = found
            return found[1]

    def all_keys(self, workspace: str) -> list[PublicKey]:
        out = []
        for path in sorted(self._dir(workspace).glob("*.key"), key=lambda p: int(p.stem)):
            key = SigningKey(bytes.fromhex(path.read_text().strip()))
            out.append(self._public(workspace, key, int(path.stem)))
        return out


class KmsSigner:
    """Ed25519 keys in AWS KMS (ECC_NIST_EDWARDS25519); the private key never leaves KMS.

    Each workspace's active key is found by the alias ``alias/claros-ledger-<workspace>``;
    keys carry the tag ``claros:workspace``. Signing uses ED25519_SHA_512 with
    MessageType RAW, which gives a plain Ed25519 signature (ED25519_PH_SHA_512 would not).
    """

    ALIAS_PREFIX = "alias/claros-ledger-"

    def __init__(self, kms: KMSClient, *, signer_role_arn: str = "") -> None:
        self.kms = kms
        # When set (AWS: the template's signer role), each new key's policy lets that role
        # alone sign: the account administers the key but cannot sign with it, and no IAM
        # policy, tag or grant can change that short of rewriting the key policy.
        self.signer_role_arn = signer_role_arn
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, PublicKey]] = {}

    def _alias(self, workspace: str) -> str:
        return self.ALIAS_PREFIX + _check_workspace(workspace)

    def _describe(self, kms_key_id: str, workspace: str) -> tuple[str, PublicKey]:
        meta = self.kms.describe_key(KeyId=kms_key_id)["KeyMetadata"]
        der = self.kms.get_public_key(KeyId=kms_key_id)["PublicKey"]
        raw = der[-32:]  # SubjectPublicKeyInfo for Ed25519: 12 bytes of header + the key
        created = int(meta["CreationDate"].timestamp() * 1000)
        public = PublicKey(workspace, key_id_for(raw), base64.b64encode(raw).decode(), created)
        return meta["KeyId"], public

    def key_policy(self) -> dict[str, object] | None:
        """The policy of each new key: the account may do everything but sign (and grant);
        the signer role may sign and read the public key. None: KMS's default policy."""
        role = self.signer_role_arn
        if not role:
            return None
        account_root = role.split(":role/", 1)[0] + ":root"
        return {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "AccountAdministersButCannotSign",
                    "Effect": "Allow",
                    "Principal": {"AWS": account_root},
                    "NotAction": ["kms:Sign", "kms:CreateGrant"],
                    "Resource": "*",
                },
                {
                    "Sid": "OnlyTheSignerRoleSigns",
                    "Effect": "Allow",
                    "Principal": {"AWS": role},
                    "Action": ["kms:Sign", "kms:GetPublicKey", "kms:DescribeKey"],
                    "Resource": "*",
                },
            ],
        }

    def _create_key(self, workspace: str) -> str:
        import json

        policy = self.key_policy()
        extra: dict[str, object] = {}
        if policy is not None:
            # The signer role may not rewrite the policy it is given (no PutKeyPolicy), so
            # KMS's lockout check must be told the account keeps that right.
            extra = {"Policy": json.dumps(policy), "BypassPolicyLockoutSafetyCheck": True}
        made = self.kms.create_key(
            KeySpec="ECC_NIST_EDWARDS25519",
            KeyUsage="SIGN_VERIFY",
            Description=f"Claros ledger checkpoints for workspace {workspace}",
            Tags=[
                {"TagKey": "claros:workspace", "TagValue": workspace},
                {"TagKey": "claros:purpose", "TagValue": "ledger-checkpoint"},
            ],
            **extra,  # type: ignore[arg-type]
        )
        return str(made["KeyMetadata"]["KeyId"])

    def _active(self, workspace: str) -> tuple[str, PublicKey]:
        with self._lock:
            cached = self._cache.get(workspace)
            if cached:
                return cached
            alias = self._alias(workspace)
            try:
                target = self.kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"]
            except self.kms.exceptions.NotFoundException:
                target = self._create_key(workspace)
                try:
                    self.kms.create_alias(AliasName=alias, TargetKeyId=target)
                except self.kms.exceptions.AlreadyExistsException:
                    # Another function made the workspace's key first: use theirs. Ours is
                    # left unaliased (no role may delete keys: docs/deploy.md).
                    target = self.kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"]
            found = self._describe(target, workspace)
            self._cache[workspace] = found
            return found

    def active_key(self, workspace: str) -> PublicKey:
        with _kms_errors(workspace):
            return self._active(workspace)[1]

    def sign(self, workspace: str, message: bytes) -> tuple[str, bytes]:
        if len(message) > 4096:
            raise SigningError("KMS signs RAW messages of at most 4096 bytes")
        with _kms_errors(workspace):
            kms_key, public = self._active(workspace)
            signed = self.kms.sign(
                KeyId=kms_key,
                Message=message,
                MessageType="RAW",
                SigningAlgorithm="ED25519_SHA_512",
            )
        return public.key_id, bytes(signed["Signature"])

    def rotate(self, workspace: str) -> PublicKey:
        alias = self._alias(workspace)
        self._active(workspace)  # make sure there is an alias to move
        target = self._create_key(workspace)
        self.kms.update_alias(AliasName=alias, TargetKeyId=target)
        with self._lock:
            self._cache[workspace] = self._describe(target, workspace)
            return self._cache[workspace][1]
