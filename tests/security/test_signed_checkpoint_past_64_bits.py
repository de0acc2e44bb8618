"""A validly signed checkpoint whose seq or ts does not fit in 64 bits stops the verify.

``claros verify --export`` keeps each checkpoint whose signature holds in compact arrays
of 64-bit integers; a checkpoint line whose ``ts`` (or ``seq``) is 2**63, signed with the
workspace's key as the operator can (THREATS.md §4: the key file is theirs), raised an
OverflowError nobody caught: a traceback (``python -m claros_guard.verify``) or
``unexpected error`` instead of a failure naming the line. Now such a number is a
malformed line (exit 1), like any other number that is not a seq or a time."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from claros.ledger import checkpoint_message
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys
from tests.security.test_ledger_rewrites import _checks, _export


def _resigned(services: Services, lines: list[bytes]) -> bytes:
    """The lines, and a signature line over them by the workspace's own key."""
    body = b"".join(lines)
    digest = hashlib.sha256(body).digest()
    key_id, signature = services.signer.sign(WORKSPACE, digest)
    last = {"type": "signature", "sha256": digest.hex(), "algorithm": "Ed25519",
            "key_id": key_id, "signature": base64.b64encode(signature).decode()}  # fmt: skip
    return body + (json.dumps(last, separators=(",", ":")) + "\n").encode()


@pytest.mark.parametrize("field", ["seq", "ts"])
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_signed_checkpoint_past_64_bits_is_a_malformed_line(
    http: httpx.Client, keys: Keys, services: Services, tmp_path: Path, field: str
) -> None:
    _checks(http, keys.agent, 6)
    lines = _export(http, keys, tmp_path / "e.jsonl").read_bytes().splitlines(keepends=True)
    at = max(i for i, ln in enumerate(lines) if ln.startswith(b'{"type":"checkpoint"'))
    cp = json.loads(lines[at])
    cp[field] = 2**63
    message = checkpoint_message(cp["workspace"], cp["seq"], cp["hash"], cp["ts"])
    cp["key_id"], signature = services.signer.sign(WORKSPACE, message)
    cp["signature"] = base64.b64encode(signature).decode()
    lines.insert(at + 1, (json.dumps(cp, separators=(",", ":")) + "\n").encode())
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(_resigned(services, lines[:-1]))
    got = subprocess.run(
        [sys.executable, "-m", "claros_guard.verify", "--export", str(forged)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 1, (got.returncode, got.stdout, got.stderr[-500:])
    assert f"malformed line: field {field} must be" in got.stdout, got.stdout
