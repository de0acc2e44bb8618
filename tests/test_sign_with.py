"""``Signer.sign_with``: a signature by a named key, the active one or one a rotation
replaced (an evidence export streamed across a rotate-key signs with the key it listed),
on the file signer and on KMS (moto); a key the signer does not hold is a SigningError."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from claros.ledger import PublicKey, verify_signature
from claros.signing import FileSigner, KmsSigner, Signer, SigningError

WS = "acme"


def _signs(signer: Signer, key: PublicKey) -> None:
    signature = signer.sign_with(WS, key.key_id, b"the export's sha256")
    assert verify_signature(key, b"the export's sha256", base64.b64encode(signature).decode())


def _rotation_keeps_the_old_key_at_hand(signer: Signer) -> None:
    old = signer.active_key(WS)
    _signs(signer, old)
    new = signer.rotate(WS)
    assert new.key_id != old.key_id
    _signs(signer, old)  # the key the export listed before the rotation
    _signs(signer, new)
    assert signer.sign(WS, b"x")[0] == new.key_id  # everything else: the active key
    with pytest.raises(SigningError, match="no ledger key ed25519:0000"):
        signer.sign_with(WS, "ed25519:0000000000000000", b"x")


def test_file_signer_signs_with_a_rotated_key(tmp_path: Path) -> None:
    _rotation_keeps_the_old_key_at_hand(FileSigner(tmp_path))


def test_file_signer_sees_a_rotation_made_by_another_process(tmp_path: Path) -> None:
    server = FileSigner(tmp_path)
    old = server.active_key(WS)
    FileSigner(tmp_path).rotate(WS)  # rotate-key, in its own process
    _signs(server, old)
    assert server.sign(WS, b"x")[0] != old.key_id


def test_kms_signer_signs_with_a_rotated_key(kms_ed25519: Any) -> None:
    _rotation_keeps_the_old_key_at_hand(KmsSigner(kms_ed25519))


def test_kms_signer_refuses_a_message_kms_cannot_sign(kms_ed25519: Any) -> None:
    signer = KmsSigner(kms_ed25519)
    with pytest.raises(SigningError, match="4096"):
        signer.sign_with(WS, signer.active_key(WS).key_id, b"x" * 4097)
