"""Who signs checkpoints: a key file on the server (local) or AWS KMS (cloud).

Both give plain RFC 8032 Ed25519 signatures that ``nacl`` verifies, and both name each key
by ``claros.ledger.key_id_for(raw public key)``. A workspace's key is made on first use.
Rotation makes a new key active; old public keys stay listed (the caller registers every
key it signs with in the store), so old checkpoints still verify.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from claros.ledger import PublicKey, key_id_for

if TYPE_CHECKING:  # the client package never imports boto3; only the KMS signer uses it
    from mypy_boto3_kms import KMSClient
    from nacl.signing import SigningKey

__all__ = ["FileSigner", "KmsSigner", "RotationPendingError", "Signer", "SigningError", "Vouch"]

# Called with a rotation's new public key while the old key is still the active one, so
# that the old key signs the checkpoint that introduces its successor (docs/ledger.md).
Vouch = Callable[[PublicKey], None]

_WORKSPACE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

log = logging.getLogger("claros.signing")


def _signing_key() -> type[SigningKey]:
    """PyNaCl's SigningKey, imported when a file key is read or made: only the file
    signer (local) holds keys; the Lambda functions sign with KMS and, like every module
    that imports this one, need not pay for PyNaCl at a cold start."""
    from nacl.signing import SigningKey

    return SigningKey


class SigningError(Exception):
    """The key could not be made, found or used."""


class RotationPendingError(SigningError):
    """A rotation stopped before its new key became active: the new key is announced in the
    chain, but no checkpoint of the old key covers that yet (in AWS the checkpoint function
    signs it, from the ledger's stream). ``resume`` names the new key (KMS: its key id), to
    go on with it rather than make another."""

    def __init__(self, message: str, resume: str = "") -> None:
        super().__init__(message)
        self.resume = resume


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

    def rotate(
        self, workspace: str, vouch: Vouch | None = None, resume: str | None = None
    ) -> PublicKey:
        """Make a new active key; the old one is kept for the record. ``vouch`` sees the
        new key before it becomes active (the old one still signs meanwhile). ``resume``
        names a key made by a rotation that stopped (RotationPendingError.resume): that key
        becomes the active one instead of a new one."""
        ...

    def sign_with(self, workspace: str, key_id: str, message: bytes) -> bytes:
        """A signature over ``message`` by the key ``key_id``: the active key, or one this
        signer made or used before a rotation. Only for what was fixed under that key
        before it rotated (an evidence export lists its keys before its entries, and signs
        its last line with the key it listed as active then). SigningError when that key is
        not at hand."""
        ...


def _key_dir_error(exc: OSError, directory: Path) -> SigningError:
    return SigningError(
        f"cannot write a new ledger key in {exc.filename or directory}: {exc.strerror or exc}"
    )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_workspace(workspace: str) -> str:
    if not _WORKSPACE.match(workspace):
        raise SigningError(f"not a workspace name: {workspace!r}")
    return workspace


_KEY_FILE = re.compile(r"^([0-9]{1,19})\.key$")


class _BadKeyFile(Exception):
    """A key file that holds no usable key (empty, not hex, not 32 bytes)."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSigner:
    """Keys in ``<data>/ledger-keys/<workspace>/<created_ms>.key`` (dir 0700, file 0600).

    Each file holds the 32-byte seed, hex-encoded. The newest file is the active key, read
    again whenever the directory's newest file changes (one listing per signature), so a
    server signs with the key ``rotate-key`` made in another process at once, and never
    with the key it replaced.

    A key file is written whole or not at all: a temporary file in the same directory,
    fsync, a hard link to its final name (which never replaces another key), fsync of the
    directory. A key file that holds no key (zero-length after a crash on another version,
    corrupt) is never the active key: it is skipped with a logged reason, left as it is
    for the operator, and a new key, newer than it, is made. A key file others may read is
    refused (SigningError) rather than used or replaced: that needs the operator too.
    Every failure to make, read or use a key, the disk's included, is a SigningError
    naming the file and the reason (the API answers 503 with it).
    """

    def __init__(self, data_dir: str | Path) -> None:
        self.root = Path(data_dir) / "ledger-keys"
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, SigningKey, PublicKey]] = {}  # by workspace

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

    @staticmethod
    def _files(directory: Path) -> list[tuple[int, Path]]:
        """The key files, oldest first. Other names are not keys: a temporary file is
        skipped quietly, anything else with a log line."""
        found = []
        for path in directory.iterdir():
            match = _KEY_FILE.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
            elif path.name.endswith(".key"):
                log.warning("ledger key file %s skipped: not named <created_ms>.key", path)
        return sorted(found)

    @staticmethod
    def _read(path: Path) -> SigningKey:
        if path.stat().st_mode & 0o077:
            raise SigningError(f"{path.name} is readable by others; it must be mode 0600")
        text = path.read_bytes().strip()
        if not text:
            raise _BadKeyFile("the file is empty")
        try:
            seed = bytes.fromhex(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise _BadKeyFile("the file does not hold a hex-encoded key") from exc
        if len(seed) != 32:
            raise _BadKeyFile(f"the file holds {len(seed)} bytes, not a 32-byte key")
        return _signing_key()(seed)

    def _create(
        self, workspace: str, after: int = 0, key: SigningKey | None = None, created: int = 0
    ) -> tuple[str, SigningKey, PublicKey]:
        key = key or _signing_key().generate()
        directory = self._dir(workspace)
        # Newer than every file there, bad ones too (a rotation names its time first).
        created = max(created or _now_ms(), after + 1)
        temp = directory / f".new-{created}-{secrets.token_hex(4)}.tmp"
        # O_EXCL + 0600 from the start: the seed is never on disk with wider permissions.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            try:
                _write_all(fd, bytes(key).hex().encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            while True:
                try:
                    os.link(temp, directory / f"{created}.key")  # never replaces a key
                    break
                except FileExistsError:
                    created += 1
        finally:
            temp.unlink(missing_ok=True)
        _fsync_dir(directory)
        return f"{created}.key", key, self._public(workspace, key, created)

    def _active(self, workspace: str) -> tuple[SigningKey, PublicKey]:
        with self._lock:
            try:
                found = self._find_or_create(workspace)
            except OSError as exc:
                where = exc.filename or self.root / workspace
                raise SigningError(
                    f"cannot use the ledger key in {where}: {exc.strerror or exc}"
                ) from exc
            self._cache[workspace] = found
            return found[1], found[2]

    def _find_or_create(self, workspace: str) -> tuple[str, SigningKey, PublicKey]:
        files = self._files(self._dir(workspace))
        if not files:
            return self._create(workspace)
        created, newest = files[-1]
        cached = self._cache.get(workspace)
        if cached is not None and cached[0] == newest.name:
            return cached
        try:
            key = self._read(newest)
        except _BadKeyFile as exc:
            # Kept as it is (an operator may want to look at it); a new key replaces it as
            # the active one. An older key is not used again: it was rotated away from.
            log.warning(
                "ledger key file %s skipped: %s; it is left as it is, and a new key is made",
                newest,
                exc,
            )
            return self._create(workspace, after=created)
        return newest.name, key, self._public(workspace, key, created)

    def active_key(self, workspace: str) -> PublicKey:
        return self._active(workspace)[1]

    def sign(self, workspace: str, message: bytes) -> tuple[str, bytes]:
        key, public = self._active(workspace)
        return public.key_id, key.sign(message).signature

    def sign_with(self, workspace: str, key_id: str, message: bytes) -> bytes:
        key, public = self._active(workspace)
        if public.key_id == key_id:
            return key.sign(message).signature
        try:
            files = self._files(self._dir(workspace))
            for created, path in reversed(files):  # a rotation's old key: among the newest
                try:
                    older = self._read(path)
                except _BadKeyFile:
                    continue
                if self._public(workspace, older, created).key_id == key_id:
                    return older.sign(message).signature
        except OSError as exc:
            raise _key_dir_error(exc, self.root / workspace) from exc
        raise SigningError(f"no ledger key {key_id} for workspace {workspace}")

    def rotate(
        self, workspace: str, vouch: Vouch | None = None, resume: str | None = None
    ) -> PublicKey:
        if resume:
            # A local rotation signs its own entry at once, so it never stops half way.
            raise SigningError("only a KMS key is resumed (--key); locally rotate-key makes one")
        try:
            files = self._files(self._dir(workspace))
        except OSError as exc:
            raise _key_dir_error(exc, self.root / workspace) from exc
        after = files[-1][0] if files else 0
        key, created = _signing_key().generate(), max(_now_ms(), after + 1)
        if vouch is not None:  # not on disk yet: nothing signs with it before this returns
            vouch(self._public(workspace, key, created))
        with self._lock:
            try:
                found = self._create(workspace, after=after, key=key, created=created)
            except OSError as exc:
                raise _key_dir_error(exc, self.root / workspace) from exc
            self._cache[workspace] = found
            return found[2]

    def all_keys(self, workspace: str) -> list[PublicKey]:
        """Every usable key, oldest first; a file holding no key is skipped, logged."""
        out = []
        for created, path in self._files(self._dir(workspace)):
            try:
                key = self._read(path)
            except _BadKeyFile as exc:
                log.warning("ledger key file %s skipped: %s", path, exc)
                continue
            out.append(self._public(workspace, key, created))
        return out


# How long a KMS signer trusts the alias it read (seconds): a warm Lambda container would
# otherwise sign with the key it first found for as long as it lives, after rotate-key
# moved the alias to the new key. One DescribeKey a minute per container and workspace.
KEY_CACHE_S = 60.0


class KmsSigner:
    """Ed25519 keys in AWS KMS (ECC_NIST_EDWARDS25519); the private key never leaves KMS.

    Each workspace's active key is found by the alias ``<alias_prefix><workspace>``
    (``alias/claros-ledger-<workspace>`` by default; a stack gives its own prefix,
    ``alias/claros/<stack>/ledger-``, since aliases are shared by the account's region);
    keys carry the tag ``claros:workspace``. Signing uses ED25519_SHA_512 with
    MessageType RAW, which gives a plain Ed25519 signature (ED25519_PH_SHA_512 would not).
    """

    ALIAS_PREFIX = "alias/claros-ledger-"

    def __init__(
        self,
        kms: KMSClient,
        *,
        signer_role_arn: str = "",
        alias_prefix: str = ALIAS_PREFIX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kms = kms
        self._clock = clock  # seconds, for KEY_CACHE_S
        self.alias_prefix = alias_prefix
        # When set (AWS: the template's signer role), each new key's policy lets that role
        # alone sign: the account administers the key but cannot sign with it, and no IAM
        # policy, tag or grant can change that short of rewriting the key policy.
        self.signer_role_arn = signer_role_arn
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, PublicKey]] = {}
        # When each workspace's alias was last read (``clock``): see KEY_CACHE_S.
        self._read_at: dict[str, float] = {}
        # (workspace, key id) -> KMS key id, for every key this signer described.
        self._known: dict[tuple[str, str], str] = {}

    def _alias(self, workspace: str) -> str:
        return self.alias_prefix + _check_workspace(workspace)

    def _describe(self, kms_key_id: str, workspace: str) -> tuple[str, PublicKey]:
        meta = self.kms.describe_key(KeyId=kms_key_id)["KeyMetadata"]
        der = self.kms.get_public_key(KeyId=kms_key_id)["PublicKey"]
        raw = der[-32:]  # SubjectPublicKeyInfo for Ed25519: 12 bytes of header + the key
        created = int(meta["CreationDate"].timestamp() * 1000)
        public = PublicKey(workspace, key_id_for(raw), base64.b64encode(raw).decode(), created)
        self._known[(workspace, public.key_id)] = meta["KeyId"]
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
            now = self._clock()
            if cached and now - self._read_at[workspace] < KEY_CACHE_S:
                return cached
            alias = self._alias(workspace)
            try:
                target = self.kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"]
                if cached and cached[0] == target:
                    self._read_at[workspace] = now
                    return cached
            except self.kms.exceptions.NotFoundException:
                target = self._create_key(workspace)
                try:
                    self.kms.create_alias(AliasName=alias, TargetKeyId=target)
                except self.kms.exceptions.AlreadyExistsException:
                    # Another function made the workspace's key first: use theirs. Ours is
                    # left unaliased (no role may delete keys: docs/deploy.md).
                    target = self.kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"]
            found = self._describe(target, workspace)
            self._cache[workspace], self._read_at[workspace] = found, now
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

    def sign_with(self, workspace: str, key_id: str, message: bytes) -> bytes:
        if len(message) > 4096:
            raise SigningError("KMS signs RAW messages of at most 4096 bytes")
        with _kms_errors(workspace):
            self._active(workspace)
            kms_key = self._known.get((workspace, key_id))
            if kms_key is None:
                raise SigningError(f"no ledger key {key_id} for workspace {workspace}")
            signed = self.kms.sign(
                KeyId=kms_key,
                Message=message,
                MessageType="RAW",
                SigningAlgorithm="ED25519_SHA_512",
            )
        return bytes(signed["Signature"])

    def _resumable(self, workspace: str, kms_key: str, active: str) -> str:
        """``kms_key`` if it can become the workspace's key: a KMS Ed25519 signing key made
        for this workspace (its tag) that is not the active one; else a SigningError."""
        try:
            meta = self.kms.describe_key(KeyId=kms_key)["KeyMetadata"]
        except self.kms.exceptions.NotFoundException as exc:
            raise SigningError(f"no KMS key {kms_key}") from exc
        target = str(meta["KeyId"])
        if meta.get("KeySpec") != "ECC_NIST_EDWARDS25519" or meta.get("KeyUsage") != "SIGN_VERIFY":
            raise SigningError(f"KMS key {target} is not an Ed25519 signing key")
        if meta.get("KeyState") != "Enabled":
            raise SigningError(f"KMS key {target} is {meta.get('KeyState')}, not Enabled")
        tags = self.kms.list_resource_tags(KeyId=target).get("Tags", [])
        made_for = {t["TagKey"]: t["TagValue"] for t in tags}.get("claros:workspace")
        if made_for != workspace:
            raise SigningError(
                f"KMS key {target} was not made for workspace {workspace} "
                f"(its claros:workspace tag is {made_for or 'absent'})"
            )
        if target == active:
            raise SigningError(f"KMS key {target} is already workspace {workspace}'s key")
        return target

    def rotate(
        self, workspace: str, vouch: Vouch | None = None, resume: str | None = None
    ) -> PublicKey:
        alias = self._alias(workspace)
        with _kms_errors(workspace):
            active = self._active(workspace)[0]  # make sure there is an alias to move
            if resume:
                target = self._resumable(workspace, resume, active)
            else:
                target = self._create_key(workspace)
            if vouch is not None:  # the alias still names the old key meanwhile
                try:
                    vouch(self._describe(target, workspace)[1])
                except RotationPendingError as exc:
                    raise RotationPendingError(str(exc), resume=target) from exc
            self.kms.update_alias(AliasName=alias, TargetKeyId=target)
            with self._lock:
                self._cache[workspace] = self._describe(target, workspace)
                self._read_at[workspace] = self._clock()
                return self._cache[workspace][1]
