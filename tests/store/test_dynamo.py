"""DynamoStore beyond the conformance suite: its table layout, pagination, DynamoDB's
limits, and every error path (transient failures are injected around a moto client)."""

from __future__ import annotations

import base64
import os
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from claros.canonical import canonical
from claros.ledger import Checkpoint, Entry, PublicKey, verify_entries
from claros.store.base import (
    MAX_BATCH_RECORDS,
    MAX_BATCH_WRITES,
    MAX_RECORD_BYTES,
    ChainBusyError,
    ConflictError,
    Doc,
    DocWrite,
    KeyTooLongError,
    NewRecord,
    PruneResult,
    RecordTooLargeError,
    StoreError,
)
from claros.store.dynamo import (
    MAX_RECORD_ITEM_BYTES,
    MAX_TRANSACT_ACTIONS,
    DynamoStore,
    record_key,
)
from tests.aws import STORE_TABLES

WS = "acme"


class Faulty:
    """A DynamoDB client whose named methods are replaced; the rest go to moto."""

    def __init__(self, client: Any, **methods: Callable[..., Any]) -> None:
        self._client = client
        self.__dict__.update(methods)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _error(code: str, operation: str = "TransactWriteItems", **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, **extra}, operation)  # type: ignore[arg-type]


def _cancelled(*codes: str) -> ClientError:
    reasons = [{"Code": c} for c in codes]
    return _error("TransactionCanceledException", CancellationReasons=reasons)


@pytest.fixture
def make_store(dynamodb_client: Any, dynamo_tables: dict[str, str]) -> Callable[..., DynamoStore]:
    def make(client: Any = None, **options: Any) -> DynamoStore:
        options.setdefault("sleep", lambda _s: None)
        tables = {arg: dynamo_tables[lid] for arg, lid in STORE_TABLES.items()}
        return DynamoStore(client or dynamodb_client, **tables, **options)

    return make


def _scan(client: Any, table: str) -> list[dict[str, Any]]:
    return list(client.scan(TableName=table)["Items"])


# --- layout ---------------------------------------------------------------------------
def test_items_are_laid_out_as_designed(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any, dynamo_tables: dict[str, str]
) -> None:
    store = make_store()
    entry = store.append(
        WS, "check", "c1", {"result": "ask", "amount": 12.5},
        writes=[DocWrite(WS, "asks", "q1", {"state": "open"})], ts=1234,
    )  # fmt: skip
    store.add_checkpoint(Checkpoint(WS, 1, entry.hash, 99, "ed25519:k", "c2ln"))
    store.add_public_key(PublicKey(WS, "ed25519:k", "QQ==", 5))

    [ledger] = _scan(dynamodb_client, dynamo_tables["LedgerTable"])
    assert ledger == {
        "workspace": {"S": WS}, "seq": {"N": "1"}, "kind": {"S": "check"},
        "ref_id": {"S": "c1"}, "ts": {"N": "1234"},
        "payload_sha256": {"S": entry.payload_sha256}, "prev_hash": {"S": entry.prev_hash},
        "hash": {"S": entry.hash},
    }  # fmt: skip
    [record] = _scan(dynamodb_client, dynamo_tables["RecordsTable"])
    assert record["rid"] == {"S": "check#c1"} and record["seq"] == {"N": "1"}
    assert zlib.decompress(record["body"]["B"]).decode() == '{"amount":12.5,"result":"ask"}'
    state = {
        (i["pk"]["S"], i["sk"]["S"]): i for i in _scan(dynamodb_client, dynamo_tables["StateTable"])
    }
    # No head item: the chain's head is its last entry, which no role can move.
    # The hour's and the day's aggregates (issue 13) land with the entry, under #doc# keys.
    assert set(state) == {
        (f"{WS}#doc#asks", "q1"),
        (f"{WS}#doc#_aggregates", "hour#000000000000"),
        (f"{WS}#doc#_aggregates", "day#000000000000"),
        (f"{WS}#checkpoint", "00000000000000000001"),
        (f"{WS}#pubkey", "ed25519:k"),
    }
    assert store.head(WS) == entry
    doc = state[(f"{WS}#doc#asks", "q1")]
    assert doc["rev"] == {"N": "1"} and doc["body"] == {"S": '{"state":"open"}'}


def test_ledger_stream_carries_each_new_entry_once(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any, dynamo_tables: dict[str, str]
) -> None:
    import boto3

    store = make_store()
    made = [store.append(WS, "check", f"c{i}", {"i": i}) for i in range(3)]
    with pytest.raises(ConflictError):  # a cancelled transaction leaves no stream record
        store.append(WS, "check", "c0", {"again": True})
    arn = dynamodb_client.describe_table(TableName=dynamo_tables["LedgerTable"])["Table"][
        "LatestStreamArn"
    ]
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    assert [r["eventName"] for r in records] == ["INSERT"] * 3
    images = [r["dynamodb"]["NewImage"] for r in records]
    seen = [
        Entry(
            i["workspace"]["S"], int(i["seq"]["N"]), i["kind"]["S"], i["ref_id"]["S"],
            int(i["ts"]["N"]), i["payload_sha256"]["S"], i["prev_hash"]["S"], i["hash"]["S"],
        )
        for i in images
    ]  # fmt: skip
    assert seen == made


# --- pagination -----------------------------------------------------------------------
def test_everything_pages(make_store: Callable[..., DynamoStore]) -> None:
    store = make_store(page_size=3)
    entries = [store.append(WS, "check", f"c{i:02d}", {"i": i}) for i in range(10)]
    assert list(store.entries(WS)) == entries
    assert list(store.entries(WS, since=2, limit=5)) == entries[2:7]
    pairs = list(store.entries_with_records(WS, since=1, limit=7))
    assert [e for e, _ in pairs] == entries[1:8]
    assert [r for _, r in pairs] == [{"i": i} for i in range(1, 8)]
    assert verify_entries(WS, store.entries_with_records(WS), compare_records=True).ok

    for seq in range(1, 11):
        store.add_checkpoint(Checkpoint(WS, seq, entries[seq - 1].hash, seq, "k", "s"))
        store.add_public_key(PublicKey(WS, f"k{seq:02d}", "QQ==", seq))
    assert [c.seq for c in store.checkpoints(WS, since=2, limit=5)] == [3, 4, 5, 6, 7]
    assert [c.seq for c in store.checkpoints(WS, since=-1)] == list(range(1, 11))
    assert len(store.public_keys(WS)) == 10

    store.write_docs([DocWrite(WS, "d", f"k{i:02d}", {"i": i}) for i in range(10)])
    assert [d.key for d in store.query_docs(WS, "d", limit=7)] == [f"k{i:02d}" for i in range(7)]
    assert [d.key for d in store.query_docs(WS, "d", after="k03", descending=True)] == [
        "k02", "k01", "k00"
    ]  # fmt: skip
    assert len(store.query_docs(WS, "d", limit=-1)) == 10  # SQLite's LIMIT -1: no limit

    store.append(WS, "prune", "prn1", {"through_seq": 8})  # a prune needs its entry
    assert store.prune(WS, 8) == PruneResult(8, 8, 8)
    assert [e.seq for e in store.entries(WS)] == [9, 10, 11]


# --- DynamoDB's limits ----------------------------------------------------------------
def test_records_must_fit_a_dynamodb_item_once_compressed(
    make_store: Callable[..., DynamoStore],
) -> None:
    store = make_store()
    noise = base64.b64encode(os.urandom(450_000)).decode()  # ~600 KB, compresses to ~450 KB
    assert len(noise) < MAX_RECORD_BYTES
    with pytest.raises(RecordTooLargeError, match=str(MAX_RECORD_ITEM_BYTES)):
        store.append(WS, "check", "noise", {"blob": noise})
    assert store.head(WS) is None
    # Repetitive records of almost the limit compress well and are kept.
    text = "the same words again " * 70_000
    assert 1_000_000 < len(canonical({"blob": text})) < MAX_RECORD_BYTES
    store.append(WS, "check", "big", {"blob": text})
    assert store.get_record(WS, "check", "big") == {"blob": text}


def test_transactions_hold_at_most_100_actions(make_store: Callable[..., DynamoStore]) -> None:
    store = make_store()
    # The largest append (2 actions per record, the head, the doc writes) fits in one.
    records = [NewRecord("check", f"c{i}", {"i": i}) for i in range(MAX_BATCH_RECORDS)]
    writes = [DocWrite(WS, "d", f"k{i}", {"i": i}) for i in range(MAX_BATCH_WRITES)]
    assert 2 * len(records) + 1 + len(writes) <= MAX_TRANSACT_ACTIONS
    assert len(store.append_many(WS, records, writes=writes)) == MAX_BATCH_RECORDS
    # Doc writes alone: 100 go in one transaction, 101 are refused before anything is sent.
    many = [DocWrite(WS, "e", f"k{i}", {"i": i}) for i in range(101)]
    with pytest.raises(StoreError, match="100"):
        store.write_docs(many)
    assert store.get_doc(WS, "e", "k0") is None
    store.write_docs(many[:100])
    assert len(store.query_docs(WS, "e", limit=200)) == 100


def test_cancellations_name_the_record_or_doc_that_failed(
    make_store: Callable[..., DynamoStore],
) -> None:
    store = make_store()
    store.append(WS, "check", "c1", {})
    store.write_docs([DocWrite(WS, "d", "b", {"v": 1})])
    batch = [NewRecord("check", "x", {}), NewRecord("check", "y", {}), NewRecord("check", "c1", {})]
    with pytest.raises(ConflictError) as info:
        store.append_many(WS, batch)
    assert info.value.key == "c1"
    writes = [DocWrite(WS, "d", "a", {"v": 1}), DocWrite(WS, "d", "b", {"v": 2}, expect_rev=0)]
    with pytest.raises(ConflictError, match="at revision 1, expected absent") as info:
        store.append_many(WS, batch[:2], writes=writes)
    assert info.value.key == "b"
    assert [e.seq for e in store.entries(WS)] == [1]


def test_one_doc_twice_in_a_transaction_is_refused(make_store: Callable[..., DynamoStore]) -> None:
    store = make_store()
    twice = [DocWrite(WS, "d", "k", {"v": 1}), DocWrite(WS, "d", "k", {"v": 2})]
    with pytest.raises(StoreError, match="twice"):
        store.write_docs(twice)
    with pytest.raises(StoreError, match="twice"):
        store.append(WS, "check", "c1", {}, writes=twice)
    assert store.get_doc(WS, "d", "k") is None and store.head(WS) is None


def test_a_key_longer_than_dynamodb_keeps_is_found_nowhere_and_never_written(
    make_store: Callable[..., DynamoStore],
) -> None:
    """DynamoDB refuses a sort key over 1,024 bytes on reads too (tests.aws fills the gap
    moto leaves there): a read by one finds nothing without asking, a write of one is a
    KeyTooLongError (a 400 with the reason, never a 503) and writes nothing."""
    store = make_store()
    store.append(WS, "check", "c1", {})
    store.write_docs([DocWrite(WS, "d", "short", {"v": 1})])
    for long in ("x" * 1025, "\U0001d538" * 257):  # 1,025 and 1,028 UTF-8 bytes
        assert store.get_doc(WS, "d", long) is None
        assert store.get_docs(WS, [("d", long), ("d", "short")])[0] is None
        assert store.get_docs(WS, [("d", long), ("d", "short")])[1] is not None
        assert store.get_record(WS, "check", long) is None
        assert store.get_raw_record(WS, "check", long) is None
        assert store.record_entry(WS, "check", long) is None
        with pytest.raises(KeyTooLongError, match="at most 1,024 bytes"):
            store.write_docs([DocWrite(WS, "d", "other", {"v": 1}), DocWrite(WS, "d", long, {})])
        with pytest.raises(KeyTooLongError):
            store.append(WS, "check", "c2", {}, writes=[DocWrite(WS, "d", long, {"v": 1})])
    assert store.get_doc(WS, "d", "other") is None and store.get_record(WS, "check", "c2") is None
    # 1,024 bytes exactly is a key DynamoDB keeps.
    store.write_docs([DocWrite(WS, "d", "y" * 1024, {"v": 2})])
    assert store.get_doc(WS, "d", "y" * 1024) is not None


def test_keys_dynamodb_refuses_are_store_errors(make_store: Callable[..., DynamoStore]) -> None:
    store = make_store()
    with pytest.raises(StoreError):
        store.write_docs([DocWrite(WS, "d", "", {"v": 1})])
    with pytest.raises(StoreError):
        store.get_doc(WS, "d", "")


# --- the chain head under contention ---------------------------------------------------
def test_chain_busy_after_bounded_attempts(make_store: Callable[..., DynamoStore]) -> None:
    rival = make_store()
    sleeps: list[float] = []
    real = rival.client

    def racing_transact(**kwargs: Any) -> Any:
        rival.append(WS, "check", f"rival-{len(sleeps)}-{os.urandom(4).hex()}", {})
        return real.transact_write_items(**kwargs)

    store = make_store(
        Faulty(real, transact_write_items=racing_transact),
        max_attempts=4,
        base_delay_s=0.01,
        sleep=sleeps.append,
    )
    with pytest.raises(ChainBusyError) as info:
        store.append(WS, "check", "mine", {"x": 1}, writes=[DocWrite(WS, "d", "k", {"v": 1})])
    assert info.value.retry_after_s >= 1
    assert len(sleeps) == 3  # between the 4 attempts
    assert 0.0025 <= sleeps[0] <= 0.01 and 0.01 <= sleeps[2] <= 0.04
    assert store.get_record(WS, "check", "mine") is None
    assert store.get_doc(WS, "d", "k") is None
    head = store.head(WS)
    assert head is not None and head.seq == 4  # the rival's four entries only
    assert verify_entries(WS, store.entries_with_records(WS), compare_records=True).ok


def test_an_environment_behind_the_head_finds_it_in_two_reads(
    make_store: Callable[..., DynamoStore], dynamo_tables: dict[str, str]
) -> None:
    """Another environment appended 20 entries since this one's last append: this one reads
    the entry after the one it knows (there), then the head in one Query; not one read per
    entry forward (each a round trip in the append's critical section)."""
    ledger = dynamo_tables["LedgerTable"]
    real = make_store().client
    reads: list[str] = []

    def get_item(**kwargs: Any) -> Any:
        reads.append(f"GetItem {kwargs['TableName']}")
        return real.get_item(**kwargs)

    def query(**kwargs: Any) -> Any:
        reads.append(f"Query {kwargs['TableName']}")
        return real.query(**kwargs)

    ours, theirs = make_store(Faulty(real, get_item=get_item, query=query)), make_store()
    ours.append(WS, "check", "c0", {"i": 0})
    for i in range(1, 21):
        theirs.append(WS, "check", f"c{i}", {"i": i})
    reads.clear()
    assert ours.append(WS, "check", "c21", {"i": 21}).seq == 22
    assert [r for r in reads if r.endswith(ledger)] == [f"GetItem {ledger}", f"Query {ledger}"]
    # At the head, one read says so.
    reads.clear()
    ours.append(WS, "check", "c22", {"i": 22})
    assert [r for r in reads if r.endswith(ledger)] == [f"GetItem {ledger}"]
    assert verify_entries(WS, ours.entries_with_records(WS), compare_records=True).ok


def _noting_reads(
    make_store: Callable[..., DynamoStore],
) -> tuple[DynamoStore, list[tuple[str, Any]]]:
    """A store whose GetItem and BatchGetItem calls are noted, (op, key or request items),
    in the list returned with it."""
    real = make_store().client
    calls: list[tuple[str, Any]] = []

    def batch_get_item(**kwargs: Any) -> Any:
        calls.append(("BatchGetItem", kwargs["RequestItems"]))
        return real.batch_get_item(**kwargs)

    def get_item(**kwargs: Any) -> Any:
        calls.append(("GetItem", kwargs["Key"]))
        return real.get_item(**kwargs)

    return make_store(Faulty(real, batch_get_item=batch_get_item, get_item=get_item)), calls


def test_an_append_reads_the_hour_and_the_day_in_one_request(
    make_store: Callable[..., DynamoStore], dynamo_tables: dict[str, str]
) -> None:
    """The two aggregates an append folds its rows into are read together, consistently,
    in one BatchGetItem: one round trip, not one per span."""
    store, calls = _noting_reads(make_store)
    for i in range(2):  # the first creates the aggregates, the second reads them back
        calls.clear()
        store.append(WS, "check", f"c{i}", {"result": "allow"}, ts=1_800_000_000_000 + i)
        batches = [c for op, c in calls if op == "BatchGetItem"]
        [request] = [b[dynamo_tables["StateTable"]] for b in batches]
        assert request["ConsistentRead"] is True
        assert sorted(k["sk"]["S"].split("#")[0] for k in request["Keys"]) == ["day", "hour"]
        assert not [k for op, k in calls if op == "GetItem" and "_aggregates" in str(k)]
    counts = store.aggregate_buckets(WS, 0, 10**9, span="day")
    assert len(counts) == 1


def test_transient_failures_are_retried(make_store: Callable[..., DynamoStore]) -> None:
    failures = [
        _cancelled("ConditionalCheckFailed", "None", "None"),  # the entry's seq was taken
        _cancelled("None", "None", "None", "TransactionConflict"),
        _cancelled("None", "ThrottlingError", "None"),
        _error("TransactionConflictException"),
        _error("ProvisionedThroughputExceededException"),
    ]
    base = make_store()
    real = base.client

    def flaky(**kwargs: Any) -> Any:
        if failures:
            raise failures.pop(0)
        return real.transact_write_items(**kwargs)

    store = make_store(Faulty(real, transact_write_items=flaky))
    doc = DocWrite(WS, "d", "k", {"v": 1})
    entry = store.append(WS, "check", "c1", {"ok": True}, writes=[doc])
    assert entry.seq == 1 and not failures
    assert store.get_doc(WS, "d", "k") is not None

    failures.extend([_cancelled("TransactionConflict"), _error("ThrottlingException")])
    store.write_docs([DocWrite(WS, "d", "k", {"v": 2}, expect_rev=1)])
    got = store.get_doc(WS, "d", "k")
    assert not failures and got is not None and got.rev == 2


def test_docs_that_stay_busy_are_a_conflict(make_store: Callable[..., DynamoStore]) -> None:
    def busy(**kwargs: Any) -> Any:
        raise _cancelled("TransactionConflict")

    store = make_store(Faulty(make_store().client, transact_write_items=busy), max_attempts=3)
    with pytest.raises(ConflictError, match="busy"):
        store.write_docs([DocWrite(WS, "d", "k", {"v": 1})])


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (_cancelled("None", "None", "ValidationError"), StoreError),
        (_error("ValidationException"), StoreError),
        (_error("AccessDeniedException"), ClientError),
    ],
    ids=["cancelled-otherwise", "validation", "access-denied"],
)
def test_other_failures_are_not_retried(
    make_store: Callable[..., DynamoStore], failure: ClientError, expected: type[Exception]
) -> None:
    calls: list[int] = []

    def fail(**kwargs: Any) -> Any:
        calls.append(1)
        raise failure

    store = make_store(Faulty(make_store().client, transact_write_items=fail))
    with pytest.raises(expected) as info:
        store.append(WS, "check", "c1", {})
    assert len(calls) == 1
    if expected is ClientError:
        assert info.value is failure
    with pytest.raises(expected):
        store.write_docs([DocWrite(WS, "d", "k", {"v": 1})])
    assert len(calls) == 2


def test_other_put_failures_surface(make_store: Callable[..., DynamoStore]) -> None:
    denied = _error("AccessDeniedException", "PutItem")

    def put_item(**kwargs: Any) -> Any:
        raise denied

    store = make_store(Faulty(make_store().client, put_item=put_item))
    with pytest.raises(ClientError) as info:
        store.add_checkpoint(Checkpoint(WS, 1, "h", 1, "k", "s"))
    assert info.value is denied
    with pytest.raises(ClientError):
        store.add_public_key(PublicKey(WS, "k", "QQ==", 1))


# --- batches ---------------------------------------------------------------------------
def test_unprocessed_batch_items_are_retried(make_store: Callable[..., DynamoStore]) -> None:
    base = make_store()
    real = base.client
    calls = {"get": 0, "write": 0}

    def batch_get_item(**kwargs: Any) -> Any:
        calls["get"] += 1
        (table, request), = kwargs["RequestItems"].items()  # fmt: skip
        keys = request["Keys"]
        if len(keys) < 2:
            return real.batch_get_item(**kwargs)
        half = dict(request, Keys=keys[: len(keys) // 2])
        got = real.batch_get_item(RequestItems={table: half})
        got["UnprocessedKeys"] = {table: dict(request, Keys=keys[len(keys) // 2 :])}
        return got

    def batch_write_item(**kwargs: Any) -> Any:
        calls["write"] += 1
        (table, requests), = kwargs["RequestItems"].items()  # fmt: skip
        if len(requests) < 2:
            return real.batch_write_item(**kwargs)
        real.batch_write_item(RequestItems={table: requests[:1]})
        return {"UnprocessedItems": {table: requests[1:]}}

    store = make_store(
        Faulty(real, batch_get_item=batch_get_item, batch_write_item=batch_write_item)
    )
    entries = [store.append(WS, "check", f"c{i}", {"i": i}) for i in range(6)]
    pairs = list(store.entries_with_records(WS))
    assert [r for _, r in pairs] == [{"i": i} for i in range(6)]
    assert calls["get"] > 1

    cp = Checkpoint(WS, 4, entries[3].hash, 1, "k", "s")
    store.add_checkpoint(cp)
    store.append(WS, "prune", "prn1", {"through_seq": 4})  # a prune needs its entry
    assert store.prune(WS, 4) == PruneResult(4, 4, 4)
    assert calls["write"] > 2
    assert [e.seq for e in base.entries(WS)] == [5, 6, 7]
    assert base.get_record(WS, "check", "c3") is None


def test_batches_that_stay_unprocessed_fail(make_store: Callable[..., DynamoStore]) -> None:
    base = make_store()
    entries = [base.append(WS, "check", f"c{i}", {"i": i}) for i in range(3)]
    base.add_checkpoint(Checkpoint(WS, 2, entries[1].hash, 1, "k", "s"))
    base.append(WS, "prune", "prn1", {"through_seq": 2})  # a prune needs its entry

    def never_get(**kwargs: Any) -> Any:
        return {"Responses": {}, "UnprocessedKeys": kwargs["RequestItems"]}

    def never_write(**kwargs: Any) -> Any:
        return {"UnprocessedItems": kwargs["RequestItems"]}

    reads = make_store(Faulty(base.client, batch_get_item=never_get), max_attempts=3)
    with pytest.raises(StoreError, match="unprocessed"):
        list(reads.entries_with_records(WS))
    # An append that cannot read its hour's and day's aggregates writes nothing.
    with pytest.raises(StoreError, match="unprocessed"):
        reads.append(WS, "check", "c9", {"i": 9})
    assert base.get_record(WS, "check", "c9") is None
    assert [e.seq for e in base.entries(WS)] == [1, 2, 3, 4]  # the three checks, the prune
    writes = make_store(Faulty(base.client, batch_write_item=never_write), max_attempts=3)
    with pytest.raises(StoreError, match="prune again"):
        writes.prune(WS, 2)
    # Nothing was lost: a prune that could write finishes the job.
    assert base.prune(WS, 2) == PruneResult(2, 2, 2)


def test_docs_read_together_are_one_consistent_request(
    make_store: Callable[..., DynamoStore], dynamo_tables: dict[str, str]
) -> None:
    store, calls = _noting_reads(make_store)
    store.write_docs([DocWrite(WS, "mapping", "shop:t", {"v": 1})])
    got = store.get_docs(WS, [("mapping", "shop:t"), ("rule_stamp", "rules")])
    assert got == [Doc("mapping", "shop:t", {"v": 1}, 1), None]
    [(op, items)] = calls
    request = items[dynamo_tables["StateTable"]]
    assert op == "BatchGetItem" and request["ConsistentRead"] is True
    assert [k["sk"]["S"] for k in request["Keys"]] == ["shop:t", "rules"]
    calls.clear()
    assert store.get_docs(WS, []) == [] and calls == []  # nothing asked, nothing sent


def test_docs_left_unprocessed_are_asked_again_then_fail(
    make_store: Callable[..., DynamoStore],
) -> None:
    base = make_store()
    base.write_docs([DocWrite(WS, "d", k, {"k": k}) for k in ("a", "b", "c")])
    requests: list[int] = []

    def half(**kwargs: Any) -> Any:
        (table, request), = kwargs["RequestItems"].items()  # fmt: skip
        keys = request["Keys"]
        requests.append(len(keys))
        got = base.client.batch_get_item(RequestItems={table: dict(request, Keys=keys[:1])})
        if len(keys) > 1:
            got["UnprocessedKeys"] = {table: dict(request, Keys=keys[1:])}
        return got

    slow = make_store(Faulty(base.client, batch_get_item=half))
    wanted = [("d", "c"), ("d", "x"), ("d", "a"), ("d", "b")]
    assert slow.get_docs(WS, wanted) == [base.get_doc(WS, c, k) for c, k in wanted]
    assert requests == [4, 3, 2, 1]

    def never(**kwargs: Any) -> Any:
        return {"Responses": {}, "UnprocessedKeys": kwargs["RequestItems"]}

    stuck = make_store(Faulty(base.client, batch_get_item=never), max_attempts=3)
    with pytest.raises(StoreError, match="unprocessed"):
        stuck.get_docs(WS, wanted)


@pytest.mark.parametrize(
    ("failure", "expected"),
    [(_error("ValidationException", "BatchGetItem"), StoreError),
     (_error("AccessDeniedException", "BatchGetItem"), ClientError)],
    ids=["validation", "access-denied"],
)  # fmt: skip
def test_docs_read_together_fail_as_one_doc_read_does(
    make_store: Callable[..., DynamoStore], failure: ClientError, expected: type[Exception]
) -> None:
    def fail(**kwargs: Any) -> Any:
        raise failure

    store = make_store(Faulty(make_store().client, batch_get_item=fail, get_item=fail))
    for read in (lambda: store.get_doc(WS, "d", "k"), lambda: store.get_docs(WS, [("d", "k")])):
        with pytest.raises(expected) as info:
            read()
        assert (info.value is failure) == (expected is ClientError)


def test_a_record_rewritten_under_its_entry_reads_as_missing(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any, dynamo_tables: dict[str, str]
) -> None:
    store = make_store()
    store.append(WS, "check", "c1", {"result": "allow"})
    body = zlib.compress(canonical({"result": "allow"}).encode())
    dynamodb_client.put_item(
        TableName=dynamo_tables["RecordsTable"],
        Item={**record_key(WS, "check", "c1"), "seq": {"N": "7"}, "body": {"B": body}},
    )
    [(entry, record)] = list(store.entries_with_records(WS))
    assert record is None
    report = verify_entries(WS, [(entry, record)], compare_records=True)
    assert not report.ok and "deleted" in report.failures[0].problem


def test_constructor_checks_its_options(make_store: Callable[..., DynamoStore]) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        make_store(max_attempts=0)
    with pytest.raises(ValueError, match="page_size"):
        make_store(page_size=101)
    with pytest.raises(ValueError, match="page_size"):
        make_store(page_size=0)
    make_store().close()  # the client belongs to the caller; close is a no-op
