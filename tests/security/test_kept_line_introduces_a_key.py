"""A ``kept`` line in an export introduces a key nobody pinned (THREATS.md §4).

The attack: the auditor saved checkpoints (and so pinned the workspace key K1). Later the
operator rewrites a record after the last saved checkpoint, re-chains the rest, and
re-signs the later checkpoints and the export with a key of their own, K2. On its own
that fails: K2 is not pinned and no checkpoint signed by K1 introduced it. But the
operator adds one line before the entries, ``{"type":"kept","seq":0,"kind":"public_key",
...}`` holding K2, in a log that was never pruned. The verifier takes a kept public_key
record as a key introduction at its seq (0), and the genuine K1 checkpoint at seq 5
"covers" seq 0, so K2 becomes trusted from seq 0 on: every K2 checkpoint and the export's
K2 signature pass, and ``claros verify --checkpoints`` exits 0 on a rewritten log.

A kept record is only ever accounted for by a prune entry that lists it; in a log with no
prune (or at a seq no prune covers) it vouches for nothing, least of all a key."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from nacl.signing import SigningKey

from claros.canonical import canonical_bytes
from claros.ledger import entry_hash, key_id_for
from claros_guard.verify import main as verify
from tests.api.conftest import Keys
from tests.security.test_ledger_rewrites import _checks, _export


def _line(data: dict) -> bytes:
    return (json.dumps(data, separators=(",", ":")) + "\n").encode()


def _rewrite(content: bytes, after: int, edit_seq: int, key: SigningKey, kept: bool) -> bytes:
    """The export with the record at ``edit_seq`` changed, the chain from there recomputed,
    every checkpoint past ``after`` and the whole re-signed with ``key``; with ``kept``,
    one kept public_key line (seq 0) holding ``key`` before the entries."""
    raw = bytes(key.verify_key)
    key_id = key_id_for(raw)
    b64 = base64.b64encode(raw).decode()
    lines = content.splitlines(keepends=True)[:-1]  # without the signature line
    header, rest = json.loads(lines[0]), lines[1:]
    workspace = header["workspace"]
    keys_out: list[bytes] = []
    cps: dict[int, dict] = {}
    entries: list[dict] = []
    for line in rest:
        data = json.loads(line)
        if data.get("type") == "public_key":
            keys_out.append(line)
        elif data.get("type") == "checkpoint":
            cps[data["seq"]] = data
        else:
            entries.append(data)
    keys_out.append(
        _line(
            {
                "type": "public_key",
                "workspace": workspace,
                "key_id": key_id,
                "public_key": b64,
                "created_at": 1,
                "algorithm": "Ed25519",
            }
        )
    )
    prev = None
    hashes: dict[int, str] = {}
    for e in entries:
        if e["seq"] == edit_seq:
            e["event"] = {**e["event"], "result": "allow", "rules": []}
        if e["seq"] >= edit_seq:
            e["payload_sha256"] = hashlib.sha256(canonical_bytes(e["event"])).hexdigest()
            e["prev_hash"] = prev if prev is not None else e["prev_hash"]
            e["hash"] = entry_hash(
                workspace,
                e["seq"],
                e["kind"],
                e["ref_id"],
                e["ts"],
                e["payload_sha256"],
                e["prev_hash"],
            )
        prev = e["hash"]
        hashes[e["seq"]] = e["hash"]
    cp_out: list[bytes] = []
    for seq, cp in sorted(cps.items()):
        if seq > after:
            cp["hash"] = hashes[seq]
            message = "\n".join(
                ["claros-ledger-checkpoint", workspace, str(seq), cp["hash"], str(cp["ts"])]
            ).encode()
            cp.update(
                key_id=key_id, signature=base64.b64encode(key.sign(message).signature).decode()
            )
        cp_out.append(_line(cp))
    kept_out = []
    if kept:
        record = {
            "key_id": key_id,
            "public_key": b64,
            "created_at": 1,
            "algorithm": "Ed25519",
            "workspace": workspace,
        }
        kept_out.append(
            _line(
                {"type": "kept", "seq": 0, "kind": "public_key", "ref_id": key_id, "event": record}
            )
        )
    entry_lines = []
    for e in entries:
        event = e.pop("event")
        text = json.dumps(e, separators=(",", ":"))[:-1]
        entry_lines.append(text.encode() + b',"event":' + canonical_bytes(event) + b"}\n")
    header["head_hash"] = prev
    body = b"".join([_line(header), *keys_out, *cp_out, *kept_out, *entry_lines])
    digest = hashlib.sha256(body).digest()
    last = {
        "type": "signature",
        "sha256": digest.hex(),
        "algorithm": "Ed25519",
        "key_id": key_id,
        "signature": base64.b64encode(key.sign(digest).signature).decode(),
    }
    return body + _line(last)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``claros verify`` as the auditor runs it: its own process."""
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.verify", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_kept_line_cannot_introduce_an_unpinned_key(
    http: httpx.Client, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _checks(http, keys.agent, 6)
    first = _export(http, keys, tmp_path / "first.jsonl")
    saved = tmp_path / "saved.json"
    assert verify(["--export", str(first), "--save", str(saved)]) == 0
    last_saved = max(cp["seq"] for cp in json.loads(saved.read_text())["checkpoints"])
    _checks(http, keys.agent, 10, start=100)
    later = _export(http, keys, tmp_path / "later.jsonl")
    assert verify(["--export", str(later), "--checkpoints", str(saved)]) == 0
    edit = last_saved + 2
    other = SigningKey(hashlib.sha256(b"the operator's own key").digest())
    unknown = key_id_for(bytes(other.verify_key))

    # Re-signed with K2 alone: caught, K2 is not pinned.
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(_rewrite(later.read_bytes(), last_saved, edit, other, kept=False))
    capsys.readouterr()
    assert verify(["--export", str(plain), "--checkpoints", str(saved), "--workers", "1"]) == 1
    assert f"signed by key {unknown}, which is not pinned" in capsys.readouterr().out

    # The same rewrite with one kept public_key line at seq 0 (the log was never pruned).
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(_rewrite(later.read_bytes(), last_saved, edit, other, kept=True))
    got = _cli("--export", str(forged), "--checkpoints", str(saved))
    assert got.returncode == 1, f"rewritten, re-signed by an unpinned key, verified:\n{got.stdout}"
    assert unknown in got.stdout, got.stdout
