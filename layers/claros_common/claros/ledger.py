"""The tamper-evident log: entries, their hashes, checkpoint messages, and verification.

Pure code: no storage, no network, no boto3, so the client's ``claros verify`` and the
server's ``python -m claros.ledger verify`` run the very same checks.

    payload_sha256 = sha256(canonical JSON of the record)
    hash           = sha256("{workspace}\\n{seq}\\n{kind}\\n{ref_id}\\n{ts}\\n"
                            "{payload_sha256}\\n{prev_hash}")
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from claros import jsonutil
from claros.canonical import CanonicalError, canonical_bytes

__all__ = [
    "KINDS",
    "NEVER_PRUNED",
    "PRUNE_KIND",
    "kept_digest",
    "ZERO_HASH",
    "ChainVerifier",
    "Checkpoint",
    "Entry",
    "Failure",
    "PublicKey",
    "VerifyReport",
    "checkpoint_message",
    "entry_hash",
    "key_id_for",
    "payload_sha256",
    "verify_entries",
    "verify_signature",
]

ZERO_HASH = "0" * 64
CHECKPOINT_PREFIX = "claros-ledger-checkpoint"

# Kinds of ledger entry. Rule versions are never pruned.
KINDS = (
    "check",
    "approval",
    "override",
    "outcome",
    "unchecked",
    "rule_version",
    "rule_version_close",
    "mapping_version",
    "mapping_status",  # a mapping suspended (or restored) as the tools it names changed
    "tool_confirm",  # an admin confirmed that a tool held as a write is a read
)
NEVER_PRUNED = frozenset({"rule_version", "rule_version_close", "mapping_version"})
# A prune leaves an entry of this kind in the chain, naming what it kept below its cut:
# {"through_seq", "checkpoint": {"seq", "hash"}, "kept": {"count", "sha256"}}. The kept
# records' own entries are gone, so this is what vouches for them afterwards.
PRUNE_KIND = "prune"


def kept_digest(items: Iterable[tuple[int, str, str, str]]) -> str:
    """sha256 over ``"{seq}\n{kind}\n{ref_id}\n{payload_sha256}\n"`` of each kept
    record (``items`` as (seq, kind, ref_id, payload_sha256), in seq order)."""
    digest = hashlib.sha256()
    for seq, kind, ref_id, payload in items:
        digest.update(f"{seq}\n{kind}\n{ref_id}\n{payload}\n".encode())
    return digest.hexdigest()


def payload_sha256(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(record)).hexdigest()


def entry_hash(
    workspace: str, seq: int, kind: str, ref_id: str, ts: int, payload: str, prev_hash: str
) -> str:
    text = f"{workspace}\n{seq}\n{kind}\n{ref_id}\n{ts}\n{payload}\n{prev_hash}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def checkpoint_message(workspace: str, seq: int, hash_: str, ts: int) -> bytes:
    return f"{CHECKPOINT_PREFIX}\n{workspace}\n{seq}\n{hash_}\n{ts}".encode()


def _field(data: Mapping[str, Any], name: str) -> Any:
    try:
        return data[name]
    except KeyError:
        raise ValueError(f"field {name} is missing") from None


def _str(data: Mapping[str, Any], name: str) -> str:
    value = _field(data, name)
    if not isinstance(value, str):
        raise ValueError(f"field {name} must be a string, not {type(value).__name__}")
    return value


def _int(data: Mapping[str, Any], name: str) -> int:
    value = _field(data, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field {name} must be a whole number, not {value!r}")
    return value


_HEX64 = frozenset("0123456789abcdef")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


def _hex64(data: Mapping[str, Any], name: str) -> str:
    value = _str(data, name)
    if len(value) != 64 or not _HEX64.issuperset(value):
        raise ValueError(f"field {name} must be 64 lowercase hex digits")
    return value


@dataclass(frozen=True, slots=True)
class Entry:
    workspace: str
    seq: int
    kind: str
    ref_id: str
    ts: int
    payload_sha256: str
    prev_hash: str
    hash: str

    @classmethod
    def build(
        cls,
        workspace: str,
        seq: int,
        kind: str,
        ref_id: str,
        ts: int,
        record: Mapping[str, Any],
        prev_hash: str,
        *,
        payload: str | None = None,
    ) -> Entry:
        """The entry for ``record``; pass ``payload`` when its sha256 is known already."""
        payload = payload or payload_sha256(record)
        return cls(
            workspace,
            seq,
            kind,
            ref_id,
            ts,
            payload,
            prev_hash,
            entry_hash(workspace, seq, kind, ref_id, ts, payload, prev_hash),
        )

    def expected_hash(self) -> str:
        return entry_hash(
            self.workspace,
            self.seq,
            self.kind,
            self.ref_id,
            self.ts,
            self.payload_sha256,
            self.prev_hash,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        """Parse an entry strictly: a wrong type is a ``ValueError`` naming the field."""
        # The common case in one expression (verifiers parse millions of these); anything
        # off goes through the field-by-field checks below, which name what is wrong.
        try:
            ws, seq, kind, ref = data["workspace"], data["seq"], data["kind"], data["ref_id"]
            ts, payload = data["ts"], data["payload_sha256"]
            prev, hash_ = data["prev_hash"], data["hash"]
        except KeyError:
            pass
        else:
            if (
                type(ws) is str and type(kind) is str and type(ref) is str
                and type(seq) is int and type(ts) is int
                and type(payload) is str and type(prev) is str and type(hash_) is str
                and _HEX64_RE.fullmatch(payload) and _HEX64_RE.fullmatch(prev)
                and _HEX64_RE.fullmatch(hash_)
            ):  # fmt: skip
                return cls(ws, seq, kind, ref, ts, payload, prev, hash_)
        return cls(
            workspace=_str(data, "workspace"),
            seq=_int(data, "seq"),
            kind=_str(data, "kind"),
            ref_id=_str(data, "ref_id"),
            ts=_int(data, "ts"),
            payload_sha256=_hex64(data, "payload_sha256"),
            prev_hash=_hex64(data, "prev_hash"),
            hash=_hex64(data, "hash"),
        )


@dataclass(frozen=True, slots=True)
class Checkpoint:
    workspace: str
    seq: int
    hash: str
    ts: int
    key_id: str
    signature: str  # base64 of the 64-byte Ed25519 signature

    def message(self) -> bytes:
        return checkpoint_message(self.workspace, self.seq, self.hash, self.ts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            workspace=_str(data, "workspace"),
            seq=_int(data, "seq"),
            hash=_hex64(data, "hash"),
            ts=_int(data, "ts"),
            key_id=_str(data, "key_id"),
            signature=_str(data, "signature"),
        )


@dataclass(frozen=True, slots=True)
class PublicKey:
    workspace: str
    key_id: str
    public_key: str  # base64 of the raw 32-byte Ed25519 key
    created_at: int
    algorithm: str = "Ed25519"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PublicKey:
        return cls(
            workspace=str(data["workspace"]),
            key_id=str(data["key_id"]),
            public_key=str(data["public_key"]),
            created_at=int(data["created_at"]),
            algorithm=str(data.get("algorithm", "Ed25519")),
        )


def key_id_for(raw_public_key: bytes) -> str:
    """A key's id is derived from the key itself, so nobody can relabel one."""
    return "ed25519:" + hashlib.sha256(raw_public_key).hexdigest()[:16]


def verify_signature(public_key: PublicKey, message: bytes, signature_b64: str) -> bool:
    try:
        VerifyKey(base64.b64decode(public_key.public_key)).verify(
            message, base64.b64decode(signature_b64, validate=True)
        )
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class Failure:
    seq: int | None
    kind: str | None
    problem: str

    def __str__(self) -> str:
        where = f"seq {self.seq}" if self.seq is not None else "ledger"
        return f"{where} ({self.kind or '-'}): {self.problem}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class VerifyReport:
    workspace: str
    entries: int = 0
    records_compared: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    last_hash: str | None = None
    checkpoints_verified: int = 0
    last_checkpoint_seq: int | None = None
    # Records kept below a prune's cut (rule and mapping versions), checked against the
    # prune entries that list them.
    kept_records: int = 0
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def unsigned_tail(self) -> int:
        """How many entries lie after the last verified checkpoint."""
        if self.last_seq is None:
            return 0
        return self.last_seq - (self.last_checkpoint_seq or (self.first_seq or 1) - 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "ok": self.ok,
            "entries": self.entries,
            "records_compared": self.records_compared,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "last_hash": self.last_hash,
            "checkpoints_verified": self.checkpoints_verified,
            "last_checkpoint_seq": self.last_checkpoint_seq,
            "unsigned_tail": self.unsigned_tail,
            "kept_records": self.kept_records,
            "failures": [f.to_json() for f in self.failures],
        }


_NO_RECORD = object()


class ChainVerifier:
    """Checks one workspace's chain as entries stream past, in bounded memory.

    Give it the checkpoints and public keys first (they are small: one per hundred entries),
    then ``feed`` entries in the order they came, each with its record when records are
    compared, and ``finish`` for the report. Every failure names its seq, kind and what
    differs; verification goes on after a failure so that one run lists them all.
    """

    def __init__(
        self,
        workspace: str,
        checkpoints: Iterable[Checkpoint] = (),
        public_keys: Iterable[PublicKey] = (),
        *,
        compare_records: bool = False,
    ) -> None:
        self.report = VerifyReport(workspace)
        self.compare_records = compare_records
        self._keys: dict[str, PublicKey] = {}
        self._checkpoints: dict[int, Checkpoint] = {}
        self._prev: Entry | None = None
        # (seq, kind, ref_id, payload_sha256) of every record a prune keeps that went past
        # (a few per rule edit, so small), and the prune entries' records, for finish().
        self._versions: list[tuple[int, str, str, str]] = []
        self._prunes: list[tuple[Entry, Any]] = []
        self._kept_seqs: list[int] = []
        for key in public_keys:
            self._add_key(key)
        for cp in checkpoints:
            self._add_checkpoint(cp)

    def _fail(self, seq: int | None, kind: str | None, problem: str) -> None:
        self.report.failures.append(Failure(seq, kind, problem))

    def _add_key(self, key: PublicKey) -> None:
        if key.workspace != self.report.workspace:
            return
        try:
            raw = base64.b64decode(key.public_key, validate=True)
        except ValueError:
            raw = b""
        if len(raw) != 32 or key_id_for(raw) != key.key_id:
            # A key id is derived from the key: a relabelled key must not vouch for anything.
            self._fail(None, "public_key", f"key {key.key_id} does not match its public key")
            return
        self._keys[key.key_id] = key

    def _add_checkpoint(self, cp: Checkpoint) -> None:
        if cp.workspace != self.report.workspace:
            self._fail(cp.seq, "checkpoint", f"checkpoint is for workspace {cp.workspace!r}")
            return
        key = self._keys.get(cp.key_id)
        if key is None:
            self._fail(cp.seq, "checkpoint", f"signed by unknown key {cp.key_id}")
            return
        if not verify_signature(key, cp.message(), cp.signature):
            self._fail(cp.seq, "checkpoint", f"bad signature (key {cp.key_id})")
            return
        other = self._checkpoints.get(cp.seq)
        if other is not None and other.hash != cp.hash:
            self._fail(
                cp.seq,
                "checkpoint",
                f"two signed checkpoints disagree (hash {other.hash} vs {cp.hash})",
            )
            return
        self._checkpoints[cp.seq] = cp

    def feed_kept(self, seq: int, kind: str, ref_id: str, record: Any) -> None:
        """A record kept below a prune's cut (its entry is gone), before any entry.

        It is checked against the prune entries that list what they kept (``finish``)."""
        if self._prev is not None:
            self._fail(seq, kind, f"kept record {ref_id} comes after the entries")
            return
        if kind not in NEVER_PRUNED:
            self._fail(seq, kind, f"kept record {ref_id}: a prune never keeps a {kind}")
            return
        try:
            payload = payload_sha256(record)
        except CanonicalError as exc:
            self._fail(seq, kind, f"kept record {ref_id} is not valid JSON: {exc}")
            return
        self._versions.append((seq, kind, ref_id, payload))
        self._kept_seqs.append(seq)
        self.report.kept_records += 1

    def feed(self, entry: Entry, record: Any = _NO_RECORD) -> None:
        rep = self.report
        seq, kind = entry.seq, entry.kind
        self._note_pruning(entry, record)
        if entry.workspace != rep.workspace:
            self._fail(seq, kind, f"entry is for workspace {entry.workspace!r}")
        recomputed = entry.expected_hash()
        if recomputed != entry.hash:
            self._fail(seq, kind, f"entry edited: hash {entry.hash} != recomputed {recomputed}")
        prev = self._prev
        if prev is None:
            self._check_start(entry)
        else:
            if seq <= prev.seq:
                self._fail(seq, kind, f"entry out of order: seq {seq} after seq {prev.seq}")
            elif seq != prev.seq + 1:
                missing = f"{prev.seq + 1}" if seq == prev.seq + 2 else f"{prev.seq + 1}..{seq - 1}"
                self._fail(seq, kind, f"missing entries: seq {missing}")
            if entry.prev_hash != prev.hash:
                self._fail(
                    seq,
                    kind,
                    f"broken link: prev_hash {entry.prev_hash} != hash of seq {prev.seq} "
                    f"({prev.hash})",
                )
        if record is not _NO_RECORD and self.compare_records:
            self._compare(entry, record)
        cp = self._checkpoints.get(seq)
        if cp is not None:
            if cp.hash == entry.hash:
                rep.checkpoints_verified += 1
                rep.last_checkpoint_seq = seq
            else:
                self._fail(
                    seq, kind, f"signed checkpoint says hash {cp.hash}, entry has {entry.hash}"
                )
        rep.entries += 1
        if rep.first_seq is None:
            rep.first_seq = seq
        if rep.last_seq is None or seq > rep.last_seq:
            rep.last_seq, rep.last_hash = seq, entry.hash
        self._prev = entry

    def _note_pruning(self, entry: Entry, record: Any) -> None:
        """Keep what ``finish`` checks the prune entries against."""
        if entry.kind in NEVER_PRUNED:
            self._versions.append((entry.seq, entry.kind, entry.ref_id, entry.payload_sha256))
        elif entry.kind == PRUNE_KIND and record is not _NO_RECORD and self.compare_records:
            self._prunes.append((entry, record))

    def feed_raw(self, entry: Entry, raw: bytes | None) -> None:
        """``feed`` with the record as the bytes it was written as (None: no record).

        Exports and streams write each record as its canonical JSON, the very bytes
        ``payload_sha256`` hashed, so hashing them compares the record without parsing or
        re-canonicalizing it. Bytes that do not hash right are parsed and compared as
        ``feed`` compares (a record written in another layout is still the same record)."""
        if not self.compare_records:
            self.feed(entry)
        elif raw is None:
            self.feed(entry, None)
        elif hashlib.sha256(raw).hexdigest() == entry.payload_sha256:
            self.feed(entry)
            if entry.kind == PRUNE_KIND:  # the one kind whose content the verifier reads
                self._prunes.append((entry, jsonutil.loads(raw)))
            self.report.records_compared += 1
        else:
            try:
                record = jsonutil.loads(raw)
            except (ValueError, RecursionError) as exc:
                self.feed(entry)
                self._fail(entry.seq, entry.kind, f"record {entry.ref_id} is not valid JSON: {exc}")
                self.report.records_compared += 1
                return
            self.feed(entry, record)

    def _check_start(self, entry: Entry) -> None:
        if entry.seq == 1:
            if entry.prev_hash != ZERO_HASH:
                self._fail(
                    1, entry.kind, f"first entry's prev_hash is {entry.prev_hash}, not zeros"
                )
            return
        # The log was pruned: it must start right after a signed checkpoint.
        anchor = self._checkpoints.get(entry.seq - 1)
        if anchor is None:
            self._fail(
                entry.seq,
                entry.kind,
                f"log starts at seq {entry.seq} with no signed checkpoint at seq {entry.seq - 1}",
            )
        elif anchor.hash != entry.prev_hash:
            self._fail(
                entry.seq,
                entry.kind,
                f"broken link: prev_hash {entry.prev_hash} != checkpoint hash {anchor.hash} "
                f"at seq {anchor.seq}",
            )
        else:
            self.report.checkpoints_verified += 1
            self.report.last_checkpoint_seq = anchor.seq

    def _compare(self, entry: Entry, record: Any) -> None:
        if record is None:
            self._fail(entry.seq, entry.kind, f"record {entry.ref_id} deleted")
            return
        try:
            got = payload_sha256(record)
        except CanonicalError as exc:
            self._fail(entry.seq, entry.kind, f"record {entry.ref_id} is not valid JSON: {exc}")
            return
        if got != entry.payload_sha256:
            self._fail(
                entry.seq,
                entry.kind,
                f"record {entry.ref_id} edited: payload_sha256 {got} != {entry.payload_sha256}",
            )
        self.report.records_compared += 1

    def finish(self) -> VerifyReport:
        rep = self.report
        last = rep.last_seq or 0
        beyond = sorted(s for s in self._checkpoints if s > last)
        if beyond:
            self._fail(
                beyond[-1],
                "checkpoint",
                f"tail cut off: signed checkpoint at seq {beyond[-1]} but the log ends at "
                f"seq {last}",
            )
        first = rep.first_seq
        if first is not None and any(s >= first for s in self._kept_seqs):
            bad = min(s for s in self._kept_seqs if s >= first)
            self._fail(bad, None, f"kept record at seq {bad}, inside the log (from seq {first})")
        for entry, record in self._prunes:
            self._check_prune(entry, record)
        return rep

    def _check_prune(self, entry: Entry, record: Any) -> None:
        """A prune entry's list of what it kept matches the kept records and versions."""
        seq, kind = entry.seq, entry.kind
        try:
            through = int(record["through_seq"])
            listed, digest = int(record["kept"]["count"]), str(record["kept"]["sha256"])
            anchor = record["checkpoint"]
        except (KeyError, TypeError, ValueError):
            self._fail(seq, kind, f"prune record {entry.ref_id} is not in the prune's shape")
            return
        kept = sorted(v for v in self._versions if v[0] <= through)
        if len(kept) != listed:
            self._fail(
                seq,
                kind,
                f"the prune through seq {through} kept {listed} rule and mapping versions; "
                f"{len(kept)} are here",
            )
        elif kept_digest(kept) != digest:
            self._fail(
                seq,
                kind,
                f"a rule or mapping version kept by the prune through seq {through} was "
                f"edited or replaced (their sha256 {kept_digest(kept)} != listed {digest})",
            )
        cp = self._checkpoints.get(through)
        if cp is not None and isinstance(anchor, Mapping) and anchor.get("hash") != cp.hash:
            self._fail(seq, kind, f"the prune names a checkpoint at seq {through} not signed")


def verify_entries(
    workspace: str,
    items: Iterable[tuple[Entry, Any]] | Iterable[Entry],
    checkpoints: Iterable[Checkpoint] = (),
    public_keys: Iterable[PublicKey] = (),
    *,
    compare_records: bool = False,
) -> VerifyReport:
    verifier = ChainVerifier(workspace, checkpoints, public_keys, compare_records=compare_records)
    for item in items:
        if isinstance(item, Entry):
            verifier.feed(item)
        else:
            verifier.feed(item[0], item[1])
    return verifier.finish()


if __name__ == "__main__":  # python -m claros.ledger verify|...
    from claros.ledger_cli import main

    raise SystemExit(main())
