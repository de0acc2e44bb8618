"""Makes the corpus of evidence exports in ``tests/data/exports/`` (not a test module).

    .venv/bin/python -m tests.export_corpus      # rewrite the files; a test checks they
                                                 # are what this script makes

Each file reproduces one failure class ``claros verify`` must catch (named after it), or
is a valid export; ``manifest.json`` says, per file, the arguments, the exit code and a
pattern the output must hold. Everything is deterministic: fixed timestamps and a fixed
Ed25519 seed (``UnsafeFixedSigner``: test vectors only, never a server). A tampered export
is re-signed with the workspace's own key, as a server that rewrote its own log would do,
so that each file shows its one failure, not also a broken export signature (two files
cover that signature itself).

The worked example of docs/evidence-format.md is ``example.jsonl``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from claros.config import Settings
from claros.evidence.export import export_lines, prepare_export
from claros.ledger import (
    Checkpoint,
    Entry,
    PublicKey,
    checkpoint_message,
    kept_digest,
    key_id_for,
)
from claros.signing import SigningError, Vouch
from claros.store.base import NewRecord, Store
from claros.store.sqlite import SqliteStore
from claros.wiring import Services

OUT = Path(__file__).resolve().parent / "data" / "exports"
WS = "acme"
T0 = 1_790_812_800_000  # 2026-10-01T00:00:00Z
EXPORTED_AT = T0 + 30 * 86_400_000
SEED = hashlib.sha256(b"claros test vectors: the workspace key").digest()
OTHER_SEED = hashlib.sha256(b"claros test vectors: someone else's key").digest()

Lines = list[bytes]


class UnsafeFixedSigner:
    """A Signer whose key comes from a fixed seed, so the vectors come out the same every
    time. Anyone can read the seed here: never use it for anything but test vectors."""

    def __init__(self, seed: bytes = SEED, created_at: int = T0 - 86_400_000) -> None:
        self.key = SigningKey(seed)
        self.created_at = created_at

    def active_key(self, workspace: str) -> PublicKey:
        raw = bytes(self.key.verify_key)
        return PublicKey(
            workspace, key_id_for(raw), base64.b64encode(raw).decode(), self.created_at
        )

    def sign(self, workspace: str, message: bytes) -> tuple[str, bytes]:
        return self.active_key(workspace).key_id, self.key.sign(message).signature

    def sign_with(self, workspace: str, key_id: str, message: bytes) -> bytes:
        if key_id != self.active_key(workspace).key_id:
            raise SigningError(f"no ledger key {key_id}")
        return self.key.sign(message).signature

    def rotate(
        self, workspace: str, vouch: Vouch | None = None, resume: str | None = None
    ) -> PublicKey:
        raise NotImplementedError("a fixed key does not rotate")

    def checkpoint(self, entry: Entry, ts: int) -> Checkpoint:
        key_id, signature = self.sign(
            entry.workspace, checkpoint_message(entry.workspace, entry.seq, entry.hash, ts)
        )
        return Checkpoint(
            entry.workspace, entry.seq, entry.hash, ts, key_id, base64.b64encode(signature).decode()
        )


# --- the ledgers -------------------------------------------------------------------------
def _rule(version: int, limit: int) -> dict[str, Any]:
    return {
        "workspace": WS,
        "rule_id": "refund-half",
        "version": version,
        "hash": hashlib.sha256(f"refund-half v{version}".encode()).hexdigest(),
        "rule": {"id": "refund-half", "workflow_id": "refunds", "app": "shop",
                 "tools": ["refund_create"], "when": f"amount > {limit}", "response": "ask",
                 "title": "Large refunds need the owner's approval",
                 "owners": ["dana@acme.test"]},
        "confirm": {"made_by": "manual", "confirmed_by": "admin@acme.test",
                    "confirmed_at": T0 + version},
    }  # fmt: skip


def _check(n: int, money: str, result: str, **more: Any) -> dict[str, Any]:
    row = {
        "check_id": f"chk_{n:04d}",
        "workspace": WS,
        "ts": T0 + n * 60_000,
        "app": "shop",
        "tool": "refund_create",
        "arguments": {"order": f"SO-{1180 + n}", "amount": Decimal(money), "currency": "EUR"},
        "agent": {"name": "claude-code", "session": "s1", "call_id": f"toolu_{n:02d}",
                  "via": {"guard": "claros-guard", "version": "0.1.0"}},
        "on_behalf_of": "sam@acme.test",
        "obo_source": "agent_key",
        "result": result,
        "allowed": result in ("allow", "nudge"),
        "rules": [{"id": "refund-half", "version": 1, "matched": result == "ask"}],
    }  # fmt: skip
    row.update(more)
    return row


def _records(rewritten: bool = False) -> list[NewRecord]:
    """Twelve records of every kind; ``rewritten``: another history of the same length."""
    bump = "9" if rewritten else ""
    return [
        NewRecord("rule_version", "refund-half@1", _rule(1, 100)),
        NewRecord("check", "chk_0002", _check(2, bump + "40.00", "allow")),
        NewRecord("check", "chk_0003", _check(3, "480.00", "ask", severity="medium",
                                              amount=Decimal("480.00"), currency="EUR")),
        NewRecord("approval", "ask_0003", {"ask_id": "ask_0003", "check_id": "chk_0003",
                  "decision": "approve", "authority": "owner", "decided_by": "dana@acme.test",
                  "opened_at": T0 + 180_000, "decided_at": T0 + 186_000}),
        NewRecord("check", "chk_0005", _check(5, "480.00", "allow")),
        NewRecord("outcome", "chk_0005", {"check_id": "chk_0005", "status": "ok",
                  "summary": "refund R-77 created", "check_result": "allow",
                  "agent": "claude-code", "via": "claros-guard"}),
        NewRecord("check", "chk_0007", _check(7, "12.00", "allow")),
        NewRecord("override", "ovr_0008", {"override_id": "ovr_0008", "check_id": "chk_0007",
                  "verdict": "missed", "rule_id": "refund-half", "by": "dana@acme.test",
                  "note": "a refund of a refund: should have asked"}),
        NewRecord("unchecked", "unc_0009", {"unchecked_id": "unc_0009", "app": "shop",
                  "tool": "refund_create", "reason": "Claros unreachable",
                  "agent": {"name": "claude-code"}}),
        NewRecord("check", "chk_0010", _check(10, "15.00" + bump, "allow")),
        NewRecord("rule_version_close", "refund-half@1", {"rule_id": "refund-half",
                  "version": 1, "closed_by": "admin@acme.test", "reason": "replaced by an edit"}),
        NewRecord("rule_version", "refund-half@2", _rule(2, 50)),
    ]  # fmt: skip


def build_ledger(store: Store, signer: UnsafeFixedSigner, records: list[NewRecord],
                 checkpoints_at: tuple[int, ...]) -> None:  # fmt: skip
    store.add_public_key(signer.active_key(WS))
    for i, new in enumerate(records, start=1):
        [entry] = store.append_many(WS, [new], ts=T0 + i * 60_000)
        if i in checkpoints_at:
            store.add_checkpoint(signer.checkpoint(entry, entry.ts + 1000))


def export_of(store: Store, signer: UnsafeFixedSigner, root: Path) -> Lines:
    services = Services(Settings(data_dir=root), store, signer)
    plan = prepare_export(services, WS, now=EXPORTED_AT)
    return list(export_lines(services, plan))


def _valid(
    root: Path,
    name: str,
    *,
    records: list[NewRecord] | None = None,
    checkpoints_at: tuple[int, ...] = (5, 10, 12),
    prune_through: int = 0,
    retention_days: int = 200,
) -> Lines:
    store = SqliteStore(root / f"{name}.db")
    try:
        signer = UnsafeFixedSigner()
        build_ledger(store, signer, records or _records(), checkpoints_at)
        if prune_through:
            _prune(store, signer, prune_through, retention_days)
        return export_of(store, signer, root)
    finally:
        store.close()


def _prune(store: Store, signer: UnsafeFixedSigner, through: int, days: int) -> None:
    """As claros.evidence.retention.prune does it, at fixed times: the prune entry naming
    the cut at a signed checkpoint, a checkpoint covering that entry, then the deletes."""
    [cp] = [c for c in store.checkpoints(WS) if c.seq == through]
    kept = [(k.seq, k.kind, k.ref_id, hashlib.sha256(k.raw).hexdigest())
            for k in store.kept_records(WS, through)]  # fmt: skip
    listed = {"through_seq": through, "checkpoint": {"seq": through, "hash": cp.hash},
              "kept": {"count": len(kept), "sha256": kept_digest(kept)},
              "retention_days": days}  # fmt: skip
    head = store.head(WS)
    assert head is not None
    [entry] = store.append_many(WS, [NewRecord("prune", "prn_0001", listed)], ts=head.ts + 60_000)
    store.add_checkpoint(signer.checkpoint(entry, entry.ts + 1000))
    store.prune(WS, through)


# --- tampering ---------------------------------------------------------------------------
def resign(lines: Lines, signer: UnsafeFixedSigner | None = None) -> Lines:
    """The lines with the last (signature) line made again over the others."""
    body = lines[:-1]
    digest = hashlib.sha256(b"".join(body)).digest()
    key_id, signature = (signer or UnsafeFixedSigner()).sign(WS, digest)
    last = {"type": "signature", "sha256": digest.hex(), "algorithm": "Ed25519",
            "key_id": key_id, "signature": base64.b64encode(signature).decode()}  # fmt: skip
    return [*body, (json.dumps(last, separators=(",", ":")) + "\n").encode()]


def _index(lines: Lines, seq: int) -> int:
    for i, line in enumerate(lines):
        if line.startswith(b'{"workspace":') and json.loads(line)["seq"] == seq:
            return i
    raise KeyError(seq)


def _edit_entry(lines: Lines, seq: int, edit: Callable[[dict[str, Any]], None]) -> Lines:
    """Rewrite one entry line (parsed, edited, written back in the same layout)."""
    out = list(lines)
    i = _index(out, seq)
    data = json.loads(out[i])
    event = data.pop("event")
    data["event"] = event
    edit(data)
    out[i] = (json.dumps(data, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    return out


def _rehash(data: dict[str, Any]) -> None:
    from claros.canonical import canonical_bytes

    raw = canonical_bytes(data["event"])
    data["payload_sha256"] = hashlib.sha256(raw).hexdigest()
    entry = Entry.build(data["workspace"], data["seq"], data["kind"], data["ref_id"], data["ts"],
                        data["event"], data["prev_hash"])  # fmt: skip
    data["hash"] = entry.hash


def _typed_index(lines: Lines, kind: str, seq: int | None = None) -> int:
    for i, line in enumerate(lines):
        if line.startswith(b'{"type":"' + kind.encode() + b'"'):
            if seq is None or json.loads(line).get("seq") == seq:
                return i
    raise KeyError((kind, seq))


def _resigned_checkpoint(lines: Lines, seq: int, seed: bytes) -> Lines:
    out = list(lines)
    i = _typed_index(out, "checkpoint", seq)
    data = json.loads(out[i])
    entry_like = Entry(WS, seq, "", "", 0, "", "", data["hash"])
    cp = UnsafeFixedSigner(seed).checkpoint(entry_like, data["ts"])
    data.update(key_id=cp.key_id, signature=cp.signature)
    out[i] = (json.dumps(data, separators=(",", ":")) + "\n").encode()
    return out


def _entry_at_most(line: bytes, seq: int) -> bool:
    return line.startswith(b'{"workspace":') and int(json.loads(line)["seq"]) <= seq


def _header(lines: Lines, **fields: Any) -> Lines:
    """The lines with header fields changed (written back in the writer's layout)."""
    header = json.loads(lines[0])
    header.update(fields)
    return [(json.dumps(header, separators=(",", ":")) + "\n").encode(), *lines[1:]]


def _resigned_all(lines: Lines, seed: bytes) -> Lines:
    """The export remade by someone with another key: that key listed instead of the
    workspace's, every checkpoint and the whole signed with it, nothing else changed."""
    other = UnsafeFixedSigner(seed)
    key = json.dumps({"type": "public_key", **other.active_key(WS).to_json()},
                     separators=(",", ":")).encode() + b"\n"  # fmt: skip
    out = [key if ln.startswith(b'{"type":"public_key"') else ln for ln in lines]
    for line in list(out):
        if line.startswith(b'{"type":"checkpoint"'):
            out = _resigned_checkpoint(out, int(json.loads(line)["seq"]), seed)
    return resign(out, other)


def corpus(root: Path) -> tuple[dict[str, Lines], list[dict[str, Any]], dict[str, Any]]:
    """(files, manifest, saved checkpoints) of the whole corpus."""
    valid = _valid(root, "valid")
    pruned = _valid(root, "pruned", prune_through=5)
    below_floor = _valid(root, "below-floor", prune_through=5, retention_days=90)
    rewritten = _valid(root, "rewritten", records=_records(rewritten=True),
                       checkpoints_at=(4, 8, 12))  # fmt: skip
    files: dict[str, Lines] = {"valid.jsonl": valid, "valid-pruned.jsonl": pruned}

    def edit_amount(d: dict[str, Any]) -> None:
        d["event"]["arguments"]["amount"] = 4800

    def delete_record(d: dict[str, Any]) -> None:
        d["event"] = None

    def edit_ts(d: dict[str, Any]) -> None:
        d["ts"] += 1

    def edit_and_rehash(d: dict[str, Any]) -> None:
        d["event"]["arguments"]["amount"] = 48
        _rehash(d)

    def bad_first_link(d: dict[str, Any]) -> None:
        d["prev_hash"] = "1" * 64
        _rehash(d)

    seven, eight = _index(valid, 7), _index(valid, 8)
    swapped = list(valid)
    swapped[seven], swapped[eight] = swapped[eight], swapped[seven]
    cp10 = _typed_index(valid, "checkpoint", 10)
    bad_sig = list(valid)
    data = json.loads(bad_sig[cp10])
    sig = bytearray(base64.b64decode(data["signature"]))
    sig[0] ^= 1
    data["signature"] = base64.b64encode(bytes(sig)).decode()
    bad_sig[cp10] = (json.dumps(data, separators=(",", ":")) + "\n").encode()
    deleted = _header(
        [ln for ln in valid if not _entry_at_most(ln, 5) and not ln.startswith(b'{"type":"kept"')],
        first_seq=6, pruned_through=5, entries=7,
    )  # fmt: skip
    header_edited = list(valid)
    header_edited[0] = header_edited[0].replace(b'"exported_at":', b'"exported_at":1')
    pruned_no_anchor = [line for line in pruned if b'"type":"checkpoint","workspace":"acme",'
                        b'"seq":5,' not in line]  # fmt: skip
    files.update({
        "record-edited.jsonl": resign(_edit_entry(valid, 3, edit_amount)),
        "record-deleted.jsonl": resign(_edit_entry(valid, 5, delete_record)),
        "entry-edited.jsonl": resign(_edit_entry(valid, 6, edit_ts)),
        "entry-missing.jsonl": resign([ln for i, ln in enumerate(valid) if i != seven]),
        "entries-reordered.jsonl": resign(swapped),
        "broken-link.jsonl": resign(_edit_entry(valid, 7, edit_and_rehash)),
        "first-link-not-zeros.jsonl": resign(_edit_entry(valid, 1, bad_first_link)),
        "checkpoint-bad-signature.jsonl": resign(bad_sig),
        "checkpoint-unknown-key.jsonl": resign(_resigned_checkpoint(valid, 10, OTHER_SEED)),
        "tail-cut-off.jsonl": resign([ln for ln in valid
                                      if not ln.startswith(b'{"workspace":"acme","seq":1')
                                      or json.loads(ln)["seq"] < 11]),  # fmt: skip
        "pruned-without-anchor.jsonl": resign(pruned_no_anchor),
        "oldest-deleted-without-prune.jsonl": resign(deleted),
        "pruned-below-floor.jsonl": below_floor,
        "resigned-unknown-key.jsonl": _resigned_all(valid, OTHER_SEED),
        "export-edited.jsonl": header_edited,
        "export-unsigned.jsonl": valid[:-1],
        "rewritten-since-saved.jsonl": rewritten,
    })  # fmt: skip
    saved = _saved(valid)
    manifest = [
        _case("valid.jsonl", 0, r"OK: export valid\.jsonl"),
        _case("valid.jsonl", 0, r"3 of 3 saved checkpoints .* still match", saved=True),
        _case("valid-pruned.jsonl", 0, r"entries: +8 \(seq 6\.\.13\)"),
        _case("oldest-deleted-without-prune.jsonl", 1, r"FAIL: seq 6 \(outcome\): entries "
              r"1\.\.5 are missing and no prune accounts for them: no prune entry says "
              r"through_seq 5"),
        _case("pruned-below-floor.jsonl", 1, r"FAIL: seq 6 \(outcome\): entries 1\.\.5 are "
              r"missing and no prune accounts for them: the prune through seq 5 keeps 90 days, "
              r"below the 183-day floor"),
        _case("resigned-unknown-key.jsonl", 0, r"OK: export resigned-unknown-key\.jsonl"),
        _case("resigned-unknown-key.jsonl", 1, r"FAIL: ledger \(signature\): export signed by "
              r"key ed25519:\w{16}, which is not pinned \(pinned: ed25519:0cf6a8eccfa4aa59\)",
              saved=True),
        _case("resigned-unknown-key.jsonl", 1, r"FAIL: seq 5 \(checkpoint\): signed by key "
              r"ed25519:\w{16}, which is not pinned", saved=True),
        _case("record-edited.jsonl", 1,
              r"FAIL: seq 3 \(check\): record chk_0003 edited: payload_sha256 \w{64} != \w{64}"),
        _case("record-deleted.jsonl", 1, r"FAIL: seq 5 \(check\): record chk_0005 deleted"),
        _case("entry-edited.jsonl", 1,
              r"FAIL: seq 6 \(outcome\): entry edited: hash \w{64} != recomputed \w{64}"),
        _case("entry-missing.jsonl", 1, r"FAIL: seq 8 \(override\): missing entries: seq 7"),
        _case("entries-reordered.jsonl", 1,
              r"FAIL: seq 7 \(check\): entry out of order: seq 7 after seq 8"),
        _case("broken-link.jsonl", 1,
              r"FAIL: seq 8 \(override\): broken link: prev_hash \w{64} != hash of seq 7"),
        _case("first-link-not-zeros.jsonl", 1,
              r"FAIL: seq 1 \(rule_version\): first entry's prev_hash is 1{64}, not zeros"),
        _case("checkpoint-bad-signature.jsonl", 1,
              r"FAIL: seq 10 \(checkpoint\): bad signature \(key ed25519:\w{16}\)"),
        _case("checkpoint-unknown-key.jsonl", 1,
              r"FAIL: seq 10 \(checkpoint\): signed by unknown key ed25519:\w{16}"),
        _case("tail-cut-off.jsonl", 1, r"FAIL: seq 12 \(checkpoint\): tail cut off: signed "
              r"checkpoint at seq 12 but the log ends at seq 10"),
        _case("pruned-without-anchor.jsonl", 1, r"FAIL: seq 6 \(outcome\): log starts at seq 6 "
              r"with no signed checkpoint at seq 5"),
        _case("export-edited.jsonl", 1, r"FAIL: ledger \(signature\): export edited: sha256 of "
              r"its lines is \w{64}, the signature line says \w{64}"),
        _case("export-unsigned.jsonl", 1,
              r"FAIL: ledger \(signature\): the export is not signed"),
        _case("rewritten-since-saved.jsonl", 0, r"OK: export rewritten-since-saved\.jsonl"),
        _case("rewritten-since-saved.jsonl", 1, r"FAIL: seq 5 \(checkpoint\): log rewritten "
              r"since saved checkpoints: the export no longer has the checkpoint at seq 5",
              saved=True),
        _case("rewritten-since-saved.jsonl", 1, r"FAIL: seq 12 \(checkpoint\): log rewritten "
              r"since saved checkpoints: the saved checkpoint says hash \w{64}, the export's "
              r"says \w{64}", saved=True),
    ]  # fmt: skip
    return files, manifest, saved


def _case(file: str, code: int, pattern: str, *, saved: bool = False) -> dict[str, Any]:
    args = ["--export", file] + (["--checkpoints", "saved-checkpoints.json"] if saved else [])
    return {"file": file, "args": args, "exit": code, "output": pattern}


def _saved(valid: Lines) -> dict[str, Any]:
    """The checkpoints of ``valid.jsonl`` as ``claros verify --save`` writes them."""
    parsed = [json.loads(line) for line in valid]

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if k != "type"}

    return {
        "format": "claros-checkpoints/1",
        "workspace": WS,
        "saved_at": "2026-10-31T00:00:00Z",
        "source": "export valid.jsonl",
        "public_keys": [strip(d) for d in parsed if d.get("type") == "public_key"],
        "checkpoints": [strip(d) for d in parsed if d.get("type") == "checkpoint"],
    }


def example(root: Path) -> Lines:
    """The worked example of docs/evidence-format.md: three entries, small by hand."""
    store = SqliteStore(root / "example.db")
    try:
        signer = UnsafeFixedSigner()
        records = [
            NewRecord("rule_version", "cap@1", {"rule_id": "cap", "version": 1,
                      "rule": {"app": "shop", "response": "stop", "when": "amount > 500"}}),
            NewRecord("check", "chk_1", {"check_id": "chk_1", "app": "shop",
                      "tool": "refund_create", "arguments": {"amount": 900},
                      "result": "stop", "rules": [{"id": "cap", "version": 1,
                                                   "matched": True}]}),
            NewRecord("override", "ovr_1", {"check_id": "chk_1", "verdict": "right_stop",
                                            "by": "dana@acme.test"}),
        ]  # fmt: skip
        build_ledger(store, signer, records, (2, 3))
        return export_of(store, signer, root)
    finally:
        store.close()


def files(root: Path) -> dict[str, bytes]:
    """Every file of tests/data/exports/, by name."""
    made, manifest, saved = corpus(root)
    out = {name: b"".join(lines) for name, lines in made.items()}
    out["example.jsonl"] = b"".join(example(root))
    out["saved-checkpoints.json"] = (json.dumps(saved, indent=1) + "\n").encode()
    out["manifest.json"] = (json.dumps(manifest, indent=1) + "\n").encode()
    return out


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files(Path(tmp)).items():
            (OUT / name).write_bytes(data)
    print(f"wrote the corpus to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
