"""The tamper-evident log (claros.ledger): shared vectors, then one test per failure class.

Expected hashes in tests/data/ledger_vectors.json were computed with hashlib and the spec's
formulas, not with Claros. The verifier tests pin every failure exactly: seq, kind and the
problem text (a full-match regex with the hashes that differ).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import pytest
from nacl.signing import SigningKey

from claros import jsonutil
from claros.canonical import canonical
from claros.ledger import (
    KINDS,
    ZERO_HASH,
    ChainVerifier,
    Checkpoint,
    Entry,
    Failure,
    PublicKey,
    VerifyReport,
    checkpoint_message,
    entry_hash,
    kept_digest,
    kept_from_json,
    key_id_for,
    payload_sha256,
    verify_entries,
    verify_signature,
)
from tests.vectors import CheckpointVector, EntryVector, KeyVector, load_ledger_vectors

VEC = load_ledger_vectors()
ALL_ENTRIES = VEC.chain + VEC.entries


# --- vectors -----------------------------------------------------------------------------


def test_vector_file_is_self_consistent() -> None:
    # Recomputed here with hashlib alone: the file's own numbers agree with the spec text.
    prev = ZERO_HASH
    for v in VEC.chain:
        assert v.prev_hash == prev
        prev = v.hash
    for v in ALL_ENTRIES:
        assert hashlib.sha256(v.canonical.encode()).hexdigest() == v.payload_sha256
        text = f"{v.workspace}\n{v.seq}\n{v.kind}\n{v.ref_id}\n{v.ts}\n{v.payload_sha256}\n"
        assert v.hash_input == text + v.prev_hash
        assert hashlib.sha256(v.hash_input.encode()).hexdigest() == v.hash


@pytest.mark.parametrize("v", ALL_ENTRIES, ids=lambda v: v.name)
def test_payload_sha256_vector(v: EntryVector) -> None:
    for parse in (jsonutil.loads, json.loads):
        record = parse(v.record)
        assert canonical(record) == v.canonical
        assert payload_sha256(record) == v.payload_sha256


@pytest.mark.parametrize("v", ALL_ENTRIES, ids=lambda v: v.name)
def test_entry_hash_vector(v: EntryVector) -> None:
    got = entry_hash(v.workspace, v.seq, v.kind, v.ref_id, v.ts, v.payload_sha256, v.prev_hash)
    assert got == v.hash
    built = Entry.build(
        v.workspace, v.seq, v.kind, v.ref_id, v.ts, jsonutil.loads(v.record), v.prev_hash
    )
    assert built.to_json() == v.entry_json()
    assert built.expected_hash() == v.hash


@pytest.mark.parametrize("k", VEC.keys, ids=lambda k: k.name)
def test_key_vector(k: KeyVector) -> None:
    raw = bytes(SigningKey(k.seed).verify_key)
    assert base64.b64encode(raw).decode() == k.public_key
    assert key_id_for(raw) == k.key_id


@pytest.mark.parametrize("cp", VEC.checkpoints, ids=lambda c: f"seq{c.seq}")
def test_checkpoint_message_vector(cp: CheckpointVector) -> None:
    assert checkpoint_message(cp.workspace, cp.seq, cp.hash, cp.ts) == cp.message
    assert Checkpoint.from_json(cp.checkpoint_json()).message() == cp.message
    assert cp.message.startswith(b"claros-ledger-checkpoint\n")


@pytest.mark.parametrize("cp", VEC.checkpoints, ids=lambda c: f"seq{c.seq}")
def test_checkpoint_signature_vector(cp: CheckpointVector) -> None:
    key = VEC.key(cp.signed_with)
    public = PublicKey(key.workspace, key.key_id, key.public_key, key.created_at)
    # Ed25519 is deterministic: the same seed signs the same message to the same bytes.
    assert base64.b64encode(SigningKey(key.seed).sign(cp.message).signature).decode() == (
        cp.signature
    )
    assert verify_signature(public, cp.message, cp.signature)
    assert not verify_signature(public, cp.message + b"0", cp.signature)
    other = next(k for k in VEC.keys if k.name != key.name)
    assert not verify_signature(
        PublicKey(other.workspace, other.key_id, other.public_key, other.created_at),
        cp.message,
        cp.signature,
    )


def test_vector_chain_verifies_with_records_and_rotated_keys() -> None:
    report = verify_entries(
        VEC.chain[0].workspace,
        [(Entry.from_json(v.entry_json()), jsonutil.loads(v.record)) for v in VEC.chain],
        [Checkpoint.from_json(c.checkpoint_json()) for c in VEC.checkpoints],
        [PublicKey(k.workspace, k.key_id, k.public_key, k.created_at) for k in VEC.keys],
        compare_records=True,
    )
    assert report.failures == []
    assert report.ok
    assert (report.entries, report.records_compared) == (5, 5)
    assert (report.checkpoints_verified, report.last_checkpoint_seq) == (2, 5)
    assert (report.first_seq, report.last_seq, report.last_hash) == (1, 5, VEC.chain[-1].hash)
    assert report.unsigned_tail == 0


# --- signatures --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "signature",
    [
        "",
        "not base64!",
        base64.b64encode(b"\0" * 63).decode(),
        base64.b64encode(b"\0" * 64).decode(),
    ],
    ids=["empty", "not-base64", "short", "zeros"],
)
def test_verify_signature_refuses_garbage(signature: str) -> None:
    cp = VEC.checkpoints[0]
    key = VEC.key(cp.signed_with)
    public = PublicKey(key.workspace, key.key_id, key.public_key, key.created_at)
    assert verify_signature(public, cp.message, signature) is False


def test_verify_signature_refuses_a_malformed_public_key() -> None:
    cp = VEC.checkpoints[0]
    public = PublicKey(cp.workspace, cp.key_id, base64.b64encode(b"short").decode(), 0)
    assert verify_signature(public, cp.message, cp.signature) is False


# --- round trips -------------------------------------------------------------------------


@pytest.mark.parametrize("v", ALL_ENTRIES, ids=lambda v: v.name)
def test_entry_json_round_trip(v: EntryVector) -> None:
    entry = Entry.from_json(v.entry_json())
    assert entry.to_json() == v.entry_json()
    assert Entry.from_json(json.loads(json.dumps(entry.to_json()))) == entry


def test_checkpoint_and_public_key_json_round_trip() -> None:
    cp = Checkpoint.from_json(VEC.checkpoints[0].checkpoint_json())
    assert Checkpoint.from_json(json.loads(json.dumps(cp.to_json()))) == cp
    assert cp.to_json() == VEC.checkpoints[0].checkpoint_json()
    k = VEC.keys[0]
    data = {"workspace": k.workspace, "key_id": k.key_id, "public_key": k.public_key}
    key = PublicKey.from_json({**data, "created_at": k.created_at})
    assert key.algorithm == "Ed25519"
    assert key.to_json() == {**data, "created_at": k.created_at, "algorithm": "Ed25519"}
    assert PublicKey.from_json(key.to_json()) == key


# --- the verifier, one failure class at a time -------------------------------------------

WS = "ws_test"
KEY_A = SigningKey(bytes(range(1, 33)))
KEY_B = SigningKey(bytes(range(101, 133)))
T0 = 1_767_225_600_000


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _hash_of(e: Entry) -> str:
    """The spec's formula, by hand (independent of entry_hash)."""
    return _sha(
        f"{e.workspace}\n{e.seq}\n{e.kind}\n{e.ref_id}\n{e.ts}\n{e.payload_sha256}\n{e.prev_hash}"
    )


def public(sk: SigningKey, workspace: str = WS, created_at: int = T0) -> PublicKey:
    raw = bytes(sk.verify_key)
    return PublicKey(workspace, key_id_for(raw), base64.b64encode(raw).decode(), created_at)


def sign(sk: SigningKey, seq: int, hash_: str, ts: int | None = None, ws: str = WS) -> Checkpoint:
    ts = T0 + seq * 1000 + 500 if ts is None else ts
    msg = f"claros-ledger-checkpoint\n{ws}\n{seq}\n{hash_}\n{ts}".encode()
    sig = base64.b64encode(sk.sign(msg).signature).decode()
    return Checkpoint(ws, seq, hash_, ts, public(sk).key_id, sig)


def record(seq: int) -> dict[str, Any]:
    return {
        "id": f"r{seq}",
        "n": seq,
        "amount": Decimal("12.50") * seq,
        "note": None,
        "meta": {"tags": [], "by": "Zoë"},
    }


def make_chain(n: int, ws: str = WS) -> list[tuple[Entry, dict[str, Any]]]:
    out: list[tuple[Entry, dict[str, Any]]] = []
    prev = ZERO_HASH
    for seq in range(1, n + 1):
        rec = record(seq)
        kind = KINDS[(seq - 1) % 4]  # check, approval, override, outcome
        entry = Entry.build(ws, seq, kind, f"r{seq}", T0 + seq * 1000, rec, prev)
        assert entry.hash == _hash_of(entry)
        out.append((entry, rec))
        prev = entry.hash
    return out


CHAIN = make_chain(8)
E = {e.seq: e for e, _ in CHAIN}  # E[3] is the entry at seq 3
H = {seq: e.hash for seq, e in E.items()}


def verify(
    items: Iterable[tuple[Entry, Any]],
    checkpoints: Sequence[Checkpoint] = (),
    keys: Sequence[PublicKey] = (public(KEY_A),),
    *,
    compare_records: bool = True,
) -> VerifyReport:
    return verify_entries(WS, list(items), checkpoints, keys, compare_records=compare_records)


def assert_failures(report: VerifyReport, *expected: tuple[int | None, str | None, str]) -> None:
    """Exactly these failures, in this order; each problem must fully match its regex."""
    got = [(f.seq, f.kind, f.problem) for f in report.failures]
    assert len(got) == len(expected), "\n".join(map(str, report.failures))
    for (seq, kind, problem), (want_seq, want_kind, pattern) in zip(got, expected, strict=True):
        assert (seq, kind) == (want_seq, want_kind), problem
        assert re.fullmatch(pattern, problem), f"{problem!r} !~ {pattern!r}"
    assert report.ok is (not expected)


def first(n: int) -> list[tuple[Entry, Any]]:
    return CHAIN[:n]


def test_valid_chain() -> None:
    report = verify(first(5), [sign(KEY_A, 3, H[3])])
    assert_failures(report)
    assert (report.entries, report.records_compared, report.checkpoints_verified) == (5, 5, 1)
    assert (report.first_seq, report.last_seq, report.last_hash) == (1, 5, H[5])
    assert (report.last_checkpoint_seq, report.unsigned_tail) == (3, 2)


def test_empty_fields_added_to_a_record_change_nothing() -> None:
    items = [(e, {**r, "extra": None, "more": {"x": ""}}) for e, r in first(4)]
    assert_failures(verify(items))


@pytest.mark.parametrize(
    "change",
    [{"ts": T0 + 3001}, {"ref_id": "r33"}, {"kind": "approval"}, {"payload_sha256": "0" * 64}],
    ids=lambda c: next(iter(c)),
)
def test_edited_entry_field(change: dict[str, Any]) -> None:
    edited = E[3]._replace(**change)
    items = [*first(2), (edited, None), *CHAIN[3:5]]
    report = verify(items, compare_records=False)
    assert_failures(
        report,
        (3, edited.kind, rf"entry edited: hash {H[3]} != recomputed {_hash_of(edited)}"),
    )


def test_edited_entry_hash_breaks_the_next_link() -> None:
    edited = E[3]._replace(hash="ab" * 32)
    report = verify([*first(2), (edited, CHAIN[2][1]), *CHAIN[3:5]])
    assert_failures(
        report,
        (3, "override", rf"entry edited: hash {'ab' * 32} != recomputed {H[3]}"),
        (4, "outcome", rf"broken link: prev_hash {H[3]} != hash of seq 3 \({'ab' * 32}\)"),
    )


def test_edited_record() -> None:
    items = list(first(5))
    changed = {**items[2][1], "amount": Decimal("9999.00")}
    items[2] = (items[2][0], changed)
    report = verify(items)
    got = payload_sha256(changed)
    assert got != E[3].payload_sha256
    assert_failures(
        report,
        (3, "override", rf"record r3 edited: payload_sha256 {got} != {E[3].payload_sha256}"),
    )
    assert report.records_compared == 5


def test_deleted_record() -> None:
    items = list(first(5))
    items[1] = (items[1][0], None)
    report = verify(items)
    assert_failures(report, (2, "approval", r"record r2 deleted"))
    assert report.records_compared == 4


def test_records_not_compared_unless_asked() -> None:
    items = list(first(5))
    items[1] = (items[1][0], None)
    items[2] = (items[2][0], {"id": "r3", "forged": True})
    report = verify(items, compare_records=False)
    assert_failures(report)
    assert (report.entries, report.records_compared) == (5, 0)


def test_entries_without_records_are_not_compared() -> None:
    report = verify_entries(WS, [e for e, _ in first(4)], compare_records=True)
    assert_failures(report)
    assert (report.entries, report.records_compared) == (4, 0)


def test_missing_entry() -> None:
    report = verify([*first(2), *CHAIN[3:6]])
    assert_failures(
        report,
        (4, "outcome", r"missing entries: seq 3"),
        (4, "outcome", rf"broken link: prev_hash {H[3]} != hash of seq 2 \({H[2]}\)"),
    )


def test_missing_entries_run() -> None:
    report = verify([*first(2), *CHAIN[5:7]])
    assert_failures(
        report,
        (6, "approval", r"missing entries: seq 3\.\.5"),
        (6, "approval", rf"broken link: prev_hash {H[5]} != hash of seq 2 \({H[2]}\)"),
    )


def test_reordered_entries() -> None:
    c = CHAIN
    report = verify([c[0], c[1], c[3], c[2], c[4]])
    link = r"broken link: prev_hash {} != hash of seq {} \({}\)"
    assert_failures(
        report,
        (4, "outcome", r"missing entries: seq 3"),
        (4, "outcome", link.format(H[3], 2, H[2])),
        (3, "override", r"entry out of order: seq 3 after seq 4"),
        (3, "override", link.format(H[2], 4, H[4])),
        (5, "check", r"missing entries: seq 4"),
        (5, "check", link.format(H[4], 3, H[3])),
    )


def test_duplicated_entry() -> None:
    c = CHAIN
    report = verify([c[0], c[1], c[1], c[2]])
    assert_failures(
        report,
        (2, "approval", r"entry out of order: seq 2 after seq 2"),
        (2, "approval", rf"broken link: prev_hash {H[1]} != hash of seq 2 \({H[2]}\)"),
    )


def test_broken_link_after_a_rewritten_entry() -> None:
    # Entry 3 rebuilt over another record: its own hash is right, entry 4 no longer links.
    forged = Entry.build(WS, 3, "override", "r3", E[3].ts, {"id": "r3", "n": 0}, H[2])
    report = verify([*first(2), (forged, None), *CHAIN[3:5]], compare_records=False)
    assert_failures(
        report,
        (4, "outcome", rf"broken link: prev_hash {H[3]} != hash of seq 3 \({forged.hash}\)"),
    )


def test_broken_link_wrong_prev_hash() -> None:
    forged = Entry.build(WS, 3, "override", "r3", E[3].ts, CHAIN[2][1], "f" * 64)
    report = verify([*first(2), (forged, CHAIN[2][1]), *CHAIN[3:4]])
    assert_failures(
        report,
        (3, "override", rf"broken link: prev_hash {'f' * 64} != hash of seq 2 \({H[2]}\)"),
        (4, "outcome", rf"broken link: prev_hash {H[3]} != hash of seq 3 \({forged.hash}\)"),
    )


def test_bad_first_prev_hash() -> None:
    forged = Entry.build(WS, 1, "check", "r1", E[1].ts, CHAIN[0][1], "1" * 64)
    report = verify([(forged, CHAIN[0][1])])
    assert_failures(report, (1, "check", rf"first entry's prev_hash is {'1' * 64}, not zeros"))


def _bad_signatures() -> dict[str, Checkpoint]:
    good = sign(KEY_A, 3, H[3])
    raw = bytearray(base64.b64decode(good.signature))
    raw[10] ^= 0x01
    by_b = sign(KEY_B, 3, H[3])
    return {
        "bit-flipped": good._replace(signature=base64.b64encode(raw).decode()),
        "other-key": good._replace(signature=by_b.signature),
        "ts-edited": good._replace(ts=good.ts + 1),
        "hash-edited": good._replace(hash=H[4]),
        "seq-edited": good._replace(seq=4, hash=H[4]),
        "not-base64": good._replace(signature="%%%"),
        "truncated": good._replace(signature=good.signature[:40]),
    }


@pytest.mark.parametrize("name", list(_bad_signatures()))
def test_bad_checkpoint_signature(name: str) -> None:
    cp = _bad_signatures()[name]
    report = verify(first(5), [cp])
    assert_failures(
        report, (cp.seq, "checkpoint", rf"bad signature \(key {public(KEY_A).key_id}\)")
    )
    assert (report.checkpoints_verified, report.last_checkpoint_seq) == (0, None)
    assert report.unsigned_tail == 5


def test_checkpoint_by_unknown_key() -> None:
    report = verify(first(5), [sign(KEY_B, 3, H[3])], [public(KEY_A)])
    assert_failures(report, (3, "checkpoint", rf"signed by unknown key {public(KEY_B).key_id}"))
    assert report.checkpoints_verified == 0


def test_key_of_another_workspace_is_unknown() -> None:
    report = verify(first(5), [sign(KEY_A, 3, H[3])], [public(KEY_A, workspace="ws_other")])
    assert_failures(report, (3, "checkpoint", rf"signed by unknown key {public(KEY_A).key_id}"))


def test_checkpoint_of_another_workspace() -> None:
    cp = sign(KEY_A, 3, H[3], ws="ws_other")
    report = verify(first(5), [cp])
    assert_failures(report, (3, "checkpoint", r"checkpoint is for workspace 'ws_other'"))


def test_entry_of_another_workspace() -> None:
    other = make_chain(3, ws="ws_other")
    report = verify([*first(2), other[2]])
    e = other[2][0]
    assert_failures(
        report,
        (3, "override", r"entry is for workspace 'ws_other'"),
        (3, "override", rf"broken link: prev_hash {e.prev_hash} != hash of seq 2 \({H[2]}\)"),
    )


def test_checkpoint_hash_disagrees_with_entry() -> None:
    report = verify(first(5), [sign(KEY_A, 3, "cd" * 32)])
    assert_failures(
        report, (3, "override", rf"signed checkpoint says hash {'cd' * 32}, entry has {H[3]}")
    )
    assert report.checkpoints_verified == 0


def test_two_checkpoints_disagree() -> None:
    good, bad = sign(KEY_A, 3, H[3]), sign(KEY_A, 3, "cd" * 32, ts=T0 + 9_999)
    report = verify(first(5), [good, bad])
    assert_failures(
        report,
        (3, "checkpoint", rf"two signed checkpoints disagree \(hash {H[3]} vs {'cd' * 32}\)"),
    )
    assert report.checkpoints_verified == 1

    # The other way round the kept checkpoint is the wrong one, and the entry says so.
    report = verify(first(5), [bad, good])
    assert_failures(
        report,
        (3, "checkpoint", rf"two signed checkpoints disagree \(hash {'cd' * 32} vs {H[3]}\)"),
        (3, "override", rf"signed checkpoint says hash {'cd' * 32}, entry has {H[3]}"),
    )


def test_same_checkpoint_twice_is_fine() -> None:
    # Re-signed later over the same hash: both agree, and the entry is checked once.
    report = verify(first(5), [sign(KEY_A, 3, H[3]), sign(KEY_A, 3, H[3], ts=T0 + 99_000)])
    assert_failures(report)
    assert report.checkpoints_verified == 1


def test_tail_cut_off_before_a_signed_checkpoint() -> None:
    report = verify(first(5), [sign(KEY_A, 2, H[2]), sign(KEY_A, 7, H[7])])
    assert_failures(
        report,
        (7, "checkpoint", r"tail cut off: signed checkpoint at seq 7 but the log ends at seq 5"),
    )
    assert (report.checkpoints_verified, report.last_checkpoint_seq) == (1, 2)


def test_whole_log_gone_but_a_checkpoint_remains() -> None:
    report = verify([], [sign(KEY_A, 4, H[4])])
    assert_failures(
        report,
        (4, "checkpoint", r"tail cut off: signed checkpoint at seq 4 but the log ends at seq 0"),
    )
    assert (report.entries, report.unsigned_tail) == (0, 0)


def pruned(
    through: int,
    n: int = 8,
    *,
    days: Any = 200,
    named_seq: int | None = None,
    named_hash: str | None = None,
    cover: bool = True,
    prune_through: int | None = None,
) -> tuple[list[tuple[Entry, Any]], list[Checkpoint]]:
    """CHAIN[:n] with a prune entry appended at n + 1 (its record as the prune writes it),
    everything through ``through`` dropped: (the entries left, the checkpoints)."""
    said = through if prune_through is None else prune_through
    rec: dict[str, Any] = {
        "through_seq": said,
        "checkpoint": {"seq": said if named_seq is None else named_seq,
                       "hash": named_hash or H[said]},
        "kept": {"count": 0, "sha256": kept_digest([])},
    }  # fmt: skip
    if days is not None:
        rec["retention_days"] = days
    entry = Entry.build(WS, n + 1, "prune", "prn_1", T0 + (n + 1) * 1000, rec, H[n])
    cps = [sign(KEY_A, through, H[through])]
    if cover:
        cps.append(sign(KEY_A, n + 1, entry.hash))
    return [*CHAIN[through:n], (entry, rec)], cps


def test_pruned_log_anchored_by_a_checkpoint() -> None:
    # Pruning signs a checkpoint at the last entry it drops, appends a prune entry saying
    # so (covered by a checkpoint), then drops; the log then starts after that checkpoint.
    # Checkpoints inside the pruned part (seq 2) anchor nothing and are no failure.
    items, cps = pruned(4)
    report = verify(items, [sign(KEY_A, 2, H[2]), *cps])
    assert_failures(report)
    assert (report.first_seq, report.last_seq, report.entries) == (5, 9, 5)
    assert (report.checkpoints_verified, report.last_checkpoint_seq) == (2, 9)
    assert report.unsigned_tail == 0
    # As an agent key sees it, records not compared: the prune's record is still read.
    report = verify(items, cps, compare_records=False)
    assert_failures(report)
    assert verify(*pruned(4, days=183)).ok  # the floor itself is allowed


MISSING = r"entries 1\.\.3 are missing and no prune accounts for them: "


def test_pruned_log_not_anchored() -> None:
    items, _ = pruned(3)
    report = verify(items, [sign(KEY_A, 2, H[2]), sign(KEY_A, 9, items[-1][0].hash)])
    assert_failures(
        report,
        (4, "outcome", r"log starts at seq 4 with no signed checkpoint at seq 3"),
        (4, "outcome", MISSING + r"no signed checkpoint at seq 3, the last entry the prune "
         r"dropped"),
    )  # fmt: skip
    assert report.checkpoints_verified == 1


def test_pruned_log_anchored_by_the_wrong_hash() -> None:
    items, cps = pruned(3, named_hash="ee" * 32)
    report = verify(items, [sign(KEY_A, 3, "ee" * 32), cps[1]])
    assert_failures(
        report,
        (4, "outcome", rf"broken link: prev_hash {H[3]} != checkpoint hash {'ee' * 32} at seq 3"),
    )


@pytest.mark.parametrize(
    ("how", "problem"),
    [
        ({"days": 90}, r"the prune through seq 3 keeps 90 days, below the 183-day floor"),
        ({"days": 182}, r"the prune through seq 3 keeps 182 days, below the 183-day floor"),
        ({"days": None}, r"the prune through seq 3 \(seq 9\) names no retention_days"),
        ({"days": "365"}, r"the prune through seq 3 \(seq 9\) names no retention_days"),
        ({"named_seq": 2}, r"the prune through seq 3 names its checkpoint at seq 2, not at "
                           r"the last entry it dropped \(seq 3\)"),
        ({"named_hash": "ee" * 32}, rf"the prune through seq 3 names checkpoint hash "
                                    rf"{'ee' * 32}, the signed checkpoint at seq 3 has {H[3]}"),
        ({"cover": False}, r"the prune entry at seq 9 is covered by no signed checkpoint "
                           r"\(the last verified is at seq 3\)"),
        ({"prune_through": 2}, r"no prune entry says through_seq 3 \(the prunes here go "
                               r"through seq 2\)"),
    ],
)  # fmt: skip
def test_a_prune_that_does_not_account_for_the_missing_entries(
    how: dict[str, Any], problem: str
) -> None:
    items, cps = pruned(3, **how)
    report = verify(items, cps)
    found = [f for f in report.failures if f.problem.startswith("entries 1..3 are missing")]
    assert len(found) == 1, report.failures
    assert (found[0].seq, found[0].kind) == (4, "outcome")
    assert re.fullmatch(MISSING + problem, found[0].problem), found[0].problem


def test_missing_oldest_entries_with_no_prune_at_all() -> None:
    # Plain deletes below a signed checkpoint: anchored, and still caught.
    report = verify(CHAIN[4:8], [sign(KEY_A, 4, H[4])])
    assert_failures(
        report,
        (5, "check", r"entries 1\.\.4 are missing and no prune accounts for them: no prune "
                     r"entry says through_seq 4"),
    )  # fmt: skip
    # A prune record not given (or edited) accounts for nothing either.
    items, cps = pruned(4)
    bare = [(e, None) if e.kind == "prune" else (e, r) for e, r in items]
    report = verify(bare, cps)
    assert any("no prune entry says through_seq 4" in f.problem for f in report.failures)


def test_rotated_keys() -> None:
    old = sign(KEY_A, 2, H[2])
    new = sign(KEY_B, 6, H[6])
    keys = [public(KEY_A, created_at=T0), public(KEY_B, created_at=T0 + 5000)]
    report = verify(first(8), [old, new], keys)
    assert_failures(report)
    assert (report.checkpoints_verified, report.last_checkpoint_seq, report.unsigned_tail) == (
        2,
        6,
        2,
    )
    # Without the retired key its checkpoints can no longer be trusted.
    report = verify(first(8), [old, new], [public(KEY_B)])
    assert_failures(report, (2, "checkpoint", rf"signed by unknown key {public(KEY_A).key_id}"))
    assert report.checkpoints_verified == 1


@pytest.mark.parametrize(
    ("n", "checkpoint_seqs", "tail"),
    [(0, [], 0), (5, [], 5), (5, [1], 4), (5, [3], 2), (5, [5], 0), (8, [2, 6], 2)],
)
def test_unsigned_tail(n: int, checkpoint_seqs: list[int], tail: int) -> None:
    report = verify(first(n), [sign(KEY_A, s, H[s]) for s in checkpoint_seqs])
    assert_failures(report)
    assert report.unsigned_tail == tail
    assert report.to_json()["unsigned_tail"] == tail


def test_every_failure_listed_in_one_run() -> None:
    c = list(first(8))
    c[1] = (c[1][0], {"id": "r2", "forged": True})  # record edited
    c[2] = (c[2][0], None)  # record deleted
    edited5 = E[5]._replace(ts=E[5].ts + 1)  # entry field edited
    items = [c[0], c[1], c[2], (edited5, c[4][1]), c[5], c[6]]  # seq 4 missing
    checkpoints = [
        sign(KEY_B, 1, H[1]),  # unknown key
        sign(KEY_A, 2, H[2])._replace(ts=1),  # bad signature
        sign(KEY_A, 6, "cd" * 32),  # disagrees with entry 6
        sign(KEY_A, 8, H[8]),  # tail cut off: the log ends at 7
    ]
    report = verify(items, checkpoints)
    got2 = payload_sha256(c[1][1])
    assert_failures(
        report,
        (1, "checkpoint", rf"signed by unknown key {public(KEY_B).key_id}"),
        (2, "checkpoint", rf"bad signature \(key {public(KEY_A).key_id}\)"),
        (2, "approval", rf"record r2 edited: payload_sha256 {got2} != {E[2].payload_sha256}"),
        (3, "override", r"record r3 deleted"),
        (5, "check", rf"entry edited: hash {H[5]} != recomputed {_hash_of(edited5)}"),
        (5, "check", r"missing entries: seq 4"),
        (5, "check", rf"broken link: prev_hash {H[4]} != hash of seq 3 \({H[3]}\)"),
        (6, "approval", rf"signed checkpoint says hash {'cd' * 32}, entry has {H[6]}"),
        (8, "checkpoint", r"tail cut off: signed checkpoint at seq 8 but the log ends at seq 7"),
    )
    data = report.to_json()
    assert data["ok"] is False
    assert [f["seq"] for f in data["failures"]] == [1, 2, 2, 3, 5, 5, 5, 6, 8]
    assert json.loads(json.dumps(data)) == data


def test_streaming_verifier_matches_verify_entries() -> None:
    checkpoints = [sign(KEY_A, 4, H[4])]
    verifier = ChainVerifier(WS, checkpoints, [public(KEY_A)], compare_records=True)
    for entry, rec in first(6):
        verifier.feed(entry, rec)
    assert verifier.finish().to_json() == verify(first(6), checkpoints).to_json()


def test_failure_text_names_seq_and_kind() -> None:
    assert str(Failure(3, "check", "record r3 deleted")) == "seq 3 (check): record r3 deleted"
    assert str(Failure(None, None, "no entries")) == "ledger (-): no entries"
    assert Failure(3, "check", "x").to_json() == {"seq": 3, "kind": "check", "problem": "x"}


# --- regressions: gaps found while writing these tests ---------------------------------


def test_uncanonicalizable_record_is_a_failure_not_a_crash() -> None:
    items = list(first(3))
    items[1] = (items[1][0], json.loads('{"id": "r2", "amount": NaN}'))
    report = verify(items)
    assert [(f.seq, f.kind) for f in report.failures] == [(2, "approval")]


def test_relabelled_public_key_is_refused() -> None:
    relabelled = public(KEY_B)._replace(key_id=public(KEY_A).key_id)
    forged = sign(KEY_B, 3, H[3])._replace(key_id=public(KEY_A).key_id)
    report = verify(first(5), [forged], [relabelled])
    assert not report.ok


# --- kept records: only a prune accounts for them ---------------------------------------
# A kept record (a version or key whose entry a prune dropped) is vouched for by nothing
# but the prune entry that lists it; one no prune accounts for counts for nothing and fails.

Kept = tuple[int, str, str, dict[str, Any]]


def key_record(sk: SigningKey) -> dict[str, Any]:
    """A public_key entry's record (the workspace is the log's: left out, as in exports)."""
    key = public(sk)
    return {"key_id": key.key_id, "public_key": key.public_key, "created_at": T0,
            "algorithm": "Ed25519"}  # fmt: skip


RULE_2: Kept = (2, "rule_version", "rule@1", {"id": "rule", "version": 1})


def with_kept(
    kept: Sequence[Kept],
    listed: Sequence[Kept] | None = None,
    *,
    cover: SigningKey = KEY_A,
    tail: SigningKey = KEY_A,
) -> tuple[list[tuple[Entry, Any]], list[Checkpoint]]:
    """Pruned through seq 4: entries 5-6, at 7 the prune entry listing ``listed`` (default
    ``kept``) as kept, at 8 a check. Checkpoints: at 4 (the prune's anchor) by KEY_A, at 7
    (covering the prune entry) by ``cover``, at 8 by ``tail``."""
    listed = kept if listed is None else listed
    rec = {
        "through_seq": 4,
        "checkpoint": {"seq": 4, "hash": H[4]},
        "retention_days": 200,
        "kept": {"count": len(listed),
                 "sha256": kept_digest((s, k, r, payload_sha256(v)) for s, k, r, v in listed)},
    }  # fmt: skip
    prune = Entry.build(WS, 7, "prune", "prn_1", T0 + 7000, rec, H[6])
    after = Entry.build(WS, 8, "check", "r8", T0 + 8000, record(8), prune.hash)
    cps = [sign(KEY_A, 4, H[4]), sign(cover, 7, prune.hash), sign(tail, 8, after.hash)]
    return [*CHAIN[4:6], (prune, rec), (after, record(8))], cps


def verify_kept(
    kept: Sequence[Kept],
    items: Iterable[tuple[Entry, Any]],
    checkpoints: Sequence[Checkpoint],
    *,
    pinned: Sequence[PublicKey] | None = None,
) -> tuple[VerifyReport, ChainVerifier]:
    keys = [public(KEY_A), public(KEY_B)]
    verifier = ChainVerifier(WS, checkpoints, keys, compare_records=True, pinned=pinned)
    for seq, kind, ref_id, rec in kept:
        verifier.feed_kept(seq, kind, ref_id, rec)
    for entry, rec in items:
        verifier.feed(entry, rec)
    return verifier.finish(), verifier


def test_kept_records_a_prune_lists_verify() -> None:
    kept = [RULE_2, (3, "public_key", public(KEY_B).key_id, key_record(KEY_B))]
    report, _ = verify_kept(kept, *with_kept(kept))
    assert_failures(report)
    assert (report.kept_records, report.first_seq) == (2, 5)


UNKEPT = r"kept record rule@1 is accounted for by no prune: "


@pytest.mark.parametrize("seq", [0, -3])
def test_a_kept_record_before_seq_1(seq: int) -> None:
    # Before any entry of any log, pruned or not: no prune keeps it, even one listing it.
    bad: Kept = (seq, *RULE_2[1:])
    before = UNKEPT + rf"seq {seq} is before any entry \(seqs start at 1\)"
    report, _ = verify_kept([bad], first(4), [sign(KEY_A, 4, H[4])])
    assert_failures(report, (seq, "rule_version", before))
    report, _ = verify_kept([bad, RULE_2], *with_kept([bad, RULE_2]))
    assert_failures(report, (seq, "rule_version", before))


def test_a_kept_record_in_a_log_with_no_prune() -> None:
    # The oldest entries deleted with no prune entry: a kept line cannot stand in for one.
    report, _ = verify_kept([RULE_2], CHAIN[4:8], [sign(KEY_A, 4, H[4])])
    assert_failures(
        report,
        (2, "rule_version", UNKEPT + r"the log has no prune entry, so nothing was kept"),
        (5, "check", r"entries 1\.\.4 are missing and no prune accounts for them: no prune "
                     r"entry says through_seq 4"),
    )  # fmt: skip


def test_a_kept_record_no_prune_reaches() -> None:
    kept = [RULE_2, (5, "rule_version", "rule@2", {"id": "rule", "version": 2})]
    report, _ = verify_kept(kept, *with_kept([RULE_2]))
    assert_failures(
        report,
        (5, None, r"kept record at seq 5, inside the log \(from seq 5\)"),
        (5, "rule_version", r"kept record rule@2 is accounted for by no prune: no prune entry "
                            r"goes through seq 5"),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kept", "problem"),
    [
        # One more than the prune's count: the prune's list no longer verifies, so neither
        # record is vouched for.
        ([RULE_2, (3, "rule_version", "rule@0", {"id": "rule", "version": 0})],
         r"the prune through seq 4 kept 1 rule and mapping versions; 2 are here"),
        ([(2, "rule_version", "rule@1", {"id": "rule", "version": 9})],
         r"a rule or mapping version kept by the prune through seq 4 was edited or replaced "
         r"\(their sha256 [0-9a-f]{64} != listed [0-9a-f]{64}\)"),
    ],
)  # fmt: skip
def test_kept_records_beyond_the_prunes_list(kept: list[Kept], problem: str) -> None:
    report, _ = verify_kept(kept, *with_kept([RULE_2]))
    why = r"the prune through seq 4 does not verify \(above\)"
    assert_failures(
        report,
        (7, "prune", problem),
        *[(seq, kind, rf"kept record {ref} is accounted for by no prune: {why}")
          for seq, kind, ref, _ in kept],
    )  # fmt: skip


def test_a_kept_key_is_introduced_once_a_trusted_checkpoint_covers_its_prune() -> None:
    # KEY_B's rotation entry (seq 3) was pruned; the prune entry listing it is covered by
    # a checkpoint of the pinned KEY_A, so KEY_B may sign from seq 3 on.
    kept = [(3, "public_key", public(KEY_B).key_id, key_record(KEY_B))]
    report, verifier = verify_kept(kept, *with_kept(kept, tail=KEY_B), pinned=[public(KEY_A)])
    assert_failures(report)
    assert verifier.trusted(public(KEY_B).key_id)


def test_a_kept_key_vouched_for_by_its_own_checkpoints_only() -> None:
    # A prune entry (in a rewrite after the last pinned checkpoint) listing a made-up key
    # record as kept: only the made-up key's checkpoints cover that entry, so nothing
    # trusted vouches for the record, though a pinned checkpoint (the anchor at seq 4)
    # lies after the seq it claims.
    kept = [(3, "public_key", public(KEY_B).key_id, key_record(KEY_B))]
    items, cps = with_kept(kept, cover=KEY_B, tail=KEY_B)
    report, verifier = verify_kept(kept, items, cps, pinned=[public(KEY_A)])
    not_pinned = (
        rf"signed by key {public(KEY_B).key_id}, which is not pinned \(pinned: "
        rf"{public(KEY_A).key_id}\) and no checkpoint signed by a pinned key introduced it"
    )
    assert_failures(report, (7, "checkpoint", not_pinned), (8, "checkpoint", not_pinned))
    assert not verifier.trusted(public(KEY_B).key_id)


def test_a_kept_key_no_prune_accounts_for_introduces_nothing() -> None:
    # The red team's line: a kept public_key at seq 0 in a log never pruned.
    kept = [(0, "public_key", public(KEY_B).key_id, key_record(KEY_B))]
    rewritten = [sign(KEY_A, 4, H[4]), sign(KEY_B, 8, H[8])]
    report, verifier = verify_kept(kept, first(8), rewritten, pinned=[public(KEY_A)])
    assert_failures(
        report,
        (0, "public_key", rf"kept record {public(KEY_B).key_id} is accounted for by no prune: "
                          r"seq 0 is before any entry \(seqs start at 1\)"),
        (8, "checkpoint", rf"signed by key {public(KEY_B).key_id}, which is not pinned .*"),
    )  # fmt: skip
    assert not verifier.trusted(public(KEY_B).key_id)


def test_a_kept_record_a_reader_of_no_records_cannot_check() -> None:
    # Without the records (an agent key's verify), the prune's list is not checked, so it
    # vouches for no kept line.
    items, cps = with_kept([RULE_2])
    verifier = ChainVerifier(WS, cps, [public(KEY_A)])
    verifier.feed_kept(*RULE_2)
    for entry, rec in items:
        verifier.feed(entry, rec)
    assert_failures(
        verifier.finish(),
        (2, "rule_version", UNKEPT + r"this reader is not given the records the prune through "
                                     r"seq 4 lists"),
    )  # fmt: skip


# --- numbers no verifier converts: refused as they are --------------------------------
HUGE = Decimal("1e100000000")  # how claros.jsonutil reads 1e100000000: int() takes hours


@pytest.mark.parametrize("value", [HUGE, float("inf"), 1.0, "1", True, None])
def test_a_key_whose_created_at_is_no_whole_number(value: Any) -> None:
    data = {**public(KEY_A).to_json(), "created_at": value}
    with pytest.raises(ValueError, match="field created_at must be a whole number"):
        PublicKey.from_json(data)
    with pytest.raises(KeyError, match="created_at"):  # missing: named as before
        PublicKey.from_json({k: v for k, v in data.items() if k != "created_at"})


@pytest.mark.parametrize("value", [HUGE, float("inf"), 2.0, "2", False])
def test_a_kept_line_whose_seq_is_no_whole_number(value: Any) -> None:
    line = {"seq": value, "kind": "rule_version", "ref_id": "rule@1", "event": {}}
    with pytest.raises(ValueError, match="field seq must be a whole number"):
        kept_from_json(line)
    assert kept_from_json({**line, "seq": 2}) == (2, "rule_version", "rule@1", {})


def test_a_prune_record_with_a_huge_through_seq_is_refused_promptly() -> None:
    # Its bytes hash right (so it is read), but 1e100000000 is no seq: not the prune's shape.
    raw = (
        b'{"checkpoint":{"hash":"%s","seq":4},"kept":{"count":0,"sha256":"%s"},'
        % (H[4].encode(), kept_digest([]).encode())
        + b'"retention_days":200,"through_seq":1e100000000}'
    )
    prune = Entry.build(WS, 9, "prune", "prn_1", T0 + 9000, {}, H[8],
                        payload=hashlib.sha256(raw).hexdigest())  # fmt: skip
    verifier = ChainVerifier(WS, [sign(KEY_A, 9, prune.hash)], [public(KEY_A)],
                             compare_records=True)  # fmt: skip
    for entry, rec in first(8):
        verifier.feed(entry, rec)
    verifier.feed_raw(prune, raw)
    assert_failures(
        verifier.finish(), (9, "prune", r"prune record prn_1 is not in the prune's shape")
    )
