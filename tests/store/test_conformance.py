"""One conformance suite for every Store: each test runs on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claros import jsonutil
from claros.canonical import CanonicalError, canonical, canonical_bytes
from claros.ledger import (
    ZERO_HASH,
    ChainVerifier,
    Checkpoint,
    Entry,
    PublicKey,
    kept_digest,
    payload_sha256,
    verify_entries,
)
from claros.signing import FileSigner
from claros.store.base import (
    GLOBAL,
    MAX_BATCH_RECORDS,
    MAX_BATCH_WRITES,
    MAX_DOCS_READ,
    MAX_RECORD_BYTES,
    ConflictError,
    Doc,
    DocWrite,
    NewRecord,
    PruneError,
    PruneResult,
    RecordTooLargeError,
    Store,
    StoreError,
)
from claros.store.dynamo import DynamoStore
from claros.store.sqlite import SqliteStore

WS = "acme"


def _append_n(store: Store, n: int, ws: str = WS, kind: str = "check") -> list[Entry]:
    return [store.append(ws, kind, f"{kind}-{i}", {"n": i, "who": "dana"}) for i in range(n)]


def _sign(signer: FileSigner, store: Store, entry: Entry) -> tuple[Checkpoint, PublicKey]:
    ts = int(time.time() * 1000)
    cp_message = Checkpoint(entry.workspace, entry.seq, entry.hash, ts, "", "").message()
    key_id, signature = signer.sign(entry.workspace, cp_message)
    cp = Checkpoint(
        entry.workspace, entry.seq, entry.hash, ts, key_id, base64.b64encode(signature).decode()
    )
    public = signer.active_key(entry.workspace)
    store.add_public_key(public)
    assert store.add_checkpoint(cp) is True
    return cp, public


# --- the ledger -----------------------------------------------------------------------
def test_empty_workspace(store: Store) -> None:
    assert store.head(WS) is None
    assert list(store.entries(WS)) == []
    assert list(store.entries_with_records(WS)) == []
    assert store.get_record(WS, "check", "nope") is None
    assert store.latest_checkpoint(WS) is None
    assert store.checkpoints(WS) == []
    assert store.public_keys(WS) == []


def test_append_builds_the_chain(store: Store) -> None:
    first = store.append(WS, "check", "c1", {"result": "allow", "amount": Decimal("12.50")}, ts=1)
    second = store.append(WS, "approval", "a1", {"decision": "approve", "check_id": "c1"}, ts=2)
    third = store.append(WS, "outcome", "o1", {"ok": True})
    assert (first.seq, second.seq, third.seq) == (1, 2, 3)
    assert first.prev_hash == ZERO_HASH
    assert second.prev_hash == first.hash and third.prev_hash == second.hash
    assert first.ts == 1 and second.ts == 2 and third.ts > 1_600_000_000_000
    assert first.payload_sha256 == payload_sha256({"result": "allow", "amount": Decimal("12.50")})
    assert all(e.hash == e.expected_hash() for e in (first, second, third))
    assert store.head(WS) == third

    assert list(store.entries(WS)) == [first, second, third]
    assert list(store.entries(WS, since=1)) == [second, third]
    assert list(store.entries(WS, since=1, limit=1)) == [second]
    assert list(store.entries(WS, limit=0)) == []
    assert list(store.entries(WS, since=3)) == []

    pairs = list(store.entries_with_records(WS))
    assert [e for e, _ in pairs] == [first, second, third]
    assert pairs[0][1] == {"result": "allow", "amount": Decimal("12.5")}
    assert pairs[1][1] == {"decision": "approve", "check_id": "c1"}
    assert [e.seq for e, _ in store.entries_with_records(WS, since=1, limit=1)] == [2]

    assert store.get_record(WS, "approval", "a1") == {"decision": "approve", "check_id": "c1"}
    assert store.get_record(WS, "check", "a1") is None  # kind is part of the record's key
    # Workspaces are separate chains.
    other = store.append("other", "check", "c1", {"result": "stop"})
    assert other.seq == 1 and other.prev_hash == ZERO_HASH
    assert store.head(WS) == third
    assert store.get_record("other", "check", "c1") == {"result": "stop"}


def test_a_record_read_as_the_bytes_it_is_kept_as(store: Store) -> None:
    """get_raw_record: the record's canonical JSON, the bytes its entry's payload hashed
    (what entries_with_raw_records gives too); None for none; the kind is part of the key."""
    record = {"result": "allow", "amount": Decimal("12.50"), "note": "é ☃ 𝄞", "n": [1, None]}
    entry = store.append(WS, "check", "c1", record)
    raw = store.get_raw_record(WS, "check", "c1")
    assert raw == canonical_bytes(record)
    assert hashlib.sha256(raw).hexdigest() == entry.payload_sha256
    assert [r for _, r in store.entries_with_raw_records(WS)] == [raw]
    assert store.get_raw_record(WS, "approval", "c1") is None
    assert store.get_raw_record(WS, "check", "nope") is None
    assert store.get_raw_record("other", "check", "c1") is None


def test_chain_verifies_with_records(store: Store) -> None:
    _append_n(store, 25)
    report = verify_entries(WS, store.entries_with_records(WS), compare_records=True)
    assert report.ok, report.failures
    assert (report.entries, report.records_compared, report.last_seq) == (25, 25, 25)


def test_records_as_the_bytes_that_were_hashed(store: Store) -> None:
    """entries_with_raw_records gives each record as its canonical JSON: the very bytes
    payload_sha256 hashed, which exports write as they are."""
    records = [{"n": i, "amount": Decimal("12.50"), "who": "dana", "note": "café \"x\"",
                "empty": None, "nested": {"b": 1, "a": [1, {}]}} for i in range(12)]  # fmt: skip
    for i, record in enumerate(records):
        store.append(WS, "check", f"r{i}", record)
    store.append(WS, "outcome", "r0", {"status": "ok"})
    got = list(store.entries_with_raw_records(WS, since=3, limit=7))
    assert [e.seq for e, _ in got] == list(range(4, 11))
    for (entry, raw), record in zip(got, records[3:10], strict=True):
        assert raw == canonical(record).encode()
        assert hashlib.sha256(raw).hexdigest() == entry.payload_sha256
    with_records = {e.seq: r for e, r in store.entries_with_records(WS)}
    for entry, raw in store.entries_with_raw_records(WS):
        assert raw is not None and canonical(with_records[entry.seq]).encode() == raw
    assert list(store.entries_with_raw_records("nobody")) == []


def test_append_writes_docs_atomically(store: Store) -> None:
    ask = DocWrite(WS, "asks", "q1", {"state": "open", "check_id": "c1"}, expect_rev=0)
    entry = store.append(WS, "check", "c1", {"result": "ask"}, writes=[ask])
    assert store.get_doc(WS, "asks", "q1") == Doc(
        "asks", "q1", {"state": "open", "check_id": "c1"}, 1
    )
    answered = DocWrite(WS, "asks", "q1", {"state": "answered"}, expect_rev=1)
    index = DocWrite(WS, "index", "by-check/c1", {"approval": "ap1"})
    store.append(WS, "approval", "ap1", {"decision": "approve"}, writes=[answered, index])
    assert store.get_doc(WS, "asks", "q1") == Doc("asks", "q1", {"state": "answered"}, 2)
    assert store.get_doc(WS, "index", "by-check/c1") == Doc(
        "index", "by-check/c1", {"approval": "ap1"}, 1
    )
    head = store.head(WS)
    assert head is not None and head.seq == 2 and entry.seq == 1


def test_failed_doc_condition_writes_nothing(store: Store) -> None:
    store.write_docs([DocWrite(WS, "asks", "q1", {"state": "open"})])
    before = store.append(WS, "check", "c1", {"result": "ask"})
    fresh = DocWrite(WS, "index", "new", {"x": 1}, expect_rev=0)
    stale = DocWrite(WS, "asks", "q1", {"state": "answered"}, expect_rev=7)
    with pytest.raises(ConflictError) as info:
        store.append(WS, "approval", "ap1", {"decision": "approve"}, writes=[fresh, stale])
    assert (info.value.collection, info.value.key) == ("asks", "q1")
    assert "revision 1" in str(info.value) and "revision 7" in str(info.value)
    assert store.head(WS) == before
    assert list(store.entries(WS)) == [before]
    assert store.get_record(WS, "approval", "ap1") is None
    assert store.get_doc(WS, "index", "new") is None
    assert store.get_doc(WS, "asks", "q1") == Doc("asks", "q1", {"state": "open"}, 1)
    # ... and the chain goes on from where it was.
    after = store.append(WS, "approval", "ap1", {"decision": "approve"})
    assert after.seq == 2 and after.prev_hash == before.hash


def test_duplicate_record_is_a_conflict(store: Store) -> None:
    first = store.append(WS, "check", "c1", {"result": "allow"})
    doc = DocWrite(WS, "index", "k", {"x": 1})
    with pytest.raises(ConflictError) as info:
        store.append(WS, "check", "c1", {"result": "stop"}, writes=[doc])
    assert (info.value.collection, info.value.key) == ("check", "c1")
    assert store.head(WS) == first
    assert store.get_record(WS, "check", "c1") == {"result": "allow"}
    assert store.get_doc(WS, "index", "k") is None
    assert store.append(WS, "outcome", "c1", {"ok": True}).seq == 2  # other kind, same id


def test_append_many_is_one_atomic_run_of_entries(store: Store) -> None:
    first = store.append(WS, "check", "c0", {"result": "ask"})
    batch = [NewRecord("approval", "ap1", {"decision": "approve"}), NewRecord("check", "c1", {})]
    doc = DocWrite(WS, "asks", "q1", {"state": "answered"}, expect_rev=0)
    made = store.append_many(WS, batch, writes=[doc], ts=77)
    assert [e.seq for e in made] == [2, 3]
    assert made[0].prev_hash == first.hash and made[1].prev_hash == made[0].hash
    assert [e.ts for e in made] == [77, 77] and [e.kind for e in made] == ["approval", "check"]
    assert store.head(WS) == made[1]
    assert store.get_record(WS, "approval", "ap1") == {"decision": "approve"}
    assert store.get_doc(WS, "asks", "q1") is not None
    report = verify_entries(WS, store.entries_with_records(WS), compare_records=True)
    assert report.ok and report.entries == 3


@pytest.mark.parametrize(
    "batch",
    [
        [NewRecord("check", "new", {}), NewRecord("check", "c0", {"again": 1})],  # exists
        [NewRecord("check", "new", {}), NewRecord("check", "new", {"twice": 1})],  # in batch
    ],
    ids=["existing", "twice-in-batch"],
)
def test_append_many_conflict_writes_nothing(store: Store, batch: list[NewRecord]) -> None:
    first = store.append(WS, "check", "c0", {"result": "ask"})
    with pytest.raises(ConflictError) as info:
        store.append_many(WS, batch, writes=[DocWrite(WS, "d", "k", {"v": 1})])
    assert info.value.collection == "check" and info.value.key == batch[1].ref_id
    assert store.head(WS) == first
    assert list(store.entries(WS)) == [first]
    assert store.get_record(WS, "check", "new") is None
    assert store.get_doc(WS, "d", "k") is None


def test_append_many_limits(store: Store) -> None:
    with pytest.raises(StoreError):
        store.append_many(WS, [])
    too_many = [NewRecord("check", f"c{i}", {}) for i in range(MAX_BATCH_RECORDS + 1)]
    with pytest.raises(StoreError):
        store.append_many(WS, too_many)
    writes = [DocWrite(WS, "d", f"k{i}", {"i": i}) for i in range(MAX_BATCH_WRITES + 1)]
    with pytest.raises(StoreError):
        store.append(WS, "check", "c0", {}, writes=writes)
    oversized = [
        NewRecord("check", "ok", {}),
        NewRecord("check", "big", {"b": "x" * MAX_RECORD_BYTES}),
    ]
    with pytest.raises(RecordTooLargeError):
        store.append_many(WS, oversized)
    assert store.head(WS) is None and store.get_doc(WS, "d", "k0") is None
    # The largest batch goes through in one piece.
    made = store.append_many(WS, too_many[:-1], writes=writes[:-1])
    assert [e.seq for e in made] == list(range(1, MAX_BATCH_RECORDS + 1))
    assert len(store.query_docs(WS, "d", limit=1000)) == MAX_BATCH_WRITES


def test_record_too_large_writes_nothing(store: Store) -> None:
    with pytest.raises(RecordTooLargeError):
        store.append(WS, "check", "big", {"blob": "x" * (MAX_RECORD_BYTES + 1)})
    assert store.head(WS) is None
    assert store.get_record(WS, "check", "big") is None


def test_values_canonical_json_cannot_hold_write_nothing(store: Store) -> None:
    with pytest.raises(CanonicalError):
        store.append(WS, "check", "nan", {"amount": float("nan")})
    with pytest.raises(CanonicalError):
        store.append(WS, "check", "set", {"tags": {"a", "b"}})
    with pytest.raises(CanonicalError):
        store.append(WS, "check", "surrogate", {"name": "\ud800"})
    assert store.head(WS) is None
    assert list(store.entries(WS)) == []


def test_decimal_float_and_unicode_round_trip(store: Store) -> None:
    record = {
        "amount": Decimal("1234.56"),
        "rate": 0.1,
        "big": 2**53,
        "tiny": 5e-324,
        "name": "Zoë Ærøskøbing 中文 😀",
        "nested": {"items": [{"qty": 3, "price": Decimal("9.99")}, None, ""], "empty": {}},
        "flag": False,
    }
    entry = store.append(WS, "check", "uni-😀", record)
    got = store.get_record(WS, "check", "uni-😀")
    assert got is not None
    assert got["amount"] == Decimal("1234.56") and isinstance(got["amount"], Decimal)
    assert got["rate"] == Decimal("0.1")
    assert got["name"] == "Zoë Ærøskøbing 中文 😀"
    assert "empty" not in got["nested"]  # canonical JSON leaves empty fields out
    assert got["nested"]["items"][1:] == [None, ""]  # ... but keeps list elements in place
    assert canonical(got) == canonical(record)
    assert payload_sha256(got) == entry.payload_sha256


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)


def test_any_json_value_round_trips(store: Store, request: pytest.FixtureRequest) -> None:
    examples = 50 if "dynamodb" in request.node.callspec.id else 100
    ids = itertools.count()

    @settings(max_examples=examples, deadline=None, database=None)
    @given(value=_JSON)
    def round_trip(value: Any) -> None:
        ref = f"prop-{next(ids)}"
        record = {"value": value}
        entry = store.append("prop", "check", ref, record)
        got = store.get_record("prop", "check", ref)
        assert got is not None
        assert canonical(got).encode() == canonical(record).encode()
        assert payload_sha256(got) == entry.payload_sha256

    round_trip()


# --- docs -----------------------------------------------------------------------------
def test_write_docs_conditions(store: Store) -> None:
    store.write_docs([DocWrite(WS, "keys", "k1", {"kind": "agent"}, expect_rev=0)])
    assert store.get_doc(WS, "keys", "k1") == Doc("keys", "k1", {"kind": "agent"}, 1)
    with pytest.raises(ConflictError, match="expected absent") as info:
        store.write_docs([DocWrite(WS, "keys", "k1", {"kind": "admin"}, expect_rev=0)])
    assert (info.value.collection, info.value.key) == ("keys", "k1")
    store.write_docs([DocWrite(WS, "keys", "k1", {"kind": "admin"}, expect_rev=1)])
    with pytest.raises(ConflictError, match="at revision 2"):
        store.write_docs([DocWrite(WS, "keys", "k1", {"kind": "audit"}, expect_rev=1)])
    store.write_docs([DocWrite(WS, "keys", "k1", {"kind": "audit"})])  # unconditional
    assert store.get_doc(WS, "keys", "k1") == Doc("keys", "k1", {"kind": "audit"}, 3)
    # Deletes obey the same conditions.
    with pytest.raises(ConflictError):
        store.write_docs([DocWrite(WS, "keys", "k1", None, expect_rev=2)])
    store.write_docs([DocWrite(WS, "keys", "k1", None, expect_rev=3)])
    assert store.get_doc(WS, "keys", "k1") is None
    store.write_docs([DocWrite(WS, "keys", "k1", None, expect_rev=0)])  # absent, as expected
    with pytest.raises(ConflictError, match="is absent"):
        store.write_docs([DocWrite(WS, "keys", "k1", None, expect_rev=1)])
    with pytest.raises(ConflictError):
        store.write_docs([DocWrite(WS, "keys", "k1", {"kind": "agent"}, expect_rev=4)])
    store.write_docs([DocWrite(WS, "keys", "gone", None)])  # unconditional delete of nothing
    # A re-created doc starts again at revision 1.
    store.write_docs([DocWrite(WS, "keys", "k1", {"kind": "agent"}, expect_rev=0)])
    assert store.get_doc(WS, "keys", "k1") == Doc("keys", "k1", {"kind": "agent"}, 1)
    store.write_docs([])


def test_write_docs_is_all_or_nothing(store: Store) -> None:
    store.write_docs([DocWrite(WS, "c", "a", {"v": 1})])
    with pytest.raises(ConflictError) as info:
        store.write_docs(
            [
                DocWrite(WS, "c", "b", {"v": 2}, expect_rev=0),
                DocWrite(WS, "c", "a", None),
                DocWrite(WS, "c", "a2", {"v": 3}, expect_rev=5),
            ]
        )
    assert info.value.key == "a2"
    assert store.get_doc(WS, "c", "b") is None
    assert store.get_doc(WS, "c", "a") == Doc("c", "a", {"v": 1}, 1)
    # Across workspaces too: docs of two workspaces in one transaction.
    store.write_docs([DocWrite(WS, "c", "x", {"v": 1}), DocWrite("other", "c", "x", {"v": 2})])
    assert store.get_doc("other", "c", "x") == Doc("c", "x", {"v": 2}, 1)


def test_doc_values_round_trip(store: Store) -> None:
    value = {"amount": Decimal("10.25"), "n": 3, "name": "Zoë 😀", "list": [1, "two", None]}
    store.write_docs([DocWrite(WS, "c", "k", value)])
    doc = store.get_doc(WS, "c", "k")
    assert doc is not None
    assert doc.value == {
        "amount": Decimal("10.25"),
        "n": 3,
        "name": "Zoë 😀",
        "list": [1, "two", None],
    }


def test_get_docs_reads_each_pair_as_get_doc_does(store: Store) -> None:
    store.write_docs([
        DocWrite(WS, "mapping", "shop:refund_create", {"status": "active"}),
        DocWrite(WS, "rule_stamp", "rules", {"stamp": "rs_1"}),
        DocWrite(WS, "timeline:a@x.io", "rules", {"same key": "another collection"}),
        DocWrite(WS, "x#doc#y", "k", {"odd": "collection"}),
        DocWrite("other", "mapping", "shop:refund_create", {"status": "other's"}),
        DocWrite(GLOBAL, "key", "h1", {"kind": "agent"}),
    ])  # fmt: skip
    store.write_docs([DocWrite(WS, "rule_stamp", "rules", {"stamp": "rs_2"}, expect_rev=1)])
    wanted = [
        ("rule_stamp", "rules"), ("mapping", "shop:refund_create"), ("mapping", "shop:absent"),
        ("timeline:a@x.io", "rules"), ("x#doc#y", "k"), ("nothing", "rules"),
    ]  # fmt: skip
    got = store.get_docs(WS, wanted)
    assert got == [store.get_doc(WS, c, k) for c, k in wanted]
    assert got[0] == Doc("rule_stamp", "rules", {"stamp": "rs_2"}, 2)
    assert got[1] == Doc("mapping", "shop:refund_create", {"status": "active"}, 1)
    assert got[2] is None and got[5] is None
    assert got[3] == Doc("timeline:a@x.io", "rules", {"same key": "another collection"}, 1)
    assert got[4] == Doc("x#doc#y", "k", {"odd": "collection"}, 1)
    # A pair asked twice is read once and answered twice; another workspace's stay its own.
    twice = store.get_docs(WS, [("mapping", "shop:refund_create")] * 2)
    assert twice == [got[1], got[1]]
    theirs = store.get_docs("other", [("mapping", "shop:refund_create"), ("rule_stamp", "rules")])
    assert theirs == [Doc("mapping", "shop:refund_create", {"status": "other's"}, 1), None]
    assert store.get_docs(GLOBAL, [("key", "h1")]) == [Doc("key", "h1", {"kind": "agent"}, 1)]
    assert store.get_docs(WS, []) == []


def test_get_docs_reads_at_most_a_batch(store: Store) -> None:
    store.write_docs([DocWrite(WS, "d", f"k{i:03d}", {"i": i}) for i in range(50)])
    store.write_docs([DocWrite(WS, "d", f"k{i:03d}", {"i": i}) for i in range(50, 100)])
    wanted = [("d", f"k{i:03d}") for i in range(MAX_DOCS_READ)][::-1]
    got = store.get_docs(WS, wanted)
    assert [d.value["i"] if d else None for d in got] == list(range(MAX_DOCS_READ))[::-1]
    with pytest.raises(ValueError, match=f"at most {MAX_DOCS_READ} docs"):
        store.get_docs(WS, [*wanted, ("d", "one more")])


def _keys(docs: list[Doc]) -> list[str]:
    return [d.key for d in docs]


def test_query_docs(store: Store) -> None:
    keys = ["a1", "a2", "a3", "b1", "b2", "c", "ä"]
    store.write_docs([DocWrite(WS, "x", k, {"k": k}) for k in keys])
    store.write_docs([DocWrite(WS, "xy", "a0", {}), DocWrite("other", "x", "a0", {})])
    q = store.query_docs
    assert _keys(q(WS, "x")) == keys  # key order (code points / UTF-8 bytes)
    assert q(WS, "x")[0] == Doc("x", "a1", {"k": "a1"}, 1)
    assert _keys(q(WS, "x", descending=True)) == keys[::-1]
    assert _keys(q(WS, "x", prefix="a")) == ["a1", "a2", "a3"]
    assert _keys(q(WS, "x", prefix="a", descending=True)) == ["a3", "a2", "a1"]
    assert _keys(q(WS, "x", after="a2")) == ["a3", "b1", "b2", "c", "ä"]
    assert _keys(q(WS, "x", after="a2", descending=True)) == ["a1"]
    assert _keys(q(WS, "x", after="a25")) == ["a3", "b1", "b2", "c", "ä"]  # need not exist
    assert _keys(q(WS, "x", prefix="a", after="a1")) == ["a2", "a3"]
    assert _keys(q(WS, "x", prefix="a", after="a3", descending=True)) == ["a2", "a1"]
    assert _keys(q(WS, "x", prefix="a", after="a")) == ["a1", "a2", "a3"]
    assert _keys(q(WS, "x", prefix="a", after="a", descending=True)) == []
    assert _keys(q(WS, "x", prefix="b", after="a9")) == ["b1", "b2"]
    assert _keys(q(WS, "x", prefix="b", after="a9", descending=True)) == []
    assert _keys(q(WS, "x", prefix="a", after="b")) == []
    assert _keys(q(WS, "x", prefix="a", after="b", descending=True)) == ["a3", "a2", "a1"]
    assert _keys(q(WS, "x", limit=2)) == ["a1", "a2"]
    assert _keys(q(WS, "x", after="a2", limit=2)) == ["a3", "b1"]
    assert _keys(q(WS, "x", descending=True, limit=2)) == ["ä", "c"]
    assert _keys(q(WS, "x", prefix="b", limit=1)) == ["b1"]
    assert q(WS, "x", limit=0) == []
    assert q(WS, "x", prefix="z") == []
    assert q(WS, "nothing") == []
    assert _keys(q("other", "x")) == ["a0"]


# --- checkpoints and public keys ------------------------------------------------------
def test_checkpoints(store: Store) -> None:
    cps = [
        Checkpoint(WS, seq, f"{seq:064x}", 1000 + seq, "ed25519:k", "c2ln") for seq in (100, 5, 20)
    ]
    for cp in cps:
        assert store.add_checkpoint(cp) is True
    assert store.add_checkpoint(Checkpoint(WS, 5, "f" * 64, 9, "ed25519:k", "x")) is False
    assert [c.seq for c in store.checkpoints(WS)] == [5, 20, 100]
    assert store.checkpoints(WS)[0] == cps[1]  # the first one stays
    assert [c.seq for c in store.checkpoints(WS, since=5)] == [20, 100]
    assert [c.seq for c in store.checkpoints(WS, since=20, limit=5)] == [100]
    assert [c.seq for c in store.checkpoints(WS, limit=2)] == [5, 20]
    assert store.checkpoints(WS, since=100) == []
    assert store.latest_checkpoint(WS) == cps[0]
    assert store.checkpoints("other") == [] and store.latest_checkpoint("other") is None


def test_public_keys(store: Store) -> None:
    newer = PublicKey(WS, "ed25519:bbbb", "Qg==", 2000)
    older = PublicKey(WS, "ed25519:aaaa", "QQ==", 1000)
    store.add_public_key(newer)
    store.add_public_key(older)
    store.add_public_key(PublicKey(WS, "ed25519:aaaa", "changed", 5))  # ignored: exists
    store.add_public_key(PublicKey("other", "ed25519:cccc", "Qw==", 1))
    assert store.public_keys(WS) == [older, newer]
    assert store.public_keys("other") == [PublicKey("other", "ed25519:cccc", "Qw==", 1)]


# --- prune ----------------------------------------------------------------------------
def test_prune_below_a_signed_checkpoint(store: Store, tmp_path: Path) -> None:
    signer = FileSigner(tmp_path / "keys")
    entries = [
        store.append(WS, "rule_version", "r1@1", {"rule": "refund-half", "version": 1}),
        store.append(WS, "check", "c1", {"result": "ask"}),
        store.append(WS, "approval", "ap1", {"decision": "approve"}),
        store.append(WS, "rule_version_close", "r1@1", {"closed": True}),
        store.append(WS, "outcome", "o1", {"ok": True}),
        store.append(WS, "mapping_version", "m1@1", {"app": "shop"}),
        *_append_n(store, 4),
    ]
    with pytest.raises(PruneError):
        store.prune(WS, 5)
    _sign(signer, store, entries[3])  # a checkpoint, but not at 5
    with pytest.raises(PruneError, match="5"):
        store.prune(WS, 5)
    assert len(list(store.entries(WS))) == 10

    cp, public = _sign(signer, store, entries[4])
    # As claros.evidence.retention.prune does it: a prune entry naming the cut, signed.
    kept_items = [(1, "rule_version", "r1@1", entries[0].payload_sha256),
                  (4, "rule_version_close", "r1@1", entries[3].payload_sha256)]  # fmt: skip
    said = store.append(WS, "prune", "prn1", {
        "through_seq": 5, "checkpoint": {"seq": 5, "hash": cp.hash}, "retention_days": 200,
        "kept": {"count": 2, "sha256": kept_digest(kept_items)}})  # fmt: skip
    _sign(signer, store, said)
    assert store.prune(WS, 5) == PruneResult(entries_deleted=5, records_deleted=3, through_seq=5)
    assert [e.seq for e in store.entries(WS)] == [6, 7, 8, 9, 10, 11]
    assert store.head(WS) == said
    for kind, ref in (("check", "c1"), ("approval", "ap1"), ("outcome", "o1")):
        assert store.get_record(WS, kind, ref) is None
    assert store.get_record(WS, "rule_version", "r1@1") == {"rule": "refund-half", "version": 1}
    assert store.get_record(WS, "rule_version_close", "r1@1") == {"closed": True}
    assert store.get_record(WS, "mapping_version", "m1@1") == {"app": "shop"}
    assert store.get_record(WS, "check", "check-0") is not None
    # What a prune keeps, for the export and the verifier: below the cut, in seq order,
    # as the bytes their entries hashed.
    kept = store.kept_records(WS, 5)
    assert [(k.seq, k.kind, k.ref_id) for k in kept] == [
        (1, "rule_version", "r1@1"), (4, "rule_version_close", "r1@1")]  # fmt: skip
    assert [hashlib.sha256(k.raw).hexdigest() for k in kept] == [
        entries[0].payload_sha256, entries[3].payload_sha256]  # fmt: skip
    assert [k.seq for k in store.kept_records(WS, 6)] == [1, 4, 6]
    assert store.kept_records(WS, 0) == [] and store.kept_records("other", 10) == []

    checkpoints, keys = store.checkpoints(WS), store.public_keys(WS)
    verifier = ChainVerifier(WS, checkpoints, keys, compare_records=True)
    for k in kept:
        verifier.feed_kept(k.seq, k.kind, k.ref_id, jsonutil.loads(k.raw))
    for entry, rec in store.entries_with_records(WS):
        verifier.feed(entry, rec)
    report = verifier.finish()
    assert report.ok, report.failures
    assert report.first_seq == 6 and report.last_checkpoint_seq == 11
    assert cp in checkpoints and public in keys
    # Without the checkpoint the pruned log does not verify: the anchor matters.
    unanchored = verify_entries(WS, store.entries_with_records(WS), compare_records=True)
    assert not unanchored.ok

    # Pruning again is a no-op; the chain goes on.
    assert store.prune(WS, 5) == PruneResult(0, 0, 5)
    nxt = store.append(WS, "check", "after", {"result": "allow"})
    assert nxt.seq == 12 and nxt.prev_hash == said.hash
    # A pruned record's id may be used again (its entry is gone too).
    assert store.append(WS, "check", "c1", {"result": "allow"}).seq == 13


# --- concurrency ----------------------------------------------------------------------
@pytest.mark.slow
def test_concurrent_appends_make_one_gapless_chain(store: Store) -> None:
    threads, per_thread = 8, 250
    if isinstance(store, DynamoStore):
        # This test is about the chain staying gapless under contention, not about how
        # long one writer may lose races: 8 threads hammering one moto head can starve a
        # writer past the default 20 attempts on a busy machine (issue "A busy workspace"
        # replaces the retry race with group commit).
        store.max_attempts = 200
    start = threading.Barrier(threads)

    def worker(t: int) -> list[int]:
        start.wait()
        return [
            store.append("busy", "check", f"t{t}-{i}", {"thread": t, "i": i}).seq
            for i in range(per_thread)
        ]

    began = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        seqs = [s for got in pool.map(worker, range(threads)) for s in got]
    elapsed = time.perf_counter() - began
    total = threads * per_thread
    assert sorted(seqs) == list(range(1, total + 1))
    entries = list(store.entries("busy"))
    assert [e.seq for e in entries] == list(range(1, total + 1))
    assert len({e.ref_id for e in entries}) == total
    head = store.head("busy")
    assert head is not None and head.seq == total
    report = verify_entries("busy", store.entries_with_records("busy"), compare_records=True)
    assert report.ok, report.failures[:5]
    assert report.records_compared == total
    print(f"{total} concurrent appends in {elapsed:.1f}s")


# --- SQLite only: the triggers --------------------------------------------------------
def test_sqlite_triggers_refuse_rewriting_history(sqlite_store: Store) -> None:
    assert isinstance(sqlite_store, SqliteStore)
    sqlite_store.append(WS, "rule_version", "r1@1", {"rule": "r1"})
    _append_n(sqlite_store, 3)
    raw = sqlite3.connect(sqlite_store.path, isolation_level=None)
    try:
        refused = [
            "UPDATE ledger SET kind = 'x' WHERE seq = 1",
            "DELETE FROM ledger WHERE seq = 1",
            "UPDATE records SET body = '{}' WHERE ref_id = 'check-0'",
            "DELETE FROM records WHERE ref_id = 'check-0'",
        ]
        for sql in refused:
            with pytest.raises(sqlite3.IntegrityError):
                raw.execute(sql)
        raw.execute("INSERT INTO checkpoints VALUES (?, 2, 'h', 0, 'k', 's')", (WS,))
        with pytest.raises(sqlite3.IntegrityError):
            raw.execute("UPDATE checkpoints SET hash = 'x'")
        with pytest.raises(sqlite3.IntegrityError):
            raw.execute("DELETE FROM checkpoints")
        # Below a checkpoint too, deletes are refused: only a prune deletes ...
        for sql in ("DELETE FROM records WHERE workspace = ? AND seq = 2",
                    "DELETE FROM ledger WHERE workspace = ? AND seq <= 2"):  # fmt: skip
            with pytest.raises(sqlite3.IntegrityError, match="only by a prune"):
                raw.execute(sql, (WS,))
        # ... and the mark a prune makes needs a prune entry naming its cut ...
        with pytest.raises(sqlite3.IntegrityError, match="its prune entry"):
            raw.execute("INSERT INTO prune_marks VALUES (?, 2)", (WS,))
        with pytest.raises(PruneError, match="no prune entry says through_seq 2"):
            sqlite_store.prune(WS, 2)
        sqlite_store.append(WS, "prune", "prn1", {"through_seq": 2})
        raw.execute("BEGIN")
        raw.execute("INSERT INTO prune_marks VALUES (?, 2)", (WS,))
        # ... which still never deletes rule and mapping versions, nor above its cut.
        with pytest.raises(sqlite3.IntegrityError, match="never versions"):
            raw.execute("DELETE FROM records WHERE workspace = ? AND seq = 1", (WS,))
        with pytest.raises(sqlite3.IntegrityError, match="only by a prune"):
            raw.execute("DELETE FROM ledger WHERE workspace = ? AND seq = 3", (WS,))
        raw.execute("DELETE FROM records WHERE workspace = ? AND seq = 2", (WS,))
        raw.execute("DELETE FROM ledger WHERE workspace = ? AND seq <= 2", (WS,))
        raw.execute("DELETE FROM prune_marks")
        raw.execute("COMMIT")
    finally:
        raw.close()
    assert [e.seq for e in sqlite_store.entries(WS)] == [3, 4, 5]
