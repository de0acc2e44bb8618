"""FileSigner: the local workspace keys in <data>/ledger-keys/."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from nacl.signing import SigningKey, VerifyKey

from claros.ledger import PublicKey, key_id_for, verify_signature
from claros.signing import FileSigner, SigningError

WS = "acme"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_key_is_made_on_first_use_with_tight_permissions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    signer = FileSigner(data)
    assert not (data / "ledger-keys").exists()  # nothing until a key is needed
    public = signer.active_key(WS)
    root, directory = data / "ledger-keys", data / "ledger-keys" / WS
    files = list(directory.glob("*.key"))
    assert len(files) == 1 and files[0].stem == str(public.created_at)
    assert _mode(root) == 0o700 and _mode(directory) == 0o700
    assert _mode(files[0]) == 0o600
    seed = bytes.fromhex(files[0].read_text())
    assert len(seed) == 32
    raw = bytes(SigningKey(seed).verify_key)
    assert base64.b64decode(public.public_key) == raw
    assert public.key_id == key_id_for(raw) and public.workspace == WS


def test_signatures_verify(tmp_path: Path) -> None:
    signer = FileSigner(tmp_path)
    message = b"claros-ledger-checkpoint\nacme\n100\nhash\n1"
    key_id, signature = signer.sign(WS, message)
    public = signer.active_key(WS)
    assert key_id == public.key_id and len(signature) == 64
    VerifyKey(base64.b64decode(public.public_key)).verify(message, signature)
    assert verify_signature(public, message, base64.b64encode(signature).decode())
    assert not verify_signature(public, message + b"!", base64.b64encode(signature).decode())


def test_same_key_across_instances(tmp_path: Path) -> None:
    first = FileSigner(tmp_path).active_key(WS)
    second = FileSigner(tmp_path)
    assert second.active_key(WS) == first
    key_id, signature = second.sign(WS, b"m")
    assert key_id == first.key_id
    assert verify_signature(first, b"m", base64.b64encode(signature).decode())
    assert len(list((tmp_path / "ledger-keys" / WS).glob("*.key"))) == 1
    assert FileSigner(tmp_path).active_key("other").key_id != first.key_id


def test_rotation_keeps_old_keys(tmp_path: Path) -> None:
    signer = FileSigner(tmp_path)
    old = signer.active_key(WS)
    _, old_signature = signer.sign(WS, b"m")
    new = signer.rotate(WS)
    assert new.key_id != old.key_id and new.created_at > old.created_at
    assert signer.active_key(WS) == new
    new_id, new_signature = signer.sign(WS, b"m")
    assert new_id == new.key_id
    assert signer.all_keys(WS) == [old, new]
    assert FileSigner(tmp_path).active_key(WS) == new  # the newest file is the active key
    assert verify_signature(old, b"m", base64.b64encode(old_signature).decode())
    assert verify_signature(new, b"m", base64.b64encode(new_signature).decode())
    assert all(_mode(p) == 0o600 for p in (tmp_path / "ledger-keys" / WS).glob("*.key"))


def test_refuses_a_key_file_others_can_read(tmp_path: Path) -> None:
    FileSigner(tmp_path).active_key(WS)
    [key_file] = (tmp_path / "ledger-keys" / WS).glob("*.key")
    key_file.chmod(0o644)
    with pytest.raises(SigningError, match="0600"):
        FileSigner(tmp_path).active_key(WS)
    with pytest.raises(SigningError):
        FileSigner(tmp_path).sign(WS, b"m")
    key_file.chmod(0o600)
    assert FileSigner(tmp_path).active_key(WS)


def test_tightens_a_key_directory_made_too_open(tmp_path: Path) -> None:
    root = tmp_path / "ledger-keys"
    (root / WS).mkdir(parents=True, mode=0o755)
    root.chmod(0o755)
    (root / WS).chmod(0o755)
    FileSigner(tmp_path).active_key(WS)
    assert _mode(root) == 0o700 and _mode(root / WS) == 0o700


@pytest.mark.parametrize(
    "workspace",
    ["", "Acme", "../acme", "acme/../../etc", "a" * 64, "-acme", "acme space"],
    ids=["empty", "upper", "dotdot", "path", "too-long", "dash-first", "space"],
)
def test_bad_workspace_names_are_refused(tmp_path: Path, workspace: str) -> None:
    signer = FileSigner(tmp_path)
    with pytest.raises(SigningError, match="workspace"):
        signer.active_key(workspace)
    with pytest.raises(SigningError):
        signer.sign(workspace, b"m")
    with pytest.raises(SigningError):
        signer.rotate(workspace)
    assert not any((tmp_path / "ledger-keys").glob("**/*.key"))


def test_rotation_lets_the_old_key_vouch_for_the_new_one(tmp_path: Path) -> None:
    signer = FileSigner(tmp_path)
    old = signer.active_key(WS)
    seen: list[tuple[str, str]] = []

    def vouch(new: PublicKey) -> None:
        # The new key is not active yet, nor on disk: the old one still signs.
        seen.append((new.key_id, signer.sign(WS, b"m")[0]))
        assert FileSigner(tmp_path).active_key(WS) == old

    new = signer.rotate(WS, vouch)
    assert seen == [(new.key_id, old.key_id)]
    assert signer.sign(WS, b"m")[0] == new.key_id == FileSigner(tmp_path).active_key(WS).key_id
