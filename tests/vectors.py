"""Typed loaders for the vector files in tests/data/ (pyca style: vectors as data).

The files are plain JSON so any other implementation of canonical JSON or of the ledger can
reuse them; see each file's "description" for the formulas they pin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


def _load(name: str) -> dict[str, Any]:
    with (DATA / name).open(encoding="utf-8") as f:
        data = json.load(f)
    assert isinstance(data, dict), f"{name}: expected a JSON object at the top"
    return data


@dataclass(frozen=True, slots=True)
class CanonicalVector:
    name: str
    input: str  # JSON text, numbers exactly as written
    canonical: str  # expected canonical text (encode as UTF-8 for the bytes)
    note: str = ""


@dataclass(frozen=True, slots=True)
class InvalidCanonicalVector:
    name: str
    input: str  # JSON text that parses, but cannot be written as canonical JSON
    reason: str


@dataclass(frozen=True, slots=True)
class CanonicalVectors:
    valid: tuple[CanonicalVector, ...]
    invalid: tuple[InvalidCanonicalVector, ...]


def load_canonical_vectors() -> CanonicalVectors:
    data = _load("canonical_vectors.json")
    return CanonicalVectors(
        valid=tuple(
            CanonicalVector(v["name"], v["input"], v["canonical"], v.get("note", ""))
            for v in data["valid"]
        ),
        invalid=tuple(
            InvalidCanonicalVector(v["name"], v["input"], v["reason"]) for v in data["invalid"]
        ),
    )


@dataclass(frozen=True, slots=True)
class EntryVector:
    workspace: str
    seq: int
    kind: str
    ref_id: str
    ts: int
    record: str  # JSON text of the row
    canonical: str  # its canonical JSON
    hash_input: str  # the text hashed into `hash`
    payload_sha256: str
    prev_hash: str
    hash: str

    @property
    def name(self) -> str:
        return f"{self.workspace}-{self.seq}-{self.kind}"

    def entry_json(self) -> dict[str, Any]:
        """The entry as an export line carries it, without its record."""
        return {
            "workspace": self.workspace,
            "seq": self.seq,
            "kind": self.kind,
            "ref_id": self.ref_id,
            "ts": self.ts,
            "payload_sha256": self.payload_sha256,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }


@dataclass(frozen=True, slots=True)
class KeyVector:
    name: str
    seed: bytes  # the 32-byte Ed25519 private seed
    workspace: str
    public_key: str  # base64, raw 32 bytes
    key_id: str
    created_at: int


@dataclass(frozen=True, slots=True)
class CheckpointVector:
    workspace: str
    seq: int
    hash: str
    ts: int
    key_id: str
    signature: str  # base64
    message: bytes  # the exact signed bytes
    signed_with: str  # KeyVector.name

    def checkpoint_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "seq": self.seq,
            "hash": self.hash,
            "ts": self.ts,
            "key_id": self.key_id,
            "signature": self.signature,
        }


@dataclass(frozen=True, slots=True)
class LedgerVectors:
    chain: tuple[EntryVector, ...]  # one workspace's chain from seq 1
    entries: tuple[EntryVector, ...]  # lone entries (not a chain)
    keys: tuple[KeyVector, ...]
    checkpoints: tuple[CheckpointVector, ...]  # over `chain`

    def key(self, name: str) -> KeyVector:
        return next(k for k in self.keys if k.name == name)


def _entry(v: dict[str, Any]) -> EntryVector:
    return EntryVector(
        v["workspace"],
        v["seq"],
        v["kind"],
        v["ref_id"],
        v["ts"],
        v["record"],
        v["canonical"],
        v["hash_input"],
        v["payload_sha256"],
        v["prev_hash"],
        v["hash"],
    )


def load_ledger_vectors() -> LedgerVectors:
    data = _load("ledger_vectors.json")
    checkpoints = []
    for c in data["checkpoints"]:
        message = bytes.fromhex(c["message_hex"])
        assert message == c["message"].encode("utf-8"), "message and message_hex disagree"
        checkpoints.append(
            CheckpointVector(
                c["workspace"],
                c["seq"],
                c["hash"],
                c["ts"],
                c["key_id"],
                c["signature"],
                message,
                c["signed_with"],
            )
        )
    return LedgerVectors(
        chain=tuple(_entry(v) for v in data["chain"]),
        entries=tuple(_entry(v) for v in data["entries"]),
        keys=tuple(
            KeyVector(
                k["name"],
                bytes.fromhex(k["seed"]),
                k["workspace"],
                k["public_key"],
                k["key_id"],
                k["created_at"],
            )
            for k in data["keys"]
        ),
        checkpoints=tuple(checkpoints),
    )
