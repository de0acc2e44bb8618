"""Group commit (claros.store.group) on both stores: appends that arrive together share a
transaction, each keeps its own answer, and the chain stays one gapless chain.

The grouping tests hold the leader's transaction at a gate until the followers have
queued (waited on with bounded timeouts), so what shares a transaction never depends on
timing luck."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from claros.aggregates import SPANS
from claros.ledger import Entry, verify_entries
from claros.store.base import (
    ChainBusyError,
    ConflictError,
    DocWrite,
    StorageUnavailableError,
    Store,
    StoreError,
)
from claros.store.dynamo import RECORD_SPREAD, DynamoStore, record_key
from claros.store.sqlite import SqliteStore
from claros.tamper import Tampering, tampering_in
from tests.aws import STORE_TABLES
from tests.security.faults import SqliteDiskFault

# Each append transaction also puts its hour's and day's aggregate, once per group.
AGG = len(SPANS)

WS = "acme"


def _lane(store: Store) -> str:
    return WS if isinstance(store, DynamoStore) else ""  # SQLite: one lane per file


def _wait_until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


class Gate:
    """Holds the first group transaction until ``open()``; counts the batches."""

    def __init__(self, store: Store) -> None:
        self.group = store._group  # type: ignore[attr-defined]
        self.inner = self.group._commit
        self.entered = threading.Event()
        self.released = threading.Event()
        self.batches: list[int] = []
        self.group._commit = self

    def __call__(self, batch: list[Any]) -> Any:
        if not self.entered.is_set():
            self.entered.set()
            assert self.released.wait(10)
        self.batches.append(len(batch))
        return self.inner(batch)

    def open(self) -> None:
        self.released.set()


class Appender:
    """Appends in threads; each call's answer (entries or the exception) kept by name."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.answers: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, **kwargs: Any) -> None:
        def run() -> None:
            try:
                self.answers[name] = self.store.append(
                    WS, "check", kwargs.pop("ref_id", name), {"name": name}, **kwargs
                )
            except Exception as exc:
                self.answers[name] = exc

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(30)
            assert not thread.is_alive()


def _held(store: Store) -> tuple[Gate, Appender]:
    """A leader whose transaction is held at the gate."""
    gate, appender = Gate(store), Appender(store)
    appender.start("leader")
    assert gate.entered.wait(10)
    return gate, appender


def _verifies(store: Store, n: int) -> list[Entry]:
    entries = list(store.entries(WS))
    assert [e.seq for e in entries] == list(range(1, n + 1))
    report = verify_entries(WS, store.entries_with_records(WS), compare_records=True)
    assert report.ok, report.failures[:3]
    return entries


def test_appends_that_arrive_together_share_one_transaction(store: Store) -> None:
    gate, appender = _held(store)
    for i in range(20):
        appender.start(f"f{i}")
    _wait_until(lambda: store._group.queued(_lane(store)) == 20)  # type: ignore[attr-defined]
    gate.open()
    appender.join()
    assert gate.batches == [1, 20]  # the leader alone, then everyone who queued meanwhile
    assert all(isinstance(a, Entry) for a in appender.answers.values()), appender.answers
    entries = _verifies(store, 21)
    # Each caller got its own entry, the one in the chain.
    assert {a.seq: a for a in appender.answers.values()} == {e.seq: e for e in entries}
    for name, entry in appender.answers.items():
        assert store.get_record(WS, "check", name) == {"name": name}
        assert entry.ref_id == name


def test_an_append_whose_condition_fails_fails_alone(store: Store) -> None:
    store.append(WS, "check", "taken", {"first": True})
    store.write_docs([DocWrite(WS, "asks", "q", {"state": "open"})])
    gate, appender = _held(store)
    appender.start("dup", ref_id="taken")
    appender.start("stale", writes=[DocWrite(WS, "asks", "q", {"state": "x"}, expect_rev=7)])
    appender.start("fine", writes=[DocWrite(WS, "asks", "other", {"n": 1}, expect_rev=0)])
    _wait_until(lambda: store._group.queued(_lane(store)) == 3)  # type: ignore[attr-defined]
    gate.open()
    appender.join()
    assert isinstance(appender.answers["dup"], ConflictError)
    assert isinstance(appender.answers["stale"], ConflictError)
    assert "revision 7" in str(appender.answers["stale"])
    assert isinstance(appender.answers["fine"], Entry)
    assert gate.batches == [1, 3]
    entries = _verifies(store, 3)
    assert [e.ref_id for e in entries] == ["taken", "leader", "fine"]
    # Nothing of the two that failed was written.
    assert store.get_record(WS, "check", "stale") is None
    assert store.get_record(WS, "check", "taken") == {"first": True}
    doc = store.get_doc(WS, "asks", "q")
    assert doc is not None and doc.value == {"state": "open"}
    assert store.get_doc(WS, "asks", "other") is not None


def test_two_appends_of_one_record_never_share_a_transaction(store: Store) -> None:
    gate, appender = _held(store)
    appender.start("a", ref_id="same")
    _wait_until(lambda: store._group.queued(_lane(store)) == 1)  # type: ignore[attr-defined]
    appender.start("b", ref_id="same")
    _wait_until(lambda: store._group.queued(_lane(store)) == 2)  # type: ignore[attr-defined]
    gate.open()
    appender.join()
    assert gate.batches == [1, 1, 1]  # the second "same" waited for the next transaction
    assert isinstance(appender.answers["a"], Entry)
    assert isinstance(appender.answers["b"], ConflictError)
    _verifies(store, 2)


def test_a_follower_waits_bounded_then_gives_up_writing_nothing(store: Store) -> None:
    store._group.wait_s = 0.2  # type: ignore[attr-defined]
    gate, appender = _held(store)
    began = time.monotonic()
    with pytest.raises((ChainBusyError, StorageUnavailableError), match="nothing was written"):
        store.append(WS, "check", "late", {"late": True})
    assert time.monotonic() - began < 5
    assert store._group.queued(_lane(store)) == 0  # type: ignore[attr-defined]
    gate.open()
    appender.join()
    assert isinstance(appender.answers["leader"], Entry)
    assert store.get_record(WS, "check", "late") is None
    _verifies(store, 1)


@pytest.mark.slow
def test_64_threads_by_100_appends_make_one_gapless_chain(
    store: Store, request: pytest.FixtureRequest
) -> None:
    stores = [store]
    if isinstance(store, DynamoStore):
        # Two stores on the same tables: two processes (Lambdas), racing for the head
        # across while each groups its own threads' appends.
        other = DynamoStore(
            store.client, store.ledger_table, store.records_table, store.state_table
        )
        stores.append(other)
        for one in stores:
            # About the chain, not about how long a busy shared machine may make a group
            # wait or lose races (the bench measures that): wide bounds.
            one.max_attempts = 200
            one._group.wait_s = 300
    else:
        stores.append(SqliteStore(store.path))  # type: ignore[attr-defined]
        request.addfinalizer(stores[1].close)
    threads, per_thread = 64, 100
    start = threading.Barrier(threads)

    def worker(t: int) -> list[int]:
        start.wait()
        mine = stores[t % 2]
        return [
            mine.append(WS, "check", f"t{t}-{i}", {"thread": t, "i": i}).seq
            for i in range(per_thread)
        ]

    with ThreadPoolExecutor(threads) as pool:
        seqs = [s for got in pool.map(worker, range(threads)) for s in got]
    total = threads * per_thread
    assert sorted(seqs) == list(range(1, total + 1))  # contiguous, none twice
    entries = _verifies(store, total)
    assert len({e.ref_id for e in entries}) == total
    head = store.head(WS)
    assert head is not None and head.seq == total
    grouped = sum(s._group.transactions for s in stores)  # type: ignore[attr-defined]
    print(f"{total} appends in {grouped} transactions")


# --- DynamoDB only ----------------------------------------------------------------------
class Faulty:
    """A DynamoDB client whose transact_write_items is replaced; the rest go to moto."""

    def __init__(self, client: Any, transact: Callable[..., Any]) -> None:
        self._client = client
        self.transact_write_items = transact

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "TransactWriteItems")


@pytest.fixture
def make_store(dynamodb_client: Any, dynamo_tables: dict[str, str]) -> Callable[..., DynamoStore]:
    def make(client: Any = None, **options: Any) -> DynamoStore:
        options.setdefault("sleep", lambda _s: None)
        tables = {arg: dynamo_tables[lid] for arg, lid in STORE_TABLES.items()}
        return DynamoStore(client or dynamodb_client, **tables, **options)

    return make


def test_a_failure_of_the_whole_transaction_is_every_appends(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    calls = []

    def transact(**kwargs: Any) -> Any:
        calls.append(len(kwargs["TransactItems"]))
        if len(calls) > 1:
            raise _error("AccessDeniedException")
        return dynamodb_client.transact_write_items(**kwargs)

    store = make_store(Faulty(dynamodb_client, transact))
    gate, appender = _held(store)
    for i in range(3):
        appender.start(f"f{i}")
    _wait_until(lambda: store._group.queued(WS) == 3)
    gate.open()
    appender.join()
    assert isinstance(appender.answers["leader"], Entry)
    for i in range(3):
        answer = appender.answers[f"f{i}"]
        assert isinstance(answer, ClientError) and "AccessDenied" in str(answer)
    # Not retried: one attempt for the group of three (each transaction also puts the
    # hour's and the day's aggregate once, AGG actions).
    assert calls == [2 + AGG, 1 + 3 * 2 + AGG]
    _verifies(store, 1)


def test_a_group_dynamodb_refuses_whole_goes_again_one_by_one(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    def transact(**kwargs: Any) -> Any:
        if len(kwargs["TransactItems"]) > 3 + AGG:  # say the group was too large
            raise _error("ValidationException")
        return dynamodb_client.transact_write_items(**kwargs)

    store = make_store(Faulty(dynamodb_client, transact))
    gate, appender = _held(store)
    for i in range(3):
        appender.start(f"f{i}")
    _wait_until(lambda: store._group.queued(WS) == 3)
    gate.open()
    appender.join()
    assert all(isinstance(a, Entry) for a in appender.answers.values()), appender.answers
    _verifies(store, 4)


def test_a_group_that_keeps_losing_races_is_busy_for_each(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    retries = []
    lost = {"n": 0}

    def transact(**kwargs: Any) -> Any:
        if len(kwargs["TransactItems"]) > 3 + AGG:  # another process always takes the seq
            lost["n"] += 1
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "x"},
                    "CancellationReasons": [{"Code": "None"}, {"Code": "ConditionalCheckFailed"}],
                },  # type: ignore[typeddict-unknown-key]
                "TransactWriteItems",
            )
        return dynamodb_client.transact_write_items(**kwargs)

    store = make_store(Faulty(dynamodb_client, transact), max_attempts=4)
    store.on_retry = lambda: retries.append(1)
    gate, appender = _held(store)
    appender.start("f0")
    appender.start("f1")
    _wait_until(lambda: store._group.queued(WS) == 2)
    gate.open()
    appender.join()
    for name in ("f0", "f1"):
        answer = appender.answers[name]
        assert isinstance(answer, ChainBusyError) and "4 attempts" in str(answer)
        assert store.get_record(WS, "check", name) is None
    assert lost["n"] == 4 and len(retries) == 3 * 2  # a retry counted per append
    _verifies(store, 1)


def test_the_old_racing_append_is_still_callable(make_store: Callable[..., DynamoStore]) -> None:
    store = make_store(group_commit=False)
    for i in range(3):
        store.append(WS, "check", f"c{i}", {"i": i})
    assert store._group.transactions == 0
    _verifies(store, 3)


def _scan(client: Any, table: str) -> Iterator[dict[str, Any]]:
    for page in client.get_paginator("scan").paginate(TableName=table):
        yield from page["Items"]


def test_records_of_a_workspace_spread_over_partitions(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any, dynamo_tables: dict[str, str]
) -> None:
    store = make_store()
    for i in range(100):
        store.append(WS, "check", f"chk_{i}", {"i": i})
    store.append(WS, "rule_version", "r1", {"rule": "r1"})  # read back by kind: not spread
    keys = {i["workspace"]["S"] for i in _scan(dynamodb_client, dynamo_tables["RecordsTable"])}
    spread = {f"{WS}#{n:02d}" for n in range(RECORD_SPREAD)}
    assert WS in keys and keys - {WS} <= spread and len(keys - {WS}) >= RECORD_SPREAD // 2
    assert record_key(WS, "rule_version", "r1")["workspace"] == {"S": WS}
    # Reads by id and the chain's reads find every record where it is.
    assert store.get_record(WS, "check", "chk_7") == {"i": 7}
    assert len(store.kept_records(WS, 101)) == 1
    _verifies(store, 101)


def test_records_written_before_the_spread_are_still_read(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any, dynamo_tables: dict[str, str]
) -> None:
    store = make_store()
    for i in range(3):
        store.append(WS, "check", f"old{i}", {"i": i})
    # Move them where a stack deployed before the spread wrote them: under the workspace.
    table = dynamo_tables["RecordsTable"]
    for i in range(3):
        key = record_key(WS, "check", f"old{i}")
        item = dynamodb_client.get_item(TableName=table, Key=key)["Item"]
        dynamodb_client.delete_item(TableName=table, Key=key)
        dynamodb_client.put_item(TableName=table, Item={**item, "workspace": {"S": WS}})
    assert store.get_record(WS, "check", "old1") == {"i": 1}
    assert store.get_record(WS, "check", "missing") is None
    _verifies(store, 3)
    body = zlib.decompress(
        dynamodb_client.get_item(
            TableName=table, Key={"workspace": {"S": WS}, "rid": {"S": "check#old0"}}
        )["Item"]["body"]["B"]  # fmt: skip
    )
    assert body == b'{"i":0}'


class _NoPrunes:
    def pruned_through(self, workspace: str) -> int:
        return 0

    def first_checkpoint_from(  # pragma: no cover - not called
        self, workspace: str, seq: int
    ) -> tuple[int, int] | None:
        return None

    def record(self, tampering: Tampering) -> bool:  # pragma: no cover - not called
        return True

    def list(self, workspace: str) -> list[Tampering]:  # pragma: no cover - not called
        return []


def test_a_rewritten_spread_record_is_tampering_in_its_workspace() -> None:
    key = record_key(WS, "check", "c1")
    assert key["workspace"]["S"] != WS
    record = {
        "eventName": "MODIFY",
        "eventID": "e1",
        "dynamodb": {"Keys": key, "OldImage": {**key, "seq": {"N": "4"}}},
    }
    found = tampering_in(record, _NoPrunes())
    assert found is not None and found.workspace == WS
    assert found.table == "records" and found.key == {"rid": "check#c1", "seq": 4}


def test_an_append_dynamodb_refuses_is_a_store_error(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    def refuse(**_: Any) -> Any:
        raise _error("ValidationException")

    store = make_store(Faulty(dynamodb_client, refuse))
    with pytest.raises(StoreError, match="refused the append"):
        store.append(WS, "check", "c", {})


# --- SQLite only --------------------------------------------------------------------------
def test_a_full_disk_fails_the_whole_group_and_writes_none_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = SqliteDiskFault(tmp_path / "claros.db", monkeypatch)
    store = SqliteStore(tmp_path / "claros.db")
    try:
        store.append(WS, "check", "before", {"n": 0})
        gate, appender = _held(store)
        for i in range(3):
            appender.start(f"f{i}", ref_id=f"f{i}-" + "x" * 5000)
        _wait_until(lambda: store._group.queued("") == 3)
        disk.fill()
        gate.open()
        appender.join()
        assert gate.batches == [1, 3]
        for i in range(3):  # (the leader's small row may fit in a page the file has)
            answer = appender.answers[f"f{i}"]
            assert isinstance(answer, StorageUnavailableError), answer
            assert "storage is full" in str(answer) and "nothing was written" in str(answer)
        disk.free()
        kept = 1 + isinstance(appender.answers["leader"], Entry)
        _verifies(store, kept)  # none of the group, not even the savepoints that had passed
        store.append(WS, "check", "after", {"n": 1})
        _verifies(store, kept + 1)
    finally:
        store.close()
