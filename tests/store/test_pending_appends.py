"""Pending appends (claros.store.dynamo_pending): appends of one workspace made by
different processes, each its own DynamoStore as Lambda environments are, share
transactions. An append that lost the race for the head queues a pending item; whichever
append takes the head next carries it (its entry, its record and the delete of its pending
item in one transaction); the loser learns its answer from the ledger.

Races are made, not waited for: a wrapped client runs "another process's" append just
before the transaction it wraps, so the head has moved when that transaction lands. The
processes test runs real processes against a ThreadedMotoServer."""

from __future__ import annotations

import functools
import multiprocessing
from collections.abc import Callable
from typing import Any

import pytest

from claros.ledger import Entry, verify_entries
from claros.store.base import ChainBusyError, ConflictError, DocWrite
from claros.store.dynamo import DynamoStore, record_key
from claros.store.dynamo_pending import pending_pk
from tests.aws import STORE_TABLES

WS = "acme"


class Racing:
    """A DynamoDB client whose next transactions are each preceded by ``before[0]()``
    (popped): another writer that gets in first."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.before: list[Callable[[], object]] = []

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self.before:
            self.before.pop(0)()
        return self._client.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _tables(tables: dict[str, str]) -> dict[str, Any]:
    return {arg: tables[lid] for arg, lid in STORE_TABLES.items()}


@pytest.fixture
def make_store(dynamodb_client: Any, dynamo_tables: dict[str, str]) -> Callable[..., DynamoStore]:
    def make(client: Any = None, **options: Any) -> DynamoStore:
        options.setdefault("sleep", lambda _s: None)
        return DynamoStore(client or dynamodb_client, **_tables(dynamo_tables), **options)

    return make


def _pending(client: Any, store: DynamoStore) -> list[dict[str, Any]]:
    got = client.query(
        TableName=store.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pending_pk(WS)}},
        ConsistentRead=True,
    )
    return list(got["Items"])


def _record_item(client: Any, store: DynamoStore, ref_id: str) -> dict[str, Any] | None:
    got = client.get_item(
        TableName=store.records_table, Key=record_key(WS, "check", ref_id), ConsistentRead=True
    )
    item: dict[str, Any] | None = got.get("Item")
    return item


def _verifies(store: DynamoStore) -> list[Entry]:
    entries = list(store.entries(WS))
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    report = verify_entries(WS, store.entries_with_records(WS), compare_records=True)
    assert report.ok, report.failures[:3]
    return entries


def test_an_append_that_lost_the_race_is_carried_by_the_next_committer(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    other = make_store()  # another Lambda environment
    other.append(WS, "check", "c0", {"n": 0})
    racing = Racing(dynamodb_client)
    sleeps: list[float] = []

    def other_appends_while_we_back_off(_s: float) -> None:
        sleeps.append(_s)
        if len(sleeps) == 1:
            other.append(WS, "check", "c2", {"n": 2})  # takes the head, carries "c1"

    store = make_store(racing, sleep=other_appends_while_we_back_off)
    store.append(WS, "check", "warm", {"n": -1})  # the store knows the head
    racing.before.append(lambda: other.append(WS, "check", "c0b", {"n": 0}))
    answer = store.append(WS, "check", "c1", {"n": 1})

    entries = _verifies(store)
    assert entries[answer.seq - 1] == answer  # the answer is what the ledger holds
    # Carried by the other writer's transaction: its record keeps the pending key, the
    # other writer's own entry comes first and then ours in the same transaction.
    assert [e.ref_id for e in entries[-2:]] == ["c2", "c1"]
    record = _record_item(dynamodb_client, store, "c1")
    assert record is not None and "pend" in record
    assert _pending(dynamodb_client, store) == []  # the carried item is gone
    assert store.get_record(WS, "check", "c1") == {"n": 1}


def test_a_loser_that_gives_up_takes_its_pending_item_back_and_is_not_written(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    other = make_store(pending_appends=False)  # races, carries nothing
    racing = Racing(dynamodb_client)
    store = make_store(racing, max_attempts=2)
    store.append(WS, "check", "warm", {})
    racing.before += [functools.partial(other.append, WS, "check", f"o{i}", {}) for i in range(2)]
    with pytest.raises(ChainBusyError):
        store.append(WS, "check", "lost", {"n": 1})
    assert _pending(dynamodb_client, store) == []  # taken back: no one can carry it now
    make_store().append(WS, "check", "later", {})  # a committer that would carry it
    assert _record_item(dynamodb_client, store, "lost") is None
    assert [e.ref_id for e in _verifies(store)] == ["warm", "o0", "o1", "later"]


def test_a_loser_whose_item_was_carried_as_it_gave_up_answers_success(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    other = make_store()
    racing = Racing(dynamodb_client)
    store = make_store(racing, max_attempts=2)
    store.append(WS, "check", "warm", {})
    # The first transaction loses to a plain append (ours is then queued); the second
    # loses to a committer that carries our pending item: our last attempt failed, and
    # our give-up finds the item gone.
    racing.before += [
        lambda: other.append(WS, "check", "o0", {}),
        lambda: other.append(WS, "check", "o1", {}),
    ]
    answer = store.append(WS, "check", "carried", {"n": 1})
    entries = _verifies(store)
    assert entries[answer.seq - 1] == answer
    assert [e.ref_id for e in entries] == ["warm", "o0", "o1", "carried"]


def test_an_orphan_pending_item_is_carried_until_it_expires_never_after(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    """A writer that died after queueing: its append is written by the next committer,
    as a writer that died just after its own transaction is (its caller saw no answer
    either way); once expired, when its writer would have given up, it never is."""
    dying = make_store()
    dying.append(WS, "check", "warm", {})
    from claros.store.dynamo import _Append

    alive = _Append(WS, [dying._prepare(WS, n) for n in _new("orphan")], (), [], None)
    dying._enqueue(alive)
    expired = make_store(pending_ttl_s=0)  # its items expire as soon as they are queued
    late = _Append(WS, [expired._prepare(WS, n) for n in _new("expired")], (), [], None)
    expired._enqueue(late)
    assert alive.pending and late.pending and len(_pending(dynamodb_client, dying)) == 2

    make_store().append(WS, "check", "next", {})
    assert [e.ref_id for e in _verifies(dying)] == ["warm", "next", "orphan"]
    assert _record_item(dynamodb_client, dying, "expired") is None
    assert _pending(dynamodb_client, dying) == []  # the expired item was removed
    assert isinstance(expired._resolve(late), ChainBusyError)  # what its writer would say


def _new(ref_id: str) -> list[Any]:
    from claros.store.base import NewRecord

    return [NewRecord("check", ref_id, {"id": ref_id})]


def test_a_carried_append_whose_record_exists_is_a_conflict_for_its_writer(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    store = make_store()
    store.append(WS, "check", "dup", {"first": True})
    from claros.store.dynamo import _Append

    item = _Append(WS, [store._prepare(WS, n) for n in _new("dup")], (), [], None)
    store._enqueue(item)
    make_store().append(WS, "check", "next", {})  # tries to carry it: its record exists
    assert _pending(dynamodb_client, store) == []
    answer = store._resolve(item)
    assert isinstance(answer, ConflictError) and answer.key == "dup"
    assert [e.ref_id for e in _verifies(store)] == ["dup", "next"]


def test_an_append_with_doc_writes_stays_on_the_direct_path(
    make_store: Callable[..., DynamoStore], dynamodb_client: Any
) -> None:
    other = make_store()
    racing = Racing(dynamodb_client)
    queued: list[int] = []
    store = make_store(
        racing, sleep=lambda _s: queued.append(len(_pending(dynamodb_client, other)))
    )
    store.append(WS, "check", "warm", {})
    racing.before.append(lambda: other.append(WS, "check", "o0", {}))
    write = DocWrite(WS, "rules", "r1", {"on": True}, expect_rev=0)
    store.append(WS, "check", "with-doc", {}, writes=[write])
    assert queued == [0]  # it retried without queueing itself
    assert store.get_doc(WS, "rules", "r1") is not None
    assert [e.ref_id for e in _verifies(store)] == ["warm", "o0", "with-doc"]


# --- K processes, each its own store, M appends each --------------------------------
def _writer(endpoint: str, tables: dict[str, str], w: int, m: int, out: Any) -> None:
    import boto3

    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    store = DynamoStore(client, **_tables(tables))
    for i in range(m):
        ref = f"p{w}-{i}"
        try:
            e = store.append(WS, "check", ref, {"w": w, "i": i})
        except ChainBusyError:
            out.put((ref, None))
        else:
            out.put((ref, (e.seq, e.hash, e.ts)))


@pytest.mark.parametrize(("k", "m"), [(5, 10)])
def test_processes_appending_to_one_workspace_make_one_gapless_chain(
    moto_server: str, k: int, m: int
) -> None:
    import boto3

    from tests.aws import tables_from_template

    endpoint = moto_server
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint)
    tables = tables_from_template(client)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(endpoint, tables, w, m, out)) for w in range(k)]
    for p in procs:
        p.start()
    answers = dict(out.get(timeout=300) for _ in range(k * m))
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = DynamoStore(client, **_tables(tables))
    entries = _verifies(store)
    by_ref = {e.ref_id: e for e in entries}
    assert len(by_ref) == len(entries)  # no duplicate
    for ref, got in answers.items():
        if got is None:  # answered 503: not in the ledger, now or later
            assert ref not in by_ref
        else:
            e = by_ref[ref]
            assert (e.seq, e.hash, e.ts) == tuple(got)
    assert set(by_ref) == {r for r, got in answers.items() if got is not None}
    assert _pending(client, store) == []
    carried = sum("pend" in (_record_item(client, store, r) or {}) for r in by_ref)
    gave_up = sum(g is None for g in answers.values())
    print(f"{k} processes x {m}: {gave_up} gave up, {carried} carried by another's transaction")
