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
import json
import re
import time
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any, NamedTuple

from claros import jsonutil
from claros.canonical import CanonicalError, canonical_bytes
from claros.checkpoint_table import CheckpointTable, Span
from claros.chunked import ChunkedLines

__all__ = [
    "CLOCK_SKEW_MS",
    "KINDS",
    "NEVER_PRUNED",
    "PRUNE_KIND",
    "PUBLIC_KEY_KIND",
    "READ_KINDS",
    "RETENTION_FLOOR_DAYS",
    "pruned_start_problem",
    "kept_digest",
    "ZERO_HASH",
    "ChainVerifier",
    "Checkpoint",
    "Failures",
    "Entry",
    "Failure",
    "PublicKey",
    "VerifyReport",
    "checkpoint_message",
    "entry_hash",
    "key_id_for",
    "kept_from_json",
    "payload_sha256",
    "slim_checkpoints",
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
    "mapping_version_close",  # an admin closed a mapping (claros.mapping.service)
    "prune",
    "public_key",
    "mapping_status",  # a mapping suspended (or restored) as the tools it names changed
    "tool_confirm",  # an admin confirmed that a tool held as a write is a read
    "app_removed",  # an admin removed an app and its registered tools (claros.mapping.tools)
    # Who could act when (claros.people): a key revoked ({"key_id", "kind", "person",
    # "revoked_by", "revoked_at", ...}) and a member added, made admin or member, or removed
    # ({"person", "role", "previous", "changed_by", "changed_at"}; role "removed").
    "key_revoked",
    "member_role",
    # An admin acknowledged a tampering record (AWS: claros.tamper, docs/api.md).
    "tampering_ack",
)
# A key rotation leaves an entry of this kind, its record the new public key
# ({"workspace", "key_id", "public_key", "created_at", "algorithm", "replaces"}), covered by
# a checkpoint the old key signs: that is how a key someone pinned introduces its successor.
# Kept below a prune's cut like the versions, so the succession stays provable.
PUBLIC_KEY_KIND = "public_key"
NEVER_PRUNED = frozenset(
    {"rule_version", "rule_version_close", "mapping_version", "mapping_version_close", "public_key"}
)
# A prune leaves an entry of this kind in the chain, naming what it kept below its cut:
# {"through_seq", "checkpoint": {"seq", "hash"}, "kept": {"count", "sha256"},
# "retention_days"}. The kept records' own entries are gone, so this is what vouches for
# them afterwards, and the one thing that may account for a log not starting at seq 1.
PRUNE_KIND = "prune"
# No retention may be shorter (six months, as EU AI Act Art 26(6) asks of deployers): a
# prune entry naming less accounts for nothing.
RETENTION_FLOOR_DAYS = 183
# How far apart the clocks of two writers of one ledger may be (Lambdas on several
# machines): a time read off an entry or checkpoint is compared with this margin.
CLOCK_SKEW_MS = 5 * 60 * 1000
# Records every key may read (an agent key's verify checks the prunes and rotations too):
# they hold nothing but seqs, hashes and public keys.
READ_KINDS = frozenset({PRUNE_KIND, PUBLIC_KEY_KIND})


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
    return _whole(_field(data, name), name)


def _whole(value: Any, name: str) -> int:
    """``value`` if it is a JSON integer. Refused before any ``int()``: a parser reads
    ``1e999`` as infinity (OverflowError) and ``1e100000000`` as a Decimal whose int()
    takes hours, so converting first would let one number hang a verifier."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field {name} must be a whole number, not {value!r}")
    return value


_INT64 = 1 << 63


def _stored_int(data: Mapping[str, Any], name: str) -> int:
    """``_int``, and within what a checkpoint table keeps (a 64-bit integer, as every
    store keeps seqs and times): a larger one is a ValueError, not an OverflowError where
    it is kept."""
    value = _int(data, name)
    if not 0 <= value < _INT64:
        raise ValueError(f"field {name} must be a whole number from 0 to {_INT64 - 1}")
    return value


_HEX64 = frozenset("0123456789abcdef")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


def _hex64(data: Mapping[str, Any], name: str) -> str:
    value = _str(data, name)
    if len(value) != 64 or not _HEX64.issuperset(value):
        raise ValueError(f"field {name} must be 64 lowercase hex digits")
    return value


# The value types below are NamedTuples, not frozen dataclasses: every function imports
# this module at its cold start, and a dataclass compiled its generated methods there
# (~1 ms of CPU each, a NamedTuple ~0.15; as claros.store.base's). ``_replace`` is
# ``dataclasses.replace``; a NamedTuple also compares equal to a plain tuple of its values.
class Entry(NamedTuple):
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
        return self._asdict()

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


class Checkpoint(NamedTuple):
    workspace: str
    seq: int
    hash: str
    ts: int
    key_id: str
    signature: str  # base64 of the 64-byte Ed25519 signature

    def message(self) -> bytes:
        return checkpoint_message(self.workspace, self.seq, self.hash, self.ts)

    def to_json(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            workspace=_str(data, "workspace"),
            seq=_stored_int(data, "seq"),
            hash=_hex64(data, "hash"),
            ts=_stored_int(data, "ts"),
            key_id=_str(data, "key_id"),
            signature=_str(data, "signature"),
        )


class PublicKey(NamedTuple):
    workspace: str
    key_id: str
    public_key: str  # base64 of the raw 32-byte Ed25519 key
    created_at: int
    algorithm: str = "Ed25519"

    def to_json(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PublicKey:
        """A missing field is a KeyError naming it; a created_at that is no whole number
        a ValueError (see ``_whole``)."""
        return cls(
            workspace=str(data["workspace"]),
            key_id=str(data["key_id"]),
            public_key=str(data["public_key"]),
            created_at=_whole(data["created_at"], "created_at"),
            algorithm=str(data.get("algorithm", "Ed25519")),
        )


def kept_from_json(data: Mapping[str, Any]) -> tuple[int, str, str, Any]:
    """A ``kept`` line's (seq, kind, ref_id, record), for ``ChainVerifier.feed_kept``;
    strictly, as ``Entry.from_json``: a wrong type is a ``ValueError`` naming the field."""
    return _int(data, "seq"), _str(data, "kind"), _str(data, "ref_id"), _field(data, "event")


def key_id_for(raw_public_key: bytes) -> str:
    """A key's id is derived from the key itself, so nobody can relabel one."""
    return "ed25519:" + hashlib.sha256(raw_public_key).hexdigest()[:16]


def _genuine_key(key: PublicKey) -> bool:
    """A 32-byte key whose id is derived from it (a relabelled key vouches for nothing)."""
    try:
        raw = base64.b64decode(key.public_key, validate=True)
    except ValueError:
        return False
    return len(raw) == 32 and key_id_for(raw) == key.key_id


def verify_signature(public_key: PublicKey, message: bytes, signature_b64: str) -> bool:
    # Here, not at the top: every function imports this module (the store's records), and
    # only verifying a checkpoint needs PyNaCl (a cold start's cost for the others).
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    try:
        VerifyKey(base64.b64decode(public_key.public_key)).verify(
            message, base64.b64decode(signature_b64, validate=True)
        )
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


class Failure(NamedTuple):
    seq: int | None
    kind: str | None
    problem: str

    def __str__(self) -> str:
        where = f"seq {self.seq}" if self.seq is not None else "ledger"
        return f"{where} ({self.kind or '-'}): {self.problem}"

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


# How many failures a verify keeps to list (the rest are counted): a crafted export of
# millions of short bad lines would otherwise take ~250 bytes of memory for each byte
# pair (a 4 MB file took 490 MB), and print them all.
MAX_FAILURES_LISTED = 1000


class Failures(list[Failure]):
    """A verify's failures: the first ``MAX_FAILURES_LISTED`` kept, the others counted
    (``unlisted``); ``len`` counts them all, so a verify that failed stays failed."""

    def __init__(self, items: Iterable[Failure] = ()) -> None:
        super().__init__()
        self.unlisted = 0
        self.extend(items)

    def append(self, failure: Failure) -> None:
        if list.__len__(self) < MAX_FAILURES_LISTED:
            super().append(failure)
        else:
            self.unlisted += 1

    def extend(self, items: Iterable[Failure]) -> None:
        for failure in items:
            self.append(failure)
        self.unlisted += getattr(items, "unlisted", 0)

    def __len__(self) -> int:
        return list.__len__(self) + self.unlisted

    def __bool__(self) -> bool:
        return len(self) > 0


class VerifyReport:
    """What verifying a chain found; filled in as it goes (a plain class: the dataclass it
    was cost every function's cold start ~1 ms to define, and only verifying makes one)."""

    __slots__ = (
        "workspace", "entries", "records_compared", "first_seq", "last_seq", "last_hash",
        "checkpoints_verified", "last_checkpoint_seq", "kept_records", "failures",
    )  # fmt: skip

    def __init__(self, workspace: str) -> None:
        self.workspace = workspace
        self.entries = 0
        self.records_compared = 0
        self.first_seq: int | None = None
        self.last_seq: int | None = None
        self.last_hash: str | None = None
        self.checkpoints_verified = 0
        self.last_checkpoint_seq: int | None = None
        # Records kept below a prune's cut (rule and mapping versions), checked against
        # the prune entries that list them.
        self.kept_records = 0
        self.failures: list[Failure] = Failures()

    def __repr__(self) -> str:
        return f"VerifyReport({self.to_json()!r})"

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
            **({"failures_unlisted": unlisted} if (unlisted := _unlisted(self.failures)) else {}),
        }


def _unlisted(failures: list[Failure]) -> int:
    return failures.unlisted if isinstance(failures, Failures) else 0


def pruned_start_problem(
    first: Entry,
    prunes: Iterable[tuple[Entry, Any]],
    checkpoints: Mapping[int, Checkpoint],
    covered_through: int | None,
) -> str | None:
    """Why a log starting at ``first`` (seq > 1) is not accounted for by a prune, or None.

    The one rule every verifier applies: entries disappear only by a prune, so a chain that
    does not start at seq 1 must start right after the ``through_seq`` of a ``prune`` entry
    (``prunes``: the prune entries in the chain with their records) that a signed checkpoint
    covers (``covered_through``: the last seq a verified checkpoint signs), whose
    ``retention_days`` is at least the floor, and whose checkpoint is the one signed at the
    last entry it dropped (``checkpoints``: the signed ones, by seq)."""
    through = first.seq - 1
    missing = f"entries 1..{through} are missing and no prune accounts for them"
    candidates = []
    others = []
    for entry, record in prunes:
        said = record.get("through_seq") if isinstance(record, Mapping) else None
        if said == through and type(said) is int:
            candidates.append((entry, record))
        elif type(said) is int:
            others.append(said)
    if not candidates:
        also = f" (the prunes here go through seq {', '.join(map(str, others))})" if others else ""
        return f"{missing}: no prune entry says through_seq {through}{also}"
    why = ""
    for entry, record in candidates:  # a prune run again names the same cut: any may do
        why = _prune_problem(entry, record, through, checkpoints, covered_through)
        if not why:
            return None
    return f"{missing}: {why}"


def _prune_problem(
    entry: Entry,
    record: Mapping[str, Any],
    through: int,
    checkpoints: Mapping[int, Checkpoint],
    covered_through: int | None,
) -> str:
    days = record.get("retention_days")
    if type(days) is not int:
        return f"the prune through seq {through} (seq {entry.seq}) names no retention_days"
    if days < RETENTION_FLOOR_DAYS:
        return (
            f"the prune through seq {through} keeps {days} days, below the "
            f"{RETENTION_FLOOR_DAYS}-day floor"
        )
    named = record.get("checkpoint")
    named_seq = named.get("seq") if isinstance(named, Mapping) else None
    if named_seq != through:
        return (
            f"the prune through seq {through} names its checkpoint at seq {named_seq}, not "
            f"at the last entry it dropped (seq {through})"
        )
    signed = checkpoints.get(through)
    if signed is None:
        return f"no signed checkpoint at seq {through}, the last entry the prune dropped"
    named_hash = named.get("hash") if isinstance(named, Mapping) else None
    if named_hash != signed.hash:
        return (
            f"the prune through seq {through} names checkpoint hash {named_hash}, the "
            f"signed checkpoint at seq {through} has {signed.hash}"
        )
    if covered_through is None or covered_through < entry.seq:
        return (
            f"the prune entry at seq {entry.seq} is covered by no signed checkpoint (the "
            f"last verified is at seq {covered_through if covered_through is not None else '-'})"
        )
    return ""


_NO_RECORD = object()
_TEXT_RE = rb"([\x20\x21\x23-\x5b\x5d-\x7e]*)"  # printable ASCII but " and \\: bytes = text
_NUM_RE = rb"(0|[1-9][0-9]{0,18})"
# Any 64 bytes: ``feed_written_run`` takes a line only when each of these equals a hash
# it computed (or the previous entry's, one it computed or parsed as 64 hex digits),
# which proves them 64 lowercase hex digits without a character class (that cost the
# regex engine a third of its time on these lines).
_ANY64_RE = rb'"(.{64})"'


def _written_pattern(workspace: str) -> re.Pattern[bytes]:
    """An entry line of ``workspace`` as the export writes it, of a kind whose record is
    neither read nor kept (feed_written_run), its record an object and the line ended.
    Matched up to the line's end (``endpos``), so ``.`` never runs into the next line;
    DOTALL lets ``.*`` jump to that end rather than test each byte of the record."""
    special = b"|".join(re.escape(k.encode()) for k in sorted(NEVER_PRUNED | READ_KINDS))
    quoted = json.encoder.encode_basestring(workspace).encode()
    return re.compile(
        rb'\{"workspace":' + re.escape(quoted) + rb',"seq":' + _NUM_RE
        + rb',"kind":"(?!(?:' + special + rb')")' + _TEXT_RE + rb'","ref_id":"' + _TEXT_RE
        + rb'","ts":' + _NUM_RE + rb',"payload_sha256":' + _ANY64_RE + rb',"prev_hash":'
        + _ANY64_RE + rb',"hash":' + _ANY64_RE + rb',"event":(\{.*)\}\n\Z',
        re.DOTALL,
    )  # fmt: skip


def slim_checkpoints(workspace: str) -> CheckpointTable[Checkpoint]:
    """A table of checkpoints of ``workspace`` whose signatures were checked: read back
    without their signature (``Checkpoint.signature`` is "")."""

    def make(seq: int, hash_: str, ts: int, key_id: str) -> Checkpoint:
        return Checkpoint(workspace, seq, hash_, ts, key_id, "")

    return CheckpointTable(make)


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
        pinned: Iterable[PublicKey] | None = None,
        checked: CheckpointTable[Checkpoint] | None = None,
    ) -> None:
        """``checked``: checkpoints of ``workspace`` whose signatures were checked already
        with keys this verifier takes (``slim_checkpoints``); it becomes the verifier's."""
        self.report = VerifyReport(workspace)
        self.compare_records = compare_records
        # Whether the records kept below a prune's cut are fed (a reader of records gets
        # them); without them, the prune entries' lists of kept versions cannot be checked.
        self.check_kept = compare_records
        self._keys: dict[str, PublicKey] = {}
        # Every signed checkpoint that verified, until the end (``finish`` looks at them
        # all): kept compact, ~50 bytes each.
        self._checkpoints = checked if checked is not None else slim_checkpoints(workspace)
        self._prev: Entry | None = None
        self._first: Entry | None = None
        # Keys trusted from the start (saved with checkpoints, or given): None trusts every
        # key the log lists. Otherwise a checkpoint counts only when signed by a pinned key,
        # or by a key a ``public_key`` entry introduced under a checkpoint of a trusted key.
        self._pinned: dict[str, PublicKey] | None = None
        # (seq, key_id, vouched_at) of the public_key records: a key introduced at seq once
        # a trusted checkpoint covers vouched_at, the seq of the entry that vouches for the
        # record (its own, or for a kept one the prune entry that lists it).
        self._intros: list[tuple[int, str, int]] = []
        self._trust: dict[str, int] = {}  # key_id -> the first seq it may sign at
        # (seq, kind, ref_id, payload_sha256) of every record a prune keeps that went past
        # (a few per rule edit, so small), and the prune entries' records, for finish().
        self._versions: list[tuple[int, str, str, str]] = []
        self._prunes: list[tuple[Entry, Any]] = []
        # The kept records fed (as in _versions), and the keys of the kept public_key ones:
        # they count for nothing until finish() finds the prune that accounts for them.
        self._kept: list[tuple[int, str, str, str]] = []
        self._kept_keys: list[tuple[int, PublicKey]] = []
        # When what is verified was made (an export's exported_at), if known: no prune
        # entry in it can be stamped later.
        self.made_at: int | None = None
        # Matched in bytes, or in place in a buffer of shared memory (claros verify's workers).
        self._fast: Callable[[Any, int, int], re.Match[bytes] | None] | None = None
        for key in public_keys:
            self._add_key(key)
        if pinned is not None:
            self._pinned = {}
            for key in pinned:
                if key.workspace == workspace and _genuine_key(key):
                    self._pinned[key.key_id] = key
                    self._keys.setdefault(key.key_id, key)
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

    def add_checkpoint(self, cp: Checkpoint, *, checked: PublicKey | None = None) -> None:
        """A checkpoint after the constructor's, as they stream past. ``checked``: its
        signature was verified already with that key, one of this verifier's; only what
        verification needs of it is kept."""
        if checked is None:
            self._add_checkpoint(cp)
        else:
            self._keep_checkpoint(cp, checked)

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
        # What is kept of a verified checkpoint: its seq, hash, ts and key, not the
        # signature (checked), and one copy of the workspace and key id for all of them
        # (an export of 1M entries brings 10,000 checkpoints).
        self._keep_checkpoint(cp, key)

    def _keep_checkpoint(self, cp: Checkpoint, key: PublicKey) -> None:
        self._checkpoints.put(cp.seq, cp.hash, cp.ts, key.key_id)

    def feed_kept(self, seq: int, kind: str, ref_id: str, record: Any) -> None:
        """A record kept below a prune's cut (its entry is gone), before any entry.

        It stands for nothing until ``finish`` finds a prune entry that verifies and
        reaches its seq (the prune's count and sha256 then cover it); one no prune
        accounts for is a failure, and a kept key introduces nothing."""
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
        kept = (seq, kind, ref_id, payload)
        self._versions.append(kept)
        self._kept.append(kept)
        self.report.kept_records += 1
        if kind == PUBLIC_KEY_KIND:
            key = self._intro_key(seq, record)
            if key is not None:
                self._kept_keys.append((seq, key))

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
        if entry.kind in READ_KINDS and record is not _NO_RECORD and record is not None:
            try:
                genuine = payload_sha256(record) == entry.payload_sha256
            except CanonicalError:
                genuine = False
            if genuine:  # an edited record is named by _compare; it vouches for nothing
                self._note_record(entry, record)

    def _note_record(self, entry: Entry, record: Any) -> None:
        """A prune or public key record, known to be the one its entry hashed."""
        if entry.kind == PRUNE_KIND:
            self._prunes.append((entry, record))
        elif entry.kind == PUBLIC_KEY_KIND:
            key = self._intro_key(entry.seq, record)
            if key is not None:
                self._keys.setdefault(key.key_id, key)
                self._intros.append((entry.seq, key.key_id, entry.seq))

    def _intro_key(self, seq: int, record: Any) -> PublicKey | None:
        """The key a public key record (an entry's, or a kept one) may introduce; None
        (and the failure named) if it is not a genuine key."""
        if not isinstance(record, Mapping):
            return None
        try:
            key = PublicKey.from_json({**record, "workspace": self.report.workspace})
        except (KeyError, TypeError, ValueError):
            self._fail(seq, PUBLIC_KEY_KIND, "public key record is not in the shape of a key")
            return None
        if not _genuine_key(key):
            self._fail(seq, PUBLIC_KEY_KIND, f"key {key.key_id} does not match its public key")
            return None
        return key

    def feed_raw(self, entry: Entry, raw: bytes | None) -> None:
        """``feed`` with the record as the bytes it was written as (None: no record).

        Exports and streams write each record as its canonical JSON, the very bytes
        ``payload_sha256`` hashed, so hashing them compares the record without parsing or
        re-canonicalizing it. Bytes that do not hash right are parsed and compared as
        ``feed`` compares (a record written in another layout is still the same record)."""
        genuine = raw is not None and hashlib.sha256(raw).hexdigest() == entry.payload_sha256
        if not self.compare_records or genuine:
            self.feed(entry)
            if genuine and entry.kind in READ_KINDS:  # the kinds whose content is read
                try:
                    self._note_record(entry, jsonutil.loads(raw or b""))
                except (ValueError, RecursionError) as exc:
                    self._fail(entry.seq, entry.kind, f"record {entry.ref_id} is not JSON: {exc}")
            if genuine and self.compare_records:
                self.report.records_compared += 1
        elif raw is None:
            self.feed(entry, None)
        else:
            try:
                record = jsonutil.loads(raw)
            except (ValueError, RecursionError) as exc:
                self.feed(entry)
                self._fail(entry.seq, entry.kind, f"record {entry.ref_id} is not valid JSON: {exc}")
                self.report.records_compared += 1
                return
            self.feed(entry, record)

    def feed_written_run(
        self,
        source: ChunkedLines,
        digest: Any,
        leave: Container[int] = (),
        limit: int = 1 << 62,
    ) -> int:
        """Entry lines exactly as the export writes them, fed while each one holds; how
        many were taken.

        The fast path of ``feed_raw`` for a run of ordinary entries (no prune, key or rule
        version: their records are read or kept), read straight from ``source``'s buffer:
        a line is taken here only if ``feed_raw`` would find nothing wrong with it (this
        workspace, its record's bytes hash to its ``payload_sha256``, its hash recomputes,
        it links to the entry before it, seq contiguous, it matches any checkpoint at its
        seq), and the state is left as ``feed_raw`` leaves it. The hash is recomputed over
        the fields' bytes as written: the pattern takes kind and ref_id only as printable
        ASCII without quote or backslash, and numbers without leading zeros, so those
        bytes are the very text ``entry_hash`` hashes; the three hashes are proved hex by
        being equal to ones computed here. The lines taken are added to ``digest``, one
        update per buffer. It stops at the first line that is anything else (or whose seq
        is in ``leave``), which it leaves in ``source`` for the general path, or at the end
        of a buffer once ``limit`` lines were taken."""
        prev = self._prev
        if prev is None or not self.compare_records:
            return 0
        if self._fast is None:  # built once: each failing line starts a new run
            self._fast = _written_pattern(self.report.workspace).match
        match, sha256, join, update = self._fast, hashlib.sha256, b"\n".join, digest.update
        workspace = self.report.workspace.encode()
        # The checkpoints still ahead, in seq order: seqs go up one at a time here, so the
        # next one is the only one a line can meet.
        table = self._checkpoints
        cp_seqs = table.seqs
        at = table.index_after(prev.seq)
        next_cp = cp_seqs[at] if at < len(cp_seqs) else -1
        prev_seq, prev_hash = prev.seq, prev.hash.encode()
        rep = self.report
        taken = verified = 0
        last_cp = rep.last_checkpoint_seq
        last: tuple[bytes, ...] | None = None
        stopped = False
        while not stopped and taken < limit and source.fill():
            buf, pos, end = source.buf, source.pos, source.end
            find = buf.find
            start = pos
            while pos < end:
                stop = find(b"\n", pos, end) + 1  # 0: the stream's last line, unended
                m = match(buf, pos, stop) if stop else None
                if m is None:
                    stopped = True
                    break
                g = m.groups()
                seq_b, kind, ref, ts, payload, link, hash_, raw = g
                seq = int(seq_b)
                if (
                    seq != prev_seq + 1
                    or link != prev_hash
                    or seq in leave
                    or sha256(raw).hexdigest().encode() != payload
                    or sha256(join((workspace, seq_b, kind, ref, ts, payload, link)))
                    .hexdigest()
                    .encode()
                    != hash_
                ):
                    stopped = True
                    break
                if seq == next_cp:
                    if table.hash_at(at).encode() != hash_:
                        stopped = True
                        break
                    verified += 1
                    last_cp = seq
                    at += 1
                    next_cp = cp_seqs[at] if at < len(cp_seqs) else -1
                prev_seq, prev_hash, last = seq, hash_, g
                pos = stop
                taken += 1
            if pos > start:
                update(memoryview(buf)[start:pos])
                source.pos = pos
        if last is not None:
            _, kind, ref, ts, payload, link, hash_, _ = last
            text = [f.decode() for f in (kind, ref, payload, link, hash_)]
            self._prev = Entry(
                self.report.workspace, prev_seq, text[0], text[1], int(ts), *text[2:]
            )
            rep.entries += taken
            rep.records_compared += taken
            rep.checkpoints_verified += verified
            rep.last_checkpoint_seq = last_cp
            if rep.last_seq is None or prev_seq > rep.last_seq:
                rep.last_seq, rep.last_hash = prev_seq, self._prev.hash
        return taken

    # --- ranges of an export checked in other processes (claros_guard.verify_parallel) ---
    # A worker runs ``feed_written_run`` over its range, each run started by ``start_run``;
    # the parent checks each run's first link and seq against its own chain (``prev``)
    # and takes the run's outcome with ``take_run``. The per-line checks stay those of
    # ``feed_written_run``: nothing is checked another way.
    def checked_checkpoints(self) -> list[tuple[int, str]]:
        """(seq, hash) of the signed checkpoints the chain is compared with, in order."""
        table = self._checkpoints
        return [(seq, table.hash_at(i)) for i, seq in enumerate(table.seqs)]

    def checkpoints_between(self, lo: int, hi: int) -> Span:
        """The signed checkpoints with ``lo <= seq < hi``, for another verifier's
        ``CheckpointTable.put_span``."""
        return self._checkpoints.span(lo, hi)

    def start_run(self, seq: int, prev_hash: str) -> None:
        """The next ``feed_written_run`` takes its first line as if it followed an entry
        at ``seq - 1`` with hash ``prev_hash``: for a worker, whose parent checks that."""
        self._prev = Entry(self.report.workspace, seq - 1, "", "", 0, "", "", prev_hash)

    @property
    def prev(self) -> Entry | None:
        """The last entry fed."""
        return self._prev

    def take_run(self, count: int, verified: int, last_cp: int | None, last: Entry) -> None:
        """The outcome of a run a worker took with ``feed_written_run`` (``count`` lines,
        ``verified`` checkpoints met, the last at ``last_cp``, ending at ``last``), once
        its first line was found to follow ``prev``: the state ``feed_written_run`` would
        have left."""
        rep = self.report
        self._prev = last
        rep.entries += count
        rep.records_compared += count
        rep.checkpoints_verified += verified
        if verified:
            rep.last_checkpoint_seq = last_cp
        if rep.last_seq is None or last.seq > rep.last_seq:
            rep.last_seq, rep.last_hash = last.seq, last.hash

    def _check_start(self, entry: Entry) -> None:
        self._first = entry
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
        beyond = list(self._checkpoints.seqs[self._checkpoints.index_after(last) :])
        if beyond:
            self._fail(
                beyond[-1],
                "checkpoint",
                f"tail cut off: signed checkpoint at seq {beyond[-1]} but the log ends at "
                f"seq {last}",
            )
        first = rep.first_seq
        if first is not None and any(k[0] >= first for k in self._kept):
            bad = min(k[0] for k in self._kept if k[0] >= first)
            self._fail(bad, None, f"kept record at seq {bad}, inside the log (from seq {first})")
        verified = [(entry.seq, self._check_prune(entry, record)) for entry, record in self._prunes]
        self._check_prune_clocks()
        self._account_kept([(seq, through) for seq, through in verified if through is not None])
        start = self._first
        if start is not None and start.seq > 1:
            problem = pruned_start_problem(
                start, self._prunes, self._checkpoints, rep.last_checkpoint_seq
            )
            if problem:
                self._fail(start.seq, start.kind, problem)
        if self._pinned is not None:
            self._check_pins()
        return rep

    def _check_prune_clocks(self) -> None:
        """A prune drops what is older than its retention by the clock that stamps its
        entry; a clock set ahead for it (and back) drops younger entries under a retention
        that looks right. It shows: a checkpoint signs entries written before it, so one
        signed after the prune entry is never stamped before it (beyond the writers' skew),
        and neither is the export the prune entry is in."""
        table = self._checkpoints
        for entry, _ in self._prunes:
            floor = entry.ts - CLOCK_SKEW_MS
            for at in range(table.index_after(entry.seq), len(table.seqs)):
                if table.ts_at(at) < floor:
                    self._fail(
                        table.seqs[at],
                        "checkpoint",
                        f"signed at {_utc(table.ts_at(at))}, stamped before the prune entry at "
                        f"seq {entry.seq} ({_utc(entry.ts)}) that it covers: the prune's clock "
                        "was ahead, so the entries it dropped may be younger than its retention",
                    )
                    break
            if self.made_at is not None and entry.ts > self.made_at + CLOCK_SKEW_MS:
                self._fail(
                    entry.seq,
                    entry.kind,
                    f"the prune entry ({_utc(entry.ts)}) is stamped after the export was made "
                    f"({_utc(self.made_at)}): the prune's clock was ahead, so the entries it "
                    "dropped may be younger than its retention",
                )

    def _check_pins(self) -> None:
        """Every checkpoint signed by a pinned key, or by one a trusted checkpoint's
        ``public_key`` entry introduced (at or before the seqs it signs)."""
        assert self._pinned is not None
        trust = {key_id: 0 for key_id in self._pinned}
        ordered = list(self._checkpoints.values())  # in seq order
        changed = True
        while changed:  # a few keys, a few rotations: a fixpoint in a pass or two
            changed = False
            for cp in ordered:
                if trust.get(cp.key_id, cp.seq + 1) > cp.seq:
                    continue
                for seq, key_id, vouched_at in self._intros:
                    if vouched_at <= cp.seq and trust.get(key_id, seq + 1) > seq:
                        trust[key_id] = seq
                        changed = True
        self._trust = trust
        pins = ", ".join(sorted(self._pinned)) or "none"
        for cp in ordered:
            if trust.get(cp.key_id, cp.seq + 1) > cp.seq:
                self._fail(
                    cp.seq,
                    "checkpoint",
                    f"signed by key {cp.key_id}, which is not pinned (pinned: {pins}) and "
                    "no checkpoint signed by a pinned key introduced it",
                )

    def trusted(self, key_id: str) -> bool:
        """After ``finish``: may ``key_id`` sign for this log (always, with no pins)?"""
        return self._pinned is None or key_id in self._trust

    @property
    def pinned_ids(self) -> list[str] | None:
        return None if self._pinned is None else sorted(self._pinned)

    def _check_prune(self, entry: Entry, record: Any) -> int | None:
        """A prune entry's list of what it kept matches the kept records and versions.

        Its through_seq if it accounts for the kept records at or below it (its count and
        sha256 cover every one), else None: it failed (named), or this reader is not given
        the kept records, so it checked no list."""
        seq, kind = entry.seq, entry.kind
        try:  # whole numbers refused before any int(): see _whole
            through = _int(record, "through_seq")
            listed = _int(record["kept"], "count")
            digest, anchor = str(record["kept"]["sha256"]), record["checkpoint"]
        except (KeyError, TypeError, ValueError):
            self._fail(seq, kind, f"prune record {entry.ref_id} is not in the prune's shape")
            return None
        kept = sorted(v for v in self._versions if v[0] <= through)
        if not self.check_kept:  # this reader is not given the kept records
            kept, listed, digest = [], 0, kept_digest([])
        problems = len(self.report.failures)
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
        if len(self.report.failures) > problems or not self.check_kept:
            return None
        return through

    def _account_kept(self, prunes: list[tuple[int, int]]) -> None:
        """Every kept record against the prunes that account for theirs ((the prune
        entry's seq, its through_seq)): a record one of them reaches is listed in it (its
        count and sha256 cover every version at or below); any other stands for nothing,
        and says so. A kept key is introduced at its seq once a trusted checkpoint covers
        the prune entry: in the chain, that entry is all that vouches for it."""
        for seq, kind, ref_id, _ in self._kept:
            if _kept_by(seq, prunes) is None:
                why = self._unkept_why(seq)
                self._fail(seq, kind, f"kept record {ref_id} is accounted for by no prune: {why}")
        for seq, key in self._kept_keys:
            vouched_at = _kept_by(seq, prunes)
            if vouched_at is not None:
                self._keys.setdefault(key.key_id, key)
                self._intros.append((seq, key.key_id, vouched_at))

    def _unkept_why(self, seq: int) -> str:
        """Why no prune accounts for a record kept at ``seq``."""
        if seq < 1:
            return f"seq {seq} is before any entry (seqs start at 1)"
        said = [r.get("through_seq") if isinstance(r, Mapping) else None for _, r in self._prunes]
        reach = sorted({t for t in said if type(t) is int and t >= seq})
        if reach and not self.check_kept:
            return f"this reader is not given the records the prune through seq {reach[0]} lists"
        if reach:
            return f"the prune through seq {reach[0]} does not verify (above)"
        if not self._prunes:
            return "the log has no prune entry, so nothing was kept"
        return f"no prune entry goes through seq {seq}"


def _utc(ms: int) -> str:
    """A time in ms since 1970 as UTC text (the ms as they are when out of range)."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"


def _kept_by(seq: int, prunes: Iterable[tuple[int, int]]) -> int | None:
    """The seq of the first prune entry (of ``prunes``: (its seq, its through_seq)) that
    keeps a record at ``seq``, or None."""
    return min((at for at, through in prunes if 1 <= seq <= through), default=None)


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
