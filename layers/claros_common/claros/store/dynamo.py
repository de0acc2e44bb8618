"""DynamoDB store: the AWS implementation of ``claros.store.Store``.

Three tables (their definitions live in ``template.yaml``; the tests build them from it):

* **ledger**: PK ``workspace`` (S), SK ``seq`` (N); ``kind``, ``ref_id``, ``ts`` (N),
  ``payload_sha256``, ``prev_hash``, ``hash``. Append-only (IAM deny + resource policy).
* **records**: PK ``workspace`` (S), SK ``rid`` (S) = ``"{kind}#{ref_id}"``; ``seq`` (N) and
  ``body`` (B): the record's canonical JSON, zlib-compressed.
* **state**: PK ``pk`` (S), SK ``sk`` (S), holding

  ====================================  ==================  ==============================
  pk                                    sk                  attributes
  ====================================  ==================  ==============================
  ``{workspace}#doc#{collection}``      doc key             ``rev`` (N), ``body`` (S JSON)
  ``{workspace}#checkpoint``            ``{seq:020d}``      the checkpoint's fields
  ``{workspace}#pubkey``                key id              the public key's fields
  ``{workspace}#doc#_aggregates``       ``{span}#{n:012d}`` ``rev`` (N), ``body`` (B zlib JSON)
  ``{workspace}#verified``              ``state``           ``seq`` (N), ``body`` (S JSON)
  ``{workspace}#doc#_pending``          arrival#random      ``exp`` (N), ``recs`` (B zlib)
  ``{workspace}#tampering_ack``         tampering id        as a doc (``OWN_PARTITIONS``)
  ====================================  ==================  ==============================

The hourly aggregates (``claros.aggregates``) are written in the append's transaction,
conditional on the revision read (the chain's own conditions already serialize appends),
under a ``#doc#`` key, which the roles that append may write. The verified-through state
(``claros.evidence.verified``) is written by the signer role only, as checkpoints are: a
role that serves requests cannot claim the chain verified.

The chain head is the ledger's last entry (a descending Query, one item): there is no head
item to move, so a role that may append cannot point the chain anywhere else. Checkpoints
and public keys live under partition keys the request-serving roles may not write (IAM
``dynamodb:LeadingKeys`` in ``template.yaml``: they write ``*#doc#*`` items only).

``append`` / ``append_many`` is one ``TransactWriteItems``: the entries
(``attribute_not_exists(seq)``: the next seq is taken once), their records
(``attribute_not_exists(rid)``) and the caller's ``DocWrite``s (each with its revision
condition; the new revision is computed by the update expression). When another writer took
the seq in between, the transaction is cancelled and retried after a jittered exponential
backoff, from a fresh (consistent) read of the head; after ``max_attempts`` the caller gets
``ChainBusyError``. A failed record or doc condition is a ``ConflictError`` and is not
retried. An append without doc writes that lost a race queues a pending item
(claros.store.dynamo_pending) before it retries, and every append carries the queue's
oldest items in its transaction, so appends of different processes share transactions.
``write_docs`` is one transaction too (at most 100 writes; one per doc).

All reads are strongly consistent, as SQLite's are.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from claros import jsonutil
from claros.aggregates import SPANS, fold
from claros.ledger import NEVER_PRUNED, PRUNE_KIND, ZERO_HASH, Checkpoint, Entry, PublicKey
from claros.store.base import (
    ChainBusyError,
    CheckCounts,
    CheckPage,
    CheckQuery,
    ConflictError,
    Doc,
    DocWrite,
    KeptRecord,
    KeyTooLongError,
    NewRecord,
    PruneError,
    PruneResult,
    RecordTooLargeError,
    StorageUnavailableError,
    StoreError,
    ascii_lower,
    check_batch,
    check_key_range,
    docs_asked,
    record_bytes,
    search_text,
)
from claros.store.dynamo_pending import (
    MAX_PENDING_ITEM_BYTES,
    decode_pending,
    encode_pending,
    new_pending_key,
    pending_pk,
)
from claros.store.group import GroupCommit

if TYPE_CHECKING:  # boto3 is a server-side dependency; the client is injected
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

__all__ = [
    "MAX_RECORD_ITEM_BYTES",
    "MAX_TRANSACT_ACTIONS",
    "RECORD_SPREAD",
    "DynamoStore",
    "record_key",
]

# A DynamoDB item holds at most 400 KB; records stay below this to leave headroom.
MAX_RECORD_ITEM_BYTES = 350_000
# A doc is one item too (its key, its JSON body as text, its revision): one past the
# item limit (400 KB, its attributes' names and values; kept under it with a margin) is
# refused before the transaction (RecordTooLargeError, a 413 with the reason), never sent
# to be a ValidationException (a 503 "storage is unavailable" for a request that cannot
# succeed).
MAX_DOC_ITEM_BYTES = 400_000
# TransactWriteItems takes at most 100 actions. An append of n records uses 2n of them
# plus one per doc write; ``check_batch`` keeps that within the limit.
MAX_TRANSACT_ACTIONS = 100
# BatchGetItem takes 100 keys, BatchWriteItem 25 requests.
_BATCH_GET = 100
_BATCH_WRITE = 25

# Cancellation codes (and error codes) that mean "try again": the item was busy or the
# table throttled us. ConditionalCheckFailed on the head/entry also means a retry.
_RETRY_REASONS = frozenset(
    {
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
    }
)
_RETRY_ERRORS = frozenset(
    {
        "TransactionConflictException",
        "TransactionInProgressException",
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "InternalServerError",
    }
)

Item = dict[str, Any]  # a low-level DynamoDB item: {"attr": {"S": "..."}}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _entry(item: Item) -> Entry:
    return Entry(
        item["workspace"]["S"],
        int(item["seq"]["N"]),
        item["kind"]["S"],
        item["ref_id"]["S"],
        int(item["ts"]["N"]),
        item["payload_sha256"]["S"],
        item["prev_hash"]["S"],
        item["hash"]["S"],
    )


# Records of one workspace spread over this many partition keys, so a busy workspace's
# check rows do not all land on one partition (1,000 WCU/s each). Changing it moves
# where records are looked for: never change it on a deployed stack.
RECORD_SPREAD = 16
# Kinds read back by a Query on their kind (kept_records, a prune's through_seq): they stay
# under the workspace's own key, where those Queries look. They are few.
_UNSPREAD = NEVER_PRUNED | {PRUNE_KIND}


def record_key(workspace: str, kind: str, ref_id: str) -> Item:
    """The records table key of a record: partition ``{workspace}#{nn}`` (nn from the
    record's id; a workspace name holds no ``#``), or the workspace itself for the kinds
    in ``_UNSPREAD``. Records written before the spread sit under the workspace itself;
    the reads look there when the spread key holds nothing."""
    rid = f"{kind}#{ref_id}"
    if kind in _UNSPREAD:
        return {"workspace": _s(workspace), "rid": _s(rid)}
    part = zlib.crc32(rid.encode()) % RECORD_SPREAD
    return {"workspace": _s(f"{workspace}#{part:02d}"), "rid": _s(rid)}


def _legacy_key(workspace: str, rid: str) -> Item:
    return {"workspace": _s(workspace), "rid": _s(rid)}


def _just_below(rid: str) -> str:
    """The greatest string a key below ``rid`` can be, for an inclusive upper bound:
    the last character one less, then U+FFFF (above every character of an id)."""
    return rid[:-1] + chr(ord(rid[-1]) - 1) + "\uffff"


def _check_partitions(workspace: str) -> list[str]:
    """Every partition key that may hold a check record of ``workspace``: its spread keys
    and, for records written before the spread, the workspace itself."""
    return [workspace, *(f"{workspace}#{n:02d}" for n in range(RECORD_SPREAD))]


def _checkpoint(item: Item) -> Checkpoint:
    return Checkpoint(
        item["workspace"]["S"],
        int(item["seq"]["N"]),
        item["hash"]["S"],
        int(item["ts"]["N"]),
        item["key_id"]["S"],
        item["signature"]["S"],
    )


# A record's canonical JSON is read whole up to this. The store writes records of at most a
# 400 KB item, from requests of at most 1 MB; a role that may put records could put one that
# inflates ~1,000 times (~400 MB), and reading it whole killed the checkpoint function (512
# MB): the schedule then signed no workspace at all
# (tests/security/aws/test_compressed_record_bomb_stops_every_signature.py).
RECORD_MAX_BYTES = 8 * 1024 * 1024


class RecordTooLarge(ValueError):
    """A records item that inflates past RECORD_MAX_BYTES: none the store wrote."""


def _inflate_record(packed: bytes) -> bytes:
    inflate = zlib.decompressobj()
    raw = inflate.decompress(packed, RECORD_MAX_BYTES)
    if inflate.unconsumed_tail:
        raise RecordTooLarge(f"a record inflates past {RECORD_MAX_BYTES} bytes")
    if not inflate.eof:
        raise zlib.error("incomplete or truncated stream")
    return raw


def _record_body(item: Item) -> dict[str, Any]:
    return jsonutil.loads(_inflate_record(item["body"]["B"]))  # type: ignore[no-any-return]


def _aggregate_body(item: Item, workspace: str) -> dict[str, Any]:
    """An aggregate row's bucket, inflated at most RECORD_MAX_BYTES. Every role that appends
    may put these rows (``#doc#_aggregates``); one that does not read (past the cap, not
    zlib, not a JSON object) is a StorageUnavailableError naming it and the rebuild that
    replaces it, never a 500 or a function killed for memory
    (tests/security/aws/test_compressed_aggregate_bomb_stops_a_workspaces_checks.py)."""
    try:
        bucket = jsonutil.loads(_inflate_record(item["body"]["B"]))
    except (KeyError, TypeError, ValueError, zlib.error) as exc:
        bucket = exc
    if isinstance(bucket, dict):
        return bucket
    why = str(bucket) if isinstance(bucket, Exception) else "not a JSON object"
    raise StorageUnavailableError(
        f"the aggregate {item.get('sk', {}).get('S', '?')} of workspace {workspace} does not "
        f"read ({why}); rebuild it: python -m claros.aggregates rebuild --stack <stack> "
        f"--workspace {workspace}"
    )


def _prune_says(item: Item) -> object:
    """The ``through_seq`` a ``prune#...`` records item names, or None when it does not
    read as a prune's record: every role that appends may put one (an item that is not
    zlib made every prune a 500; tests/security/aws/test_poisoned_items_blind_the_tamper_watch.py).
    """
    try:
        body = _record_body(item)
    except (KeyError, TypeError, ValueError, zlib.error):
        return None
    return body.get("through_seq") if isinstance(body, dict) else None


# Doc collections kept outside ``#doc#``, so that the roles that append (which write
# ``*#doc#*`` items only: template.yaml) cannot write them: an admin's acknowledgement of
# tampering (claros.tamper.ACKS), written by the admin function's role alone.
OWN_PARTITIONS = frozenset({"tampering_ack"})


def _doc_pk(workspace: str, collection: str) -> str:
    if collection in OWN_PARTITIONS:
        return f"{workspace}#{collection}"
    return f"{workspace}#doc#{collection}"


def _doc_key(workspace: str, collection: str, key: str) -> Item:
    return {"pk": _s(_doc_pk(workspace, collection)), "sk": _s(key)}


# DynamoDB's key limits, in UTF-8 bytes: a partition key holds at most 2,048, a sort key
# 1,024. It refuses a longer one on every call that names it, reads too, with a
# ValidationException, which would be answered 503 "storage is unavailable" for what is
# bad input (an id in a request's path too long to be one). No item has such a key, so a
# read of one finds nothing without asking; a write of one is a KeyTooLongError (400).
_RANGE_KEYS = frozenset({"sk", "rid"})
_HASH_KEY_MAX_BYTES = 2048
_RANGE_KEY_MAX_BYTES = 1024


def _key_fits(key: Item) -> bool:
    """Whether DynamoDB takes ``key`` (an item's key, its string parts within the limits)."""
    for name, value in key.items():
        text = value.get("S")
        if text is None:
            continue
        limit = _RANGE_KEY_MAX_BYTES if name in _RANGE_KEYS else _HASH_KEY_MAX_BYTES
        if len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit:
            return False
    return True


def _doc_fits(write: DocWrite, body: str) -> None:
    """RecordTooLargeError when the doc ``write`` puts, its body ``body``, passes what one
    item keeps (``MAX_DOC_ITEM_BYTES``)."""
    pk = _doc_pk(write.workspace, write.collection)
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in (pk, write.key, body)) + 64
    if size > MAX_DOC_ITEM_BYTES:
        raise RecordTooLargeError(
            f"{write.collection} {write.key!r} is {size:,} bytes as stored; DynamoDB keeps at "
            f"most {MAX_DOC_ITEM_BYTES:,} per doc"
        )


def _doc(collection: str, key: str, item: Item) -> Doc:
    return Doc(collection, key, jsonutil.loads(item["body"]["S"]), int(item["rev"]["N"]))


def _expected(expect_rev: int) -> str:
    return "absent" if expect_rev == 0 else f"revision {expect_rev}"


def _doc_conflict(write: DocWrite, current: Item | None) -> ConflictError:
    rev = int(current["rev"]["N"]) if current and "rev" in current else 0
    state = f"at revision {rev}" if rev else "absent"
    expected = _expected(write.expect_rev or 0)
    return ConflictError(
        f"{write.collection}/{write.key} is {state}, expected {expected}",
        collection=write.collection,
        key=write.key,
    )


def _limit(limit: int | None) -> int | None:
    """SQLite's LIMIT: None or a negative number means no limit."""
    return None if limit is None or limit < 0 else limit


# A transaction carries at most 4 MB; the group stops below that, with room for the
# attribute names and the entries (the records are counted compressed, as sent).
_MAX_TRANSACT_BYTES = 3_500_000
_ENTRY_BYTES = 400  # an entry item and a record's keys, generously
# Pending items read before a transaction: more than fit in one.
_PENDING_READ = 60
# A queued append gives up this long before its pending item expires, and one that
# cannot reach the queue waits this much past the expiry for committers' clocks.
_GIVE_UP_MARGIN_MS = 2_000
_CLOCK_SKEW_MS = 1_000


@dataclass(slots=True, eq=False)
class _Append:
    """One caller's append waiting for a group transaction (claros.store.group), or an
    append of another process read from the workspace's pending items (``pending`` set:
    the sort key of its pending item, deleted in the transaction that carries it)."""

    workspace: str
    prepared: list[tuple[NewRecord, bytes, str]]
    writes: Sequence[DocWrite]
    doc_actions: list[dict[str, Any]]
    ts: int | None
    pending: str | None = None
    exp: int = 0  # ms: no committer carries the pending item after this

    @property
    def actions(self) -> int:
        return 2 * len(self.prepared) + len(self.doc_actions) + (1 if self.pending else 0)

    @property
    def size(self) -> int:
        records = sum(len(packed) + _ENTRY_BYTES for _, packed, _ in self.prepared)
        return records + sum(len(repr(a)) for a in self.doc_actions)

    @property
    def keys(self) -> set[tuple[str, ...]]:
        """The items it writes besides new entries: DynamoDB takes one action per item."""
        out: set[tuple[str, ...]] = {("r", new.kind, new.ref_id) for new, _, _ in self.prepared}
        out |= {("d", w.workspace, w.collection, w.key) for w in self.writes}
        return out


def _fits(batch: list[_Append], item: _Append) -> bool:
    """Whether ``item`` joins ``batch``'s transaction: within 100 actions (one is the link
    check, some the aggregates) and the size limit, and touching no item the batch
    touches."""
    group = [*batch, item]
    # One put per span and bucket: appends timed now fall in at most two hours (and two
    # days) of a group; one with its own ts may add a bucket per span.
    aggregates = len(SPANS) * (2 + sum(b.ts is not None for b in group))
    if 1 + sum(b.actions for b in group) + aggregates > MAX_TRANSACT_ACTIONS:
        return False
    if sum(b.size for b in batch) + item.size > _MAX_TRANSACT_BYTES:
        return False
    taken: set[tuple[str, ...]] = set()
    for b in batch:
        taken |= b.keys
    return not (taken & item.keys)


# Activity (issue 13): a check record's item also carries the fields a listing filters on,
# so the Query filters them server side (the body is compressed). Records written before
# these attributes existed list unfiltered but match no filter on them.
_CHECK_FIELDS = (
    ("c_app", "app"),
    ("c_tool", "tool"),
    ("c_agent", "agent"),
    ("c_person", "person"),
    ("c_result", "result"),
)
_CHECK_PAGE = 200  # check items a listing Query reads at a time


def _check_attributes(record: Mapping[str, Any]) -> Item:
    agent = record.get("agent")
    values = {
        "app": record.get("app"),
        "tool": record.get("tool"),
        "agent": agent.get("name") if isinstance(agent, Mapping) else None,
        "person": record.get("on_behalf_of"),
        "result": record.get("result"),
    }
    out: Item = {}
    for attr, field in _CHECK_FIELDS:
        value = values[field]
        if isinstance(value, str) and value:
            out[attr] = _s(value)
    ts = record.get("ts")
    if isinstance(ts, int):
        out["c_ts"] = _n(ts)
    rules = {
        str(r["id"]) for r in record.get("rules") or [] if isinstance(r, Mapping) and r.get("id")
    }
    if rules:
        out["c_rules"] = {"SS": sorted(rules)}
    text = search_text(record)
    if text:
        out["c_args"] = _s(text)
    return out


def _check_filter(query: CheckQuery) -> tuple[list[str], dict[str, str], Item]:
    """``claros.store.base.check_matches`` as a FilterExpression, all but the outcome
    (its own record: checked after the read)."""
    conds: list[str] = []
    names: dict[str, str] = {}
    values: Item = {}
    wanted = {"app": query.app, "tool": query.tool, "agent": query.agent,
              "person": query.person, "result": query.result}  # fmt: skip
    for attr, field in _CHECK_FIELDS:
        value = wanted[field]
        if value is not None:
            conds.append(f"#{attr} = :{attr}")
            names[f"#{attr}"] = attr
            values[f":{attr}"] = _s(value)
    if query.since is not None:
        conds.append("#c_ts >= :since")
        names["#c_ts"] = "c_ts"
        values[":since"] = _n(query.since)
    if query.until is not None:
        conds.append("#c_ts < :until")
        names["#c_ts"] = "c_ts"
        values[":until"] = _n(query.until)
    if query.rule_id is not None:
        conds.append("contains(#c_rules, :rule)")
        names["#c_rules"] = "c_rules"
        values[":rule"] = _s(query.rule_id)
    if query.text is not None:
        conds.append("contains(#c_args, :text)")
        names["#c_args"] = "c_args"
        values[":text"] = _s(ascii_lower(query.text))
    return conds, names, values


class DynamoStore:
    """A Store on three DynamoDB tables, through an injected boto3 DynamoDB client."""

    def __init__(
        self,
        client: DynamoDBClient,
        ledger_table: str,
        records_table: str,
        state_table: str,
        *,
        max_attempts: int = 20,
        base_delay_s: float = 0.01,
        max_delay_s: float = 0.5,
        page_size: int = 100,
        sleep: Callable[[float], None] = time.sleep,
        group_commit: bool = True,
        group_wait_s: float = 20.0,
        pending_appends: bool = True,
        pending_ttl_s: float = 20.0,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 1 <= page_size <= _BATCH_GET:
            raise ValueError(f"page_size must be between 1 and {_BATCH_GET}")
        self.client = client
        self.ledger_table = ledger_table
        self.records_table = records_table
        self.state_table = state_table
        self.max_attempts = max_attempts
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.page_size = page_size
        self._sleep = sleep
        # Called once for every append retried because another writer moved the head
        # (the Lambda entry point counts them as a metric).
        self.on_retry: Callable[[], None] = lambda: None
        # The last entry this process appended, per workspace: where the next append
        # starts looking for the head. Only a hint: every append checks in its own
        # transaction that the entry it links to is still there with that hash.
        self._heads: dict[str, Entry] = {}
        # Appends of one workspace made by this process's threads share transactions
        # (claros.store.group). False: every append races for the head on its own, as
        # before group commit (bench/append_dynamo.py measures both).
        self.group_commit = group_commit
        # Appends of one workspace made by different processes share transactions through
        # the workspace's pending items (claros.store.dynamo_pending). False: an append
        # that loses a race only retries, as before (bench/append_dynamo.py compares).
        self.pending_appends = pending_appends
        # How long a pending item may be carried: its writer gives up before that.
        self.pending_ttl_s = pending_ttl_s
        self._group: GroupCommit[_Append, list[Entry]] = GroupCommit(
            self._commit_group,
            _fits,
            busy=lambda: ChainBusyError(
                f"appends waited over {group_wait_s:g}s for the ledger; nothing was written"
            ),
            wait_s=group_wait_s,
        )

    def close(self) -> None:
        """Nothing to release: the client belongs to the caller."""

    def _backoff(self, attempt: int) -> None:
        """Sleep between cap/4 and cap, cap = base * 2**attempt (at most max_delay_s).

        The jitter spreads writers that collided; the floor keeps a loser from coming back
        at once into the same race. With the defaults, 8 writers hammering one workspace
        in the tests need at most ~9 attempts; 20 leave a wide margin (the sleeps then add
        up to a few seconds, well inside a Lambda's timeout)."""
        cap = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        self._sleep(random.uniform(cap / 4, cap))

    # --- the ledger -------------------------------------------------------------------
    def append(
        self,
        workspace: str,
        kind: str,
        ref_id: str,
        record: Mapping[str, Any],
        *,
        writes: Sequence[DocWrite] = (),
        ts: int | None = None,
    ) -> Entry:
        return self.append_many(workspace, [NewRecord(kind, ref_id, record)], writes=writes, ts=ts)[
            0
        ]

    def append_many(
        self,
        workspace: str,
        records: Sequence[NewRecord],
        *,
        writes: Sequence[DocWrite] = (),
        ts: int | None = None,
    ) -> list[Entry]:
        check_batch(records, writes)
        prepared = [self._prepare(workspace, new) for new in records]
        seen: set[tuple[str, str]] = set()
        for new in records:
            if (new.kind, new.ref_id) in seen:  # SQLite's primary key says the same
                raise ConflictError(
                    f"a {new.kind} record {new.ref_id!r} is in the batch twice",
                    collection=new.kind,
                    key=new.ref_id,
                )
            seen.add((new.kind, new.ref_id))
        doc_actions = self._doc_actions(writes)
        if not self.group_commit:
            return self._append_racing(workspace, prepared, writes, doc_actions, ts)
        return self._group.submit(workspace, _Append(workspace, prepared, writes, doc_actions, ts))

    def _append_racing(
        self,
        workspace: str,
        prepared: list[tuple[NewRecord, bytes, str]],
        writes: Sequence[DocWrite],
        doc_actions: list[dict[str, Any]],
        ts: int | None,
    ) -> list[Entry]:
        """The append before group commit: one transaction per append, racing the other
        writers for the head (kept for ``group_commit=False`` and the bench's baseline)."""
        parsed = [jsonutil.loads(zlib.decompress(p[1])) for p in prepared]
        known = self._heads.get(workspace)
        head = self._forward(known) if known else self.head(workspace)
        for attempt in range(self.max_attempts):
            head_seq = head.seq if head else 0
            prev = head.hash if head else ZERO_HASH
            when = ts if ts is not None else _now_ms()
            entries: list[Entry] = []
            for i, (new, _packed, payload) in enumerate(prepared):
                entry = Entry.build(
                    workspace,
                    head_seq + 1 + i,
                    new.kind,
                    new.ref_id,
                    when,
                    new.record,
                    prev,
                    payload=payload,
                )
                entries.append(entry)
                prev = entry.hash
            folded = list(zip(entries, parsed, strict=True))
            # Layout (the cancellation reasons follow it): the check that the entry the
            # new ones link to is still there as read (none on an empty chain), n entries,
            # n records, then the doc writes.
            link = [self._link_check(head)] if head else []
            actions = [
                *link,
                *(self._ledger_put(e) for e in entries),
                *(
                    self._record_put(e, p[1], p[0].record)
                    for e, p in zip(entries, prepared, strict=True)
                ),
                *doc_actions,
                *self._aggregate_puts(
                    workspace, {(span, when // size): folded for span, size in SPANS.items()}
                ),
            ]
            try:
                self.client.transact_write_items(
                    TransactItems=cast("list[TransactWriteItemTypeDef]", actions)
                )
            except ClientError as exc:
                stale = self._append_failed(exc, entries, writes, offset=len(link))
            else:
                self._heads[workspace] = entries[-1]
                return entries
            if attempt + 1 == self.max_attempts:
                break
            self.on_retry()
            self._backoff(attempt)
            head = self._after_race(workspace, head, stale)
        raise ChainBusyError(
            f"the chain head of {workspace!r} kept moving; gave up after "
            f"{self.max_attempts} attempts"
        )

    def _commit_group(
        self, batch: list[_Append], *, carry: bool = True
    ) -> list[list[Entry] | BaseException]:
        """One transaction for a run of appends of one workspace (claros.store.group): the
        link check, then per append its entries, its records and its doc writes, then as
        many of the workspace's pending appends (other processes', oldest first) as fit,
        each with the delete of its pending item. An append whose own condition fails
        (its record exists, a doc is at another revision) gets its ConflictError and the
        others go again at once. A head that moved (another process appended) is a retry
        after a backoff, within ``max_attempts``; an append without doc writes that lost
        a race first puts its own pending item, so that whichever process takes the head
        next writes it; then ChainBusyError for each (a pending item is taken back first:
        if it is already gone, a committer wrote it, and the answer is its entries)."""
        workspace = batch[0].workspace
        answers: list[list[Entry] | BaseException | None] = [None] * len(batch)
        known = self._heads.get(workspace)
        head = self._forward(known) if known else self.head(workspace)
        carry = carry and self.pending_appends
        attempt = 0
        while live := [i for i, a in enumerate(answers) if a is None]:
            queue = self._answer_gone(batch, live, answers) if carry else []
            live = [i for i in live if answers[i] is None]
            if not live:
                break
            group = self._carried(workspace, [batch[i] for i in live], queue)
            outcome, stale = self._attempt(head, group, batch, live, answers)
            if outcome == "written":
                head = self._heads[workspace]  # ours: the pending ones left go at once
                continue
            if outcome == "culprits":
                head = self._after_race(workspace, head, stale)
                continue
            live = [i for i in live if answers[i] is None]
            attempt += 1
            if attempt == self.max_attempts or self._past_deadline(batch, live):
                self._give_up(workspace, batch, live, answers)
                break
            if carry:
                for i in live:
                    self._enqueue(batch[i])
            if outcome == "lost":
                for _ in live:
                    self.on_retry()
            self._backoff(attempt - 1)
            head = self._after_race(workspace, head, stale)
        return [a if a is not None else StoreError("append not answered") for a in answers]

    def _attempt(
        self,
        head: Entry | None,
        group: list[_Append],
        batch: list[_Append],
        live: list[int],
        answers: list[list[Entry] | BaseException | None],
    ) -> tuple[str, bool]:
        """One transaction of ``group``; this process's appends (``batch[live]``) get
        their answers in ``answers`` when they have one. What happened: "written",
        "culprits" (some failed on their own condition: the rest go again at once),
        "lost" (a race, after which the append retries), "refused" (DynamoDB refused the
        group whole: this process's direct appends went one by one); and whether the
        entry the transaction linked to has changed."""
        mine = {id(batch[i]): i for i in live}
        actions, built, offsets = self._group_actions(head, group)
        try:
            self.client.transact_write_items(
                TransactItems=cast("list[TransactWriteItemTypeDef]", actions)
            )
        except ClientError as exc:
            if _code(exc) == "ValidationException" and len(group) > 1:
                # Refused as a whole (too large, say): each of this process's direct
                # appends on its own, so the one at fault gets the error and the others
                # are written (queued ones wait for the next committer).
                for i in live:
                    if batch[i].pending is None:
                        answers[i] = self._commit_group([batch[i]], carry=False)[0]
                return "refused", True
            failed = self._group_failed(exc, group, built, offsets)
            if isinstance(failed, Exception):  # every append of the batch shares it
                for i in live:
                    answers[i] = self._settle(batch[i], failed)
                return "failed", False
        else:
            for pos, item in enumerate(group):
                if id(item) in mine:
                    answers[mine[id(item)]] = built[pos]
            self._heads[group[0].workspace] = built[len(group) - 1][-1]
            return "written", False
        stale, culprits = failed
        for pos, error in culprits.items():
            self._blame(group[pos], error, mine, answers)
        return ("culprits" if culprits else "lost"), stale

    def _blame(
        self,
        item: _Append,
        error: BaseException,
        mine: dict[int, int],
        answers: list[list[Entry] | BaseException | None],
    ) -> None:
        """An append whose own condition failed: a queued one leaves the queue (its
        writer, maybe this process, learns why from the record that is there:
        ``_resolve``); a direct one of this process gets ``error``."""
        if item.pending is not None:
            self._drop_pending(item.workspace, item.pending)
        elif id(item) in mine:
            answers[mine[id(item)]] = error

    def _answer_gone(
        self,
        batch: list[_Append],
        live: list[int],
        answers: list[list[Entry] | BaseException | None],
    ) -> list[Item]:
        """The workspace's queue; this process's queued appends that left it (a committer
        wrote them, or dropped them) get their answer from the ledger."""
        queue, gone = self._pending_queue(batch[0].workspace, [batch[i] for i in live])
        for i in live:
            if batch[i] in gone:
                answers[i] = self._resolve(batch[i])
        return queue

    # --- pending appends (claros.store.dynamo_pending) ---------------------------------
    def _pending_key(self, workspace: str, sk: str) -> Item:
        return {"pk": _s(pending_pk(workspace)), "sk": _s(sk)}

    def _enqueue(self, item: _Append) -> None:
        """Put ``item``'s pending item, once: appends with doc writes (conditions of
        their own, whose failure another process could not report) stay direct, and so
        does one too large for an item, or when the put is refused."""
        if item.pending is not None or item.writes:
            return
        raws = [(new.kind, new.ref_id, zlib.decompress(p)) for new, p, _ in item.prepared]
        body = encode_pending(raws)
        if len(body) > MAX_PENDING_ITEM_BYTES:
            return
        now = _now_ms()
        sk = new_pending_key(now)
        exp = now + int(self.pending_ttl_s * 1000)
        put: Item = {**self._pending_key(item.workspace, sk), "exp": _n(exp), "recs": {"B": body}}
        if item.ts is not None:
            put["ts"] = _n(item.ts)
        try:
            self.client.put_item(
                TableName=self.state_table,
                Item=put,
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError:
            return  # stays a direct append; nothing of it is queued
        item.pending, item.exp = sk, exp

    def _pending_queue(self, workspace: str, own: list[_Append]) -> tuple[list[Item], set[_Append]]:
        """The workspace's pending items, oldest first (expired ones removed), and which of
        ``own``'s pending items are gone: a committer wrote them (or dropped them)."""
        try:
            got = self.client.query(
                TableName=self.state_table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": _s(pending_pk(workspace))},
                ConsistentRead=True,
                Limit=_PENDING_READ,
            )
        except ClientError as exc:
            if _code(exc) != "AccessDeniedException":
                raise
            self.pending_appends = False  # a role without the queue: direct appends only
            return [], set()
        now = _now_ms()
        queue: list[Item] = []
        for it in got.get("Items", []):
            if int(it.get("exp", {}).get("N", "0")) <= now:
                self._drop_pending(workspace, it["sk"]["S"])  # its writer gave up by now
            else:
                queue.append(it)
        there = {it["sk"]["S"] for it in queue}
        truncated = "LastEvaluatedKey" in got
        gone = {
            a
            for a in own
            if a.pending is not None
            and a.pending not in there
            and (not truncated or not self._pending_exists(workspace, a.pending))
        }
        return queue, gone

    def _pending_exists(self, workspace: str, sk: str) -> bool:
        got = self.client.get_item(
            TableName=self.state_table,
            Key=self._pending_key(workspace, sk),
            ConsistentRead=True,
            ProjectionExpression="sk",
        )
        return "Item" in got

    def _carried(self, workspace: str, live: list[_Append], queue: list[Item]) -> list[_Append]:
        """The transaction's appends: this process's that are not queued, then the queue
        in arrival order (this process's own pending ones among them) as far as they fit."""
        group = [a for a in live if a.pending is None]
        own = {a.pending: a for a in live if a.pending is not None}
        for it in queue:
            sk = it["sk"]["S"]
            item = own.get(sk) or self._foreign(workspace, it)
            if item is None:
                self._drop_pending(workspace, sk)  # not an append Claros queued
                continue
            if not group or _fits(group, item):
                group.append(item)
            elif 1 + sum(b.actions for b in group) >= MAX_TRANSACT_ACTIONS - 2 * len(SPANS):
                break  # full: the rest wait for the next transaction
        if not group:  # only this process's pending appends, beyond the page read
            group = [next(iter(own.values()))]
        return group

    def _foreign(self, workspace: str, it: Item) -> _Append | None:
        decoded = decode_pending(it)
        if decoded is None:
            return None
        records, ts = decoded
        try:
            check_batch(records, ())
            prepared = [self._prepare(workspace, new) for new in records]
        except StoreError:
            return None
        if len({(n.kind, n.ref_id) for n in records}) != len(records):
            return None
        return _Append(
            workspace, prepared, (), [], ts, pending=it["sk"]["S"], exp=int(it["exp"]["N"])
        )

    def _drop_pending(self, workspace: str, sk: str) -> bool:
        """Delete a pending item if it is still there: True if this call removed it."""
        try:
            self.client.delete_item(
                TableName=self.state_table,
                Key=self._pending_key(workspace, sk),
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _pending_delete(self, item: _Append, now: int) -> dict[str, Any]:
        """The transaction's delete of a carried append's pending item: only while it is
        there (its writer has not taken it back, no other committer wrote it) and not
        expired (its writer may have stopped waiting)."""
        assert item.pending is not None
        return {
            "Delete": {
                "TableName": self.state_table,
                "Key": self._pending_key(item.workspace, item.pending),
                "ConditionExpression": "attribute_exists(#pk) AND #exp > :now",
                "ExpressionAttributeNames": {"#pk": "pk", "#exp": "exp"},
                "ExpressionAttributeValues": {":now": _n(now)},
            }
        }

    def _past_deadline(self, batch: list[_Append], live: list[int]) -> bool:
        """A queued append gives up before its pending item expires, so that its own
        answer, not the expiry, decides what became of it."""
        now = _now_ms()
        return any(batch[i].pending and now > batch[i].exp - _GIVE_UP_MARGIN_MS for i in live)

    def _give_up(
        self,
        workspace: str,
        batch: list[_Append],
        live: list[int],
        answers: list[list[Entry] | BaseException | None],
    ) -> None:
        busy = ChainBusyError(
            f"the chain head of {workspace!r} kept moving; gave up after "
            f"{self.max_attempts} attempts"
        )
        for i in live:
            answers[i] = self._settle(batch[i], busy)

    def _settle(self, item: _Append, error: BaseException) -> list[Entry] | BaseException:
        """``error`` for an append that gives up, once nothing of it can be written any
        more: a pending item is deleted first; if it is gone already, a committer took
        it, and the answer is what the ledger holds of it."""
        if item.pending is None:
            return error
        try:
            if self._drop_pending(item.workspace, item.pending):
                return error
        except ClientError:
            # The queue is out of reach: wait out the item's expiry (after it no committer
            # carries it), then the records say what became of it.
            self._sleep(max(0.0, (item.exp - _now_ms() + _CLOCK_SKEW_MS) / 1000))
        return self._resolve(item)

    def _resolve(self, item: _Append) -> list[Entry] | BaseException:
        """What became of an append whose pending item is gone: its entries, if its
        records are there with its pending key; a ConflictError if another append's
        record holds its id; else nothing of it was written (ChainBusyError)."""
        entries: list[Entry] = []
        for new, _packed, _payload in item.prepared:
            got = self.client.get_item(
                TableName=self.records_table,
                Key=record_key(item.workspace, new.kind, new.ref_id),
                ConsistentRead=True,
                ProjectionExpression="seq, pend",
            ).get("Item")
            if got is None:
                return ChainBusyError(
                    f"the append to {item.workspace!r} left the queue unwritten; "
                    "nothing was written"
                )
            if got.get("pend", {}).get("S") != item.pending:
                return ConflictError(
                    f"a {new.kind} record {new.ref_id!r} exists already",
                    collection=new.kind,
                    key=new.ref_id,
                )
            entry = self.client.get_item(
                TableName=self.ledger_table,
                Key={"workspace": _s(item.workspace), "seq": got["seq"]},
                ConsistentRead=True,
            ).get("Item")
            if entry is None:  # pragma: no cover - the record and entry commit together
                return StoreError(f"record {new.kind}#{new.ref_id} has no entry")
            entries.append(_entry(entry))
        if entries:
            known = self._heads.get(item.workspace)
            if known is None or entries[-1].seq > known.seq:
                self._heads[item.workspace] = entries[-1]
        return entries

    def _after_race(self, workspace: str, head: Entry | None, stale: bool) -> Entry | None:
        """Where the chain's head is after an append lost a race: from the newest this process
        knows (``_forward``); if the entry it linked to is gone (pruned), the head as a
        Query finds it."""
        known = self._heads.get(workspace)
        if known is not None and (head is None or known.seq > head.seq):
            head = known
        return self.head(workspace) if stale or head is None else self._forward(head)

    def _group_actions(
        self, head: Entry | None, group: list[_Append]
    ) -> tuple[list[dict[str, Any]], dict[int, list[Entry]], dict[int, int]]:
        """The group's transaction after ``head``: the actions, each append's entries and
        where its actions start, by position in ``group`` (the cancellation reasons follow
        this layout: entries, records, doc writes, the pending item's delete)."""
        actions: list[dict[str, Any]] = [self._link_check(head)] if head else []
        built: dict[int, list[Entry]] = {}
        offsets: dict[int, int] = {}
        seq, prev = (head.seq, head.hash) if head else (0, ZERO_HASH)
        folds: dict[tuple[str, int], list[tuple[Entry, Any]]] = {}
        now = _now_ms()
        for pos, item in enumerate(group):
            when = item.ts if item.ts is not None else now
            entries = []
            for new, _packed, payload in item.prepared:
                seq += 1
                entry = Entry.build(
                    item.workspace, seq, new.kind, new.ref_id, when, new.record, prev,
                    payload=payload,
                )  # fmt: skip
                entries.append(entry)
                prev = entry.hash
            built[pos], offsets[pos] = entries, len(actions)
            actions += [self._ledger_put(e) for e in entries]
            actions += [
                self._record_put(e, p[1], p[0].record, pend=item.pending)
                for e, p in zip(entries, item.prepared, strict=True)
            ]
            actions += item.doc_actions
            if item.pending is not None:
                actions.append(self._pending_delete(item, now))
            for (_new, packed, _), entry in zip(item.prepared, entries, strict=True):
                for span, size in SPANS.items():
                    folds.setdefault((span, when // size), []).append(
                        (entry, jsonutil.loads(zlib.decompress(packed)))
                    )
        # Each hour's and day's aggregate once, with every append of the group folded in:
        # a transaction may name an item only once (at the end: offsets[-1]).
        offsets[-1] = len(actions)
        actions += self._aggregate_puts(group[0].workspace, folds)
        return actions, built, offsets

    def _group_failed(
        self,
        exc: ClientError,
        group: list[_Append],
        built: dict[int, list[Entry]],
        offsets: dict[int, int],
    ) -> tuple[bool, dict[int, BaseException]] | Exception:
        """Why a group's transaction failed: (the link check failed, the appends whose own
        condition failed with their errors, by position), or the error of the whole
        batch."""
        code = _code(exc)
        if code in _RETRY_ERRORS:
            return False, {}
        if code == "ValidationException":
            return StoreError(f"DynamoDB refused the append: {exc}")
        if code != "TransactionCanceledException":
            return exc
        every: list[Any] = list(exc.response.get("CancellationReasons", []))
        codes = [str(r.get("Code", "None")) for r in every]
        failed = {i for i, c in enumerate(codes) if c == "ConditionalCheckFailed"}
        has_link = offsets[0] == 1
        stale = has_link and 0 in failed
        # An aggregate at another revision: another process appended in between.
        moved = stale or any(i >= offsets[-1] for i in failed)
        culprits: dict[int, BaseException] = {}
        for pos, item in enumerate(group):
            entries, start = built[pos], offsets[pos]
            n = len(entries)
            if failed & set(range(start, start + n)):
                moved = True  # an entry's seq is taken: someone appended first
            if item.pending is not None and start + 2 * n + len(item.writes) in failed:
                moved = True  # its pending item is gone: written, or taken back
                continue
            for j, entry in enumerate(entries):
                if start + n + j in failed:
                    culprits[pos] = ConflictError(
                        f"a {entry.kind} record {entry.ref_id!r} exists already",
                        collection=entry.kind,
                        key=entry.ref_id,
                    )
                    break
            else:
                for j, write in enumerate(item.writes):
                    at = start + 2 * n + j
                    if at in failed:
                        culprits[pos] = _doc_conflict(write, every[at].get("Item"))
                        break
        if culprits or moved or any(c in _RETRY_REASONS for c in codes):
            return stale, culprits
        return StoreError(f"DynamoDB cancelled the append: {', '.join(codes)}")

    def _aggregate_key(self, workspace: str, span: str, start: int) -> Item:
        return {"pk": _s(f"{workspace}#doc#_aggregates"), "sk": _s(f"{span}#{start:012d}")}

    def _aggregate_puts(
        self,
        workspace: str,
        folds: Mapping[tuple[str, int], Sequence[tuple[Entry, Any]]],
    ) -> list[dict[str, Any]]:
        """Each hour's and day's aggregate (``folds``: by span and start, the entries to fold
        in with their records) with its batch folded in, put on condition that it is still at
        the revision read. The aggregates are read together, in one consistent
        BatchGetItem (one round trip in the append's critical section, not one per span),
        after the head: an append that commits in between moves the head, and ours is
        retried."""
        keys = {at: self._aggregate_key(workspace, *at) for at in folds}
        read = self._batch_items(list(keys.values()), None, self.state_table)
        found = {item["sk"]["S"]: item for item in read}  # one pk: the sk tells them apart
        puts: list[dict[str, Any]] = []
        for at, pairs in folds.items():
            key = keys[at]
            got = found.get(key["sk"]["S"])
            bucket: dict[str, Any] = _aggregate_body(got, workspace) if got else {}
            rev = int(got["rev"]["N"]) if got else 0
            for entry, record in pairs:
                fold(bucket, entry.seq, entry.kind, record)
            put: dict[str, Any] = {
                "TableName": self.state_table,
                "Item": {
                    **key,
                    "rev": _n(rev + 1),
                    "body": {"B": zlib.compress(jsonutil.dumpb(bucket))},
                },
            }
            if got:
                put["ConditionExpression"] = "#rev = :rev"
                put["ExpressionAttributeNames"] = {"#rev": "rev"}
                put["ExpressionAttributeValues"] = {":rev": _n(rev)}
            else:
                put["ConditionExpression"] = "attribute_not_exists(pk)"
            puts.append({"Put": put})
        return puts

    def aggregate_buckets(
        self, workspace: str, first: int, last: int, *, span: str = "hour"
    ) -> list[tuple[int, dict[str, Any]]]:
        if first >= last:
            return []
        request: dict[str, Any] = {
            "TableName": self.state_table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": _s(f"{workspace}#doc#_aggregates"),
                ":lo": _s(f"{span}#{first:012d}"),
                ":hi": _s(f"{span}#{last - 1:012d}"),
            },
        }
        return [
            (int(item["sk"]["S"].split("#")[1]), _aggregate_body(item, workspace))
            for item in self._query(request, None)
        ]

    def _verified_key(self, workspace: str) -> Item:
        return {"pk": _s(f"{workspace}#verified"), "sk": _s("state")}

    def verified_state(self, workspace: str) -> dict[str, Any] | None:
        got = self.client.get_item(
            TableName=self.state_table, Key=self._verified_key(workspace), ConsistentRead=True
        ).get("Item")
        return jsonutil.loads(got["body"]["S"]) if got else None

    def aggregate_version(
        self, workspace: str, span: str, start: int
    ) -> tuple[dict[str, Any] | None, str]:
        key = self._aggregate_key(workspace, span, start)
        got = self.client.get_item(TableName=self.state_table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        if not got:
            return None, "absent"
        version = str(int(got["rev"]["N"]))
        try:
            return _aggregate_body(got, workspace), version
        except StorageUnavailableError:
            return None, version  # the rebuild replaces a row that does not read

    def put_aggregate(
        self, workspace: str, span: str, start: int, bucket: Mapping[str, Any], *, expect: str
    ) -> bool:
        # The same revision counter the appends' conditional puts move (_aggregate_put).
        key = self._aggregate_key(workspace, span, start)
        rev = 0 if expect == "absent" else int(expect)
        put: dict[str, Any] = {
            "TableName": self.state_table,
            "Item": {
                **key,
                "rev": _n(rev + 1),
                "body": {"B": zlib.compress(jsonutil.dumpb(dict(bucket)))},
            },
        }
        return self._put_if(put, "rev", None if expect == "absent" else rev)

    def save_verified_state(
        self, workspace: str, state: Mapping[str, Any], *, expect_seq: int | None
    ) -> bool:
        put: dict[str, Any] = {
            "TableName": self.state_table,
            "Item": {
                **self._verified_key(workspace),
                "seq": _n(int(state["seq"])),
                "body": _s(jsonutil.dumps(dict(state))),
            },
        }
        return self._put_if(put, "seq", expect_seq)

    def _put_if(self, put: dict[str, Any], field: str, expected: int | None) -> bool:
        """``put`` if the stored item's ``field`` is still ``expected`` (None: no item yet);
        False, nothing written, when another writer moved it first."""
        if expected is None:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["ConditionExpression"] = "#f = :f"
            put["ExpressionAttributeNames"] = {"#f": field}
            put["ExpressionAttributeValues"] = {":f": _n(expected)}
        try:
            self.client.put_item(**put)
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _forward(self, head: Entry) -> Entry | None:
        """The chain's last entry, from the newest this process knows: one read of the entry
        after it (none there: it is still the head), else one Query for the last. A Lambda
        environment is as many entries behind as the others appended since its last append:
        reading forward item by item took one round trip per entry (up to 17)."""
        got = self.client.get_item(
            TableName=self.ledger_table,
            Key={"workspace": _s(head.workspace), "seq": _n(head.seq + 1)},
            ConsistentRead=True,
        )
        return head if "Item" not in got else self.head(head.workspace)

    def _link_check(self, head: Entry) -> dict[str, Any]:
        return {
            "ConditionCheck": {
                "TableName": self.ledger_table,
                "Key": {"workspace": _s(head.workspace), "seq": _n(head.seq)},
                "ConditionExpression": "#hash = :hash",
                "ExpressionAttributeNames": {"#hash": "hash"},
                "ExpressionAttributeValues": {":hash": _s(head.hash)},
            }
        }

    @staticmethod
    def _prepare(workspace: str, new: NewRecord) -> tuple[NewRecord, bytes, str]:
        """(record, its compressed canonical JSON, its sha256), or the error SQLite gives."""
        raw, payload = record_bytes(new.record)
        packed = zlib.compress(raw)
        rid = f"{new.kind}#{new.ref_id}"
        size = len(packed) + len(workspace.encode()) + len(rid.encode()) + 64
        if size > MAX_RECORD_ITEM_BYTES:
            raise RecordTooLargeError(
                f"record compresses to {size} bytes; DynamoDB keeps at most "
                f"{MAX_RECORD_ITEM_BYTES} per record"
            )
        return new, packed, payload

    def _append_failed(
        self, exc: ClientError, entries: list[Entry], writes: Sequence[DocWrite], *, offset: int
    ) -> bool:
        """Raise the domain error for a failed append, or return to retry it: True when
        the entry the append linked to is no longer there as read (``offset`` is 1 when
        the transaction starts with that check)."""
        code = _code(exc)
        if code in _RETRY_ERRORS:
            return False
        if code == "ValidationException":
            raise StoreError(f"DynamoDB refused the append: {exc}") from exc
        if code != "TransactionCanceledException":
            raise exc
        every: list[Any] = list(exc.response.get("CancellationReasons", []))
        reasons = every[offset:]
        codes = [str(r.get("Code", "None")) for r in reasons]
        # The link check failed: the entry the append linked to is gone or changed.
        stale = offset > 0 and bool(every) and every[0].get("Code") == "ConditionalCheckFailed"
        n = len(entries)
        failed = {i for i, c in enumerate(codes) if c == "ConditionalCheckFailed"}
        for i, entry in enumerate(entries):
            if n + i in failed:
                raise ConflictError(
                    f"a {entry.kind} record {entry.ref_id!r} exists already",
                    collection=entry.kind,
                    key=entry.ref_id,
                ) from exc
        for j, write in enumerate(writes):
            if 2 * n + j in failed:
                raise _doc_conflict(write, reasons[2 * n + j].get("Item")) from exc
        chain = set(range(n))  # an entry's seq is taken: someone appended first
        # The hour's or day's aggregate (the last actions) moved: another append got in.
        chain |= {2 * n + len(writes), 2 * n + len(writes) + 1}
        if stale or failed & chain or any(c in _RETRY_REASONS for c in codes):
            return stale
        raise StoreError(f"DynamoDB cancelled the append: {', '.join(codes)}") from exc

    def _ledger_put(self, entry: Entry) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.ledger_table,
                "Item": {
                    "workspace": _s(entry.workspace),
                    "seq": _n(entry.seq),
                    "kind": _s(entry.kind),
                    "ref_id": _s(entry.ref_id),
                    "ts": _n(entry.ts),
                    "payload_sha256": _s(entry.payload_sha256),
                    "prev_hash": _s(entry.prev_hash),
                    "hash": _s(entry.hash),
                },
                "ConditionExpression": "attribute_not_exists(#seq)",
                "ExpressionAttributeNames": {"#seq": "seq"},
            }
        }

    def _record_put(
        self,
        entry: Entry,
        packed: bytes,
        record: Mapping[str, Any],
        *,
        pend: str | None = None,
    ) -> dict[str, Any]:
        item: Item = {
            **record_key(entry.workspace, entry.kind, entry.ref_id),
            "seq": _n(entry.seq),
            "body": {"B": packed},
        }
        if pend is not None:  # carried from the queue: its writer finds it by this
            item["pend"] = _s(pend)
        if entry.kind == "check":
            item.update(_check_attributes(record))
        return {
            "Put": {
                "TableName": self.records_table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(rid)",
            }
        }

    def head(self, workspace: str) -> Entry | None:
        got = self.client.query(
            TableName=self.ledger_table,
            KeyConditionExpression="workspace = :w",
            ExpressionAttributeValues={":w": _s(workspace)},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = got.get("Items", [])
        return _entry(items[0]) if items else None

    def _query(self, request: dict[str, Any], limit: int | None) -> Iterator[Item]:
        """Items of one Query, page by page, at most ``limit`` of them."""
        remaining = _limit(limit)
        start: Item | None = None
        while remaining is None or remaining > 0:
            page_limit = self.page_size if remaining is None else min(remaining, self.page_size)
            args = dict(request, Limit=page_limit, ConsistentRead=True)
            if start is not None:
                args["ExclusiveStartKey"] = start
            got = self.client.query(**args)
            items: list[Item] = got.get("Items", [])
            yield from items
            if remaining is not None:
                remaining -= len(items)
            start = got.get("LastEvaluatedKey")
            if not start:
                return

    def _ledger_query(self, workspace: str, since: int, limit: int | None) -> Iterator[Item]:
        return self._query(
            {
                "TableName": self.ledger_table,
                "KeyConditionExpression": "workspace = :w AND #seq > :since",
                "ExpressionAttributeNames": {"#seq": "seq"},
                "ExpressionAttributeValues": {":w": _s(workspace), ":since": _n(since)},
            },
            limit,
        )

    def entries(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[Entry]:
        for item in self._ledger_query(workspace, since, limit):
            yield _entry(item)

    def entries_with_records(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[tuple[Entry, dict[str, Any] | None]]:
        page: list[Entry] = []
        for item in self._ledger_query(workspace, since, limit):
            page.append(_entry(item))
            if len(page) == self.page_size:
                yield from self._with_records(workspace, page)
                page = []
        if page:
            yield from self._with_records(workspace, page)

    def entries_with_raw_records(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> Iterator[tuple[Entry, bytes | None]]:
        page: list[Entry] = []
        for item in self._ledger_query(workspace, since, limit):
            page.append(_entry(item))
            if len(page) == self.page_size:
                yield from self._with_raw_records(workspace, page)
                page = []
        if page:
            yield from self._with_raw_records(workspace, page)

    def _with_raw_records(
        self, workspace: str, page: list[Entry]
    ) -> Iterator[tuple[Entry, bytes | None]]:
        found = self._batch_get_records(workspace, {f"{e.kind}#{e.ref_id}" for e in page})
        for e in page:
            item = found.get(f"{e.kind}#{e.ref_id}")
            raw = None
            if item is not None and int(item["seq"]["N"]) == e.seq:
                try:
                    raw = _inflate_record(item["body"]["B"])  # the canonical JSON, as hashed
                except RecordTooLarge:
                    pass  # no record the store wrote: verify finds the entry's record missing
            yield e, raw

    def _with_records(
        self, workspace: str, page: list[Entry]
    ) -> Iterator[tuple[Entry, dict[str, Any] | None]]:
        found = self._batch_get_records(workspace, {f"{e.kind}#{e.ref_id}" for e in page})
        for e in page:
            item = found.get(f"{e.kind}#{e.ref_id}")
            # As in SQLite's join: the record that entry wrote, not a later namesake.
            if item is not None and int(item["seq"]["N"]) == e.seq:
                yield e, _record_body(item)
            else:
                yield e, None

    def _batch_get_records(
        self, workspace: str, rids: set[str], projection: str | None = None
    ) -> dict[str, Item]:
        """The records of ``rids`` (``kind#ref_id``) by rid, each under its spread key, or
        (missing there) under the workspace's own key, where records written before the
        spread are."""
        keys = [record_key(workspace, *rid.split("#", 1)) for rid in sorted(rids)]
        out = self._batch_get(keys, projection)
        legacy = [
            _legacy_key(workspace, k["rid"]["S"])
            for k in keys
            if k["rid"]["S"] not in out and k["workspace"]["S"] != workspace
        ]
        if legacy:
            out.update(self._batch_get(legacy, projection))
        return out

    def _batch_get(self, keys: list[Item], projection: str | None) -> dict[str, Item]:
        """The records of ``keys``, consistently read (``_batch_items``), by their rid."""
        read = self._batch_items(keys, projection, self.records_table)
        return {item["rid"]["S"]: item for item in read}

    def _batch_items(self, keys: list[Item], projection: str | None, table: str) -> Iterator[Item]:
        """The items of ``keys`` in ``table`` that exist, in no order: BatchGetItem,
        consistent, 100 keys a request; keys DynamoDB left unprocessed are asked again
        after a backoff, within ``max_attempts``, then StoreError. A key DynamoDB would
        refuse (``_key_fits``) names no item and is not asked."""
        keys = [k for k in keys if _key_fits(k)]
        for i in range(0, len(keys), _BATCH_GET):
            request: dict[str, Any] = {"Keys": keys[i : i + _BATCH_GET], "ConsistentRead": True}
            if projection:
                request["ProjectionExpression"] = projection
            unprocessed: dict[str, Any] = {table: request}
            for attempt in range(self.max_attempts):
                got = self.client.batch_get_item(RequestItems=unprocessed)
                yield from got.get("Responses", {}).get(table, [])
                unprocessed = dict(got.get("UnprocessedKeys") or {})
                if not unprocessed:
                    break
                self._backoff(attempt)
            else:
                raise StoreError("DynamoDB kept reads unprocessed; try again later")

    def get_record(self, workspace: str, kind: str, ref_id: str) -> dict[str, Any] | None:
        item = self._record_item(workspace, kind, ref_id)
        return _record_body(item) if item else None

    def get_raw_record(self, workspace: str, kind: str, ref_id: str) -> bytes | None:
        item = self._record_item(workspace, kind, ref_id)
        return _inflate_record(item["body"]["B"]) if item else None

    def _record_item(self, workspace: str, kind: str, ref_id: str) -> Item | None:
        key = record_key(workspace, kind, ref_id)
        if not _key_fits(key):
            return None
        got = self.client.get_item(TableName=self.records_table, Key=key, ConsistentRead=True)
        item = got.get("Item")
        if item is None and key["workspace"]["S"] != workspace:  # written before the spread
            legacy = _legacy_key(workspace, key["rid"]["S"])
            got = self.client.get_item(
                TableName=self.records_table, Key=legacy, ConsistentRead=True
            )
            item = got.get("Item")
        return cast(Item | None, item)

    def prune(self, workspace: str, through_seq: int) -> PruneResult:
        cp = self.client.get_item(
            TableName=self.state_table,
            Key={"pk": _s(f"{workspace}#checkpoint"), "sk": _s(f"{through_seq:020d}")},
            ConsistentRead=True,
        )
        if "Item" not in cp:
            raise PruneError(f"no signed checkpoint at seq {through_seq}")
        head = self.head(workspace)
        if head is not None and through_seq >= head.seq:
            # The last entry is the chain's head (there is no head item apart from it).
            raise PruneError(f"seq {through_seq} is the chain head; a prune keeps the head")
        if not self._prune_recorded(workspace, through_seq):
            raise PruneError(
                f"no prune entry says through_seq {through_seq}: append one first "
                "(claros.evidence.retention.prune does)"
            )
        entries_deleted = records_deleted = 0
        query = self._query(
            {
                "TableName": self.ledger_table,
                "KeyConditionExpression": "workspace = :w AND #seq <= :through",
                "ProjectionExpression": "workspace, #seq, kind, ref_id",
                "ExpressionAttributeNames": {"#seq": "seq"},
                "ExpressionAttributeValues": {":w": _s(workspace), ":through": _n(through_seq)},
            },
            None,
        )
        page: list[Item] = []
        for item in query:
            page.append(item)
            if len(page) == self.page_size:
                records_deleted += self._prune_page(workspace, page, through_seq)
                entries_deleted += len(page)
                page = []
        if page:
            records_deleted += self._prune_page(workspace, page, through_seq)
            entries_deleted += len(page)
        return PruneResult(entries_deleted, records_deleted, through_seq)

    def _prune_recorded(self, workspace: str, through_seq: int) -> bool:
        """A ``prune`` entry after the cut names it (as SQLite's ``prune_marks_need_a_prune``
        trigger asks): a signed checkpoint alone is no decision to prune, and an entry the
        prune would delete cannot be its record. Prune records sit under the workspace
        itself (``_UNSPREAD``), read back by a query on their kind."""
        query = self._query(
            {
                "TableName": self.records_table,
                "KeyConditionExpression": "workspace = :w AND begins_with(rid, :kind)",
                "FilterExpression": "#seq > :through",
                "ExpressionAttributeNames": {"#seq": "seq"},
                "ExpressionAttributeValues": {
                    ":w": _s(workspace),
                    ":kind": _s(f"{PRUNE_KIND}#"),
                    ":through": _n(through_seq),
                },
            },
            None,
        )
        return any(_prune_says(item) == through_seq for item in query)

    def kept_records(self, workspace: str, through_seq: int) -> list[KeptRecord]:
        out: list[KeptRecord] = []
        for kind in sorted(NEVER_PRUNED):
            query = self._query(
                {
                    "TableName": self.records_table,
                    "KeyConditionExpression": "workspace = :w AND begins_with(rid, :kind)",
                    "FilterExpression": "#seq <= :through",
                    "ExpressionAttributeNames": {"#seq": "seq"},
                    "ExpressionAttributeValues": {
                        ":w": _s(workspace),
                        ":kind": _s(f"{kind}#"),
                        ":through": _n(through_seq),
                    },
                },
                None,
            )
            for item in query:
                ref_id = item["rid"]["S"].split("#", 1)[1]
                body = _inflate_record(item["body"]["B"])
                out.append(KeptRecord(int(item["seq"]["N"]), kind, ref_id, body))
        return sorted(out, key=lambda k: k.seq)

    def _prune_page(self, workspace: str, page: list[Item], through_seq: int) -> int:
        """Delete one page of entries, their records first (a re-run finishes the job)."""
        rids = {f"{i['kind']['S']}#{i['ref_id']['S']}" for i in page}
        rids = {r for r in rids if r.split("#", 1)[0] not in NEVER_PRUNED}
        found = self._batch_get_records(workspace, rids, projection="workspace, rid, seq")
        doomed = [
            {"workspace": item["workspace"], "rid": item["rid"]}
            for item in found.values()
            if int(item["seq"]["N"]) <= through_seq
        ]
        self._batch_delete(self.records_table, doomed)
        self._batch_delete(
            self.ledger_table, [{"workspace": i["workspace"], "seq": i["seq"]} for i in page]
        )
        return len(doomed)

    def _batch_delete(self, table: str, keys: list[Item]) -> None:
        for i in range(0, len(keys), _BATCH_WRITE):
            unprocessed: dict[str, Any] = {
                table: [{"DeleteRequest": {"Key": k}} for k in keys[i : i + _BATCH_WRITE]]
            }
            for attempt in range(self.max_attempts):
                got = self.client.batch_write_item(RequestItems=unprocessed)
                unprocessed = dict(got.get("UnprocessedItems") or {})
                if not unprocessed:
                    break
                self._backoff(attempt)
            else:
                raise StoreError("DynamoDB kept deletes unprocessed; run the prune again")

    # --- checkpoints and public keys --------------------------------------------------
    def add_checkpoint(self, checkpoint: Checkpoint) -> bool:
        try:
            self.client.put_item(
                TableName=self.state_table,
                Item={
                    "pk": _s(f"{checkpoint.workspace}#checkpoint"),
                    "sk": _s(f"{checkpoint.seq:020d}"),
                    "workspace": _s(checkpoint.workspace),
                    "seq": _n(checkpoint.seq),
                    "hash": _s(checkpoint.hash),
                    "ts": _n(checkpoint.ts),
                    "key_id": _s(checkpoint.key_id),
                    "signature": _s(checkpoint.signature),
                },
                ConditionExpression="attribute_not_exists(sk)",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def checkpoints(
        self, workspace: str, *, since: int = 0, limit: int | None = None
    ) -> list[Checkpoint]:
        items = self._query(
            {
                "TableName": self.state_table,
                "KeyConditionExpression": "pk = :pk AND sk > :since",
                "ExpressionAttributeValues": {
                    ":pk": _s(f"{workspace}#checkpoint"),
                    ":since": _s(f"{max(since, 0):020d}"),
                },
            },
            limit,
        )
        return [_checkpoint(item) for item in items if int(item["seq"]["N"]) > since]

    def latest_checkpoint(self, workspace: str) -> Checkpoint | None:
        got = self.client.query(
            TableName=self.state_table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": _s(f"{workspace}#checkpoint")},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = got.get("Items", [])
        return _checkpoint(items[0]) if items else None

    def add_public_key(self, key: PublicKey) -> None:
        try:
            self.client.put_item(
                TableName=self.state_table,
                Item={
                    "pk": _s(f"{key.workspace}#pubkey"),
                    "sk": _s(key.key_id),
                    "workspace": _s(key.workspace),
                    "key_id": _s(key.key_id),
                    "public_key": _s(key.public_key),
                    "created_at": _n(key.created_at),
                    "algorithm": _s(key.algorithm),
                },
                ConditionExpression="attribute_not_exists(sk)",
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise

    def public_keys(self, workspace: str) -> list[PublicKey]:
        items = self._query(
            {
                "TableName": self.state_table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": _s(f"{workspace}#pubkey")},
            },
            None,
        )
        keys = [
            PublicKey(
                i["workspace"]["S"],
                i["key_id"]["S"],
                i["public_key"]["S"],
                int(i["created_at"]["N"]),
                i["algorithm"]["S"],
            )
            for i in items
        ]
        return sorted(keys, key=lambda k: (k.created_at, k.key_id))

    # --- docs -------------------------------------------------------------------------
    def get_doc(self, workspace: str, collection: str, key: str) -> Doc | None:
        where = _doc_key(workspace, collection, key)
        if not _key_fits(where):
            return None
        try:
            got = self.client.get_item(TableName=self.state_table, Key=where, ConsistentRead=True)
        except ClientError as exc:
            raise self._refused(exc, f"{collection}/{key}") from exc
        item = got.get("Item")
        if not item:
            return None
        return _doc(collection, key, item)

    def get_docs(self, workspace: str, wanted: Sequence[tuple[str, str]]) -> list[Doc | None]:
        pairs = docs_asked(wanted)
        keys = [_doc_key(workspace, collection, key) for collection, key in pairs]
        try:
            items = list(self._batch_items(keys, None, self.state_table))
        except ClientError as exc:
            raise self._refused(exc, f"{len(pairs)} docs") from exc
        collection_of = {_doc_pk(workspace, c): c for c, _ in pairs}
        found: dict[tuple[str, str], Doc] = {}
        for item in items:
            collection, key = collection_of[item["pk"]["S"]], item["sk"]["S"]
            found[collection, key] = _doc(collection, key, item)
        return [found.get(pair) for pair in wanted]

    def query_docs(
        self,
        workspace: str,
        collection: str,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        descending: bool = False,
    ) -> list[Doc]:
        if limit == 0:
            return []
        values: dict[str, Any] = {":pk": _s(_doc_pk(workspace, collection))}
        condition = "pk = :pk"
        start: str | None = None
        if prefix:
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = _s(prefix)
        if after is not None:
            if not prefix:
                condition += " AND sk < :after" if descending else " AND sk > :after"
                values[":after"] = _s(after)
            elif after.startswith(prefix):
                start = after  # a position inside the prefix's range; need not exist
            elif (after < prefix) != descending:
                pass  # every key with the prefix is on the wanted side of ``after``
            else:
                return []  # every key with the prefix is on the wrong side
        request: dict[str, Any] = {
            "TableName": self.state_table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": not descending,
        }
        if start is not None:
            request["ExclusiveStartKey"] = _doc_key(workspace, collection, start)
        return [_doc(collection, i["sk"]["S"], i) for i in self._query(request, limit)]

    def write_docs(self, writes: Sequence[DocWrite]) -> None:
        if not writes:
            return
        if len(writes) > MAX_TRANSACT_ACTIONS:
            raise StoreError(
                f"at most {MAX_TRANSACT_ACTIONS} doc writes go in one transaction; "
                f"got {len(writes)}"
            )
        actions = self._doc_actions(writes)
        for attempt in range(self.max_attempts):
            try:
                self.client.transact_write_items(
                    TransactItems=cast("list[TransactWriteItemTypeDef]", actions)
                )
            except ClientError as exc:
                self._docs_failed(exc, writes)
            else:
                return
            if attempt + 1 < self.max_attempts:
                self._backoff(attempt)
        raise ConflictError("the docs stayed busy with other writes; nothing was written")

    def _docs_failed(self, exc: ClientError, writes: Sequence[DocWrite]) -> None:
        code = _code(exc)
        if code in _RETRY_ERRORS:
            return
        if code != "TransactionCanceledException":
            raise self._refused(exc, "the doc writes") from exc
        reasons: list[Any] = list(exc.response.get("CancellationReasons", []))
        for write, reason in zip(writes, reasons, strict=False):
            if reason.get("Code") == "ConditionalCheckFailed":
                raise _doc_conflict(write, reason.get("Item")) from exc
        codes = [str(r.get("Code", "None")) for r in reasons]
        if any(c in _RETRY_REASONS for c in codes):
            return
        raise StoreError(f"DynamoDB cancelled the doc writes: {', '.join(codes)}") from exc

    @staticmethod
    def _refused(exc: ClientError, what: str) -> Exception:
        if _code(exc) == "ValidationException":
            return StoreError(f"DynamoDB refused {what}: {exc}")
        return exc

    def _doc_actions(self, writes: Sequence[DocWrite]) -> list[dict[str, Any]]:
        """One transaction action per doc write, each with its revision condition."""
        seen: set[tuple[str, str, str]] = set()
        actions: list[dict[str, Any]] = []
        for w in writes:
            target = (w.workspace, w.collection, w.key)
            if target in seen:
                raise StoreError(
                    f"{w.collection}/{w.key} is written twice in one transaction; "
                    "DynamoDB allows one action per item"
                )
            seen.add(target)
            where = _doc_key(w.workspace, w.collection, w.key)
            if not _key_fits(where):
                raise KeyTooLongError(
                    f"{w.collection} {w.key[:40]!r}... is too long a name to keep: DynamoDB "
                    f"keys hold at most {_RANGE_KEY_MAX_BYTES:,} bytes"
                )
            action: dict[str, Any] = {
                "TableName": self.state_table,
                "Key": where,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
            names: dict[str, str] = {}
            values: dict[str, Any] = {}
            if w.expect_rev == 0:
                action["ConditionExpression"] = "attribute_not_exists(pk)"
            elif w.expect_rev is not None:
                action["ConditionExpression"] = "#rev = :expect"
                names["#rev"] = "rev"
                values[":expect"] = _n(w.expect_rev)
            if w.value is None:
                op = "Delete"
            else:
                op = "Update"
                action["UpdateExpression"] = (
                    "SET #body = :body, #rev = if_not_exists(#rev, :zero) + :one"
                )
                names.update({"#body": "body", "#rev": "rev"})
                body = jsonutil.dumps(dict(w.value))
                if len(body) > MAX_DOC_ITEM_BYTES // 4:  # may not fit: measure (rare)
                    _doc_fits(w, body)
                values.update({":body": _s(body), ":zero": _n(0), ":one": _n(1)})
            if names:
                action["ExpressionAttributeNames"] = names
            if values:
                action["ExpressionAttributeValues"] = values
            actions.append({op: action})
        return actions

    # --- activity (issue 13) ----------------------------------------------------------
    # A Query of the workspace's check records (rid "check#<check id>", time-ordered)
    # newest first within the key range of the query's time range, the filters applied
    # server side; at most ``scan_limit`` items evaluated; the outcome filter after the
    # read, from the outcome records (one BatchGetItem per page).
    def _check_pages(
        self,
        workspace: str,
        query: CheckQuery,
        before: str | None,
        scan_limit: int,
        projection: str | None = None,
    ) -> Iterator[tuple[list[Item], int, Item | None]]:
        """(matching items newest first, items evaluated, where the next page starts) in
        rounds, until the range or ``scan_limit`` runs out.

        A workspace's checks are spread over RECORD_SPREAD partition keys (and older ones
        sit under the workspace's own key), so a round reads the next few items of each
        partition and merges them. After a round every item at or above the highest point
        where a partition still has unread items is known in every partition: those are
        yielded in order, the rest wait for the next round. The third value is a key whose
        rid is that point (the next page's ``before``), or None when every partition ran
        out."""
        low, high = check_key_range(query, before)
        conds, names, values = _check_filter(query)
        names["#rid"] = "rid"
        values[":lo"] = _s(f"check#{low}")
        # BETWEEN includes its bounds, so the upper one is the greatest key below the
        # cursor's: its own item is never read again (a partition whose one read were that
        # item would hold the round's safe point at the cursor and the listing in place).
        top = _just_below(f"check#{high}") if high is not None else "check$"
        values[":hi"] = _s(top)
        request: dict[str, Any] = {
            "TableName": self.records_table,
            "KeyConditionExpression": "workspace = :w AND #rid BETWEEN :lo AND :hi",
            "ExpressionAttributeNames": names,
            "ScanIndexForward": False,
            "ConsistentRead": True,
        }
        if conds:
            request["FilterExpression"] = " AND ".join(conds)
        if projection:
            request["ProjectionExpression"] = projection
        # partition -> where its next page starts (None: not read yet); gone when it ran out
        frontier: dict[str, Item | None] = dict.fromkeys(_check_partitions(workspace))
        waiting: list[Item] = []  # matched, below the round's safe point
        scanned = 0
        while frontier and scanned < scan_limit:
            budget = min(_CHECK_PAGE, scan_limit - scanned)
            each = max(1, -(-budget // len(frontier)))
            count = 0
            for part, start in list(frontier.items()):
                args = dict(request, Limit=each)
                args["ExpressionAttributeValues"] = {**values, ":w": _s(part)}
                if start is not None:
                    args["ExclusiveStartKey"] = start
                got = self.client.query(**args)
                waiting += [i for i in got.get("Items", []) if i["rid"]["S"] != top]
                count += int(got.get("ScannedCount", 0))
                last = got.get("LastEvaluatedKey")
                if last is None:
                    del frontier[part]
                else:
                    frontier[part] = last
                    count -= last["rid"]["S"] == top
            scanned += count
            safe = max((k["rid"]["S"] for k in frontier.values() if k), default="")
            waiting.sort(key=lambda i: i["rid"]["S"], reverse=True)
            cut = next((n for n, i in enumerate(waiting) if i["rid"]["S"] < safe), len(waiting))
            items, waiting = waiting[:cut], waiting[cut:]
            if query.outcome is not None and items:
                items = self._with_outcome(workspace, items, query.outcome)
            yield items, count, ({"rid": _s(safe)} if frontier else None)

    def _check_probe(self, workspace: str, query: CheckQuery, below: str) -> bool:
        """Whether any check record of the query's time range lies below ``below`` (a
        rid), in any partition."""
        low, _ = check_key_range(query, None)
        for part in _check_partitions(workspace):
            got = self.client.query(
                TableName=self.records_table,
                KeyConditionExpression="workspace = :w AND rid BETWEEN :lo AND :hi",
                ExpressionAttributeValues={
                    ":w": _s(part),
                    ":lo": _s(f"check#{low}"),
                    ":hi": _s(below),
                },
                ScanIndexForward=False,
                Limit=2,
                ProjectionExpression="rid",
                ConsistentRead=True,
            )
            if any(i["rid"]["S"] != below for i in got.get("Items", [])):
                return True
        return False

    def _with_outcome(self, workspace: str, items: list[Item], status: str) -> list[Item]:
        found = self._outcomes(workspace, items, "rid, body")
        out = []
        for item in items:
            got = found.get(item["rid"]["S"].partition("#")[2])
            if (_record_body(got).get("status") if got else "none") == status:
                out.append(item)
        return out

    def _outcomes(self, workspace: str, items: list[Item], projection: str) -> dict[str, Item]:
        rids = {"outcome#" + i["rid"]["S"].partition("#")[2] for i in items}
        found = self._batch_get_records(workspace, rids, projection)
        return {rid.partition("#")[2]: item for rid, item in found.items()}

    def list_checks(
        self,
        workspace: str,
        query: CheckQuery,
        *,
        before: str | None = None,
        limit: int = 50,
        scan_limit: int = 2_000,
    ) -> CheckPage:
        rows: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        scanned = 0
        next_id: str | None = None
        for items, count, start in self._check_pages(workspace, query, before, scan_limit):
            scanned += count
            outcomes = self._outcomes(workspace, items, "rid, body") if items else {}
            for item in items:
                check_id = item["rid"]["S"].partition("#")[2]
                outcome = outcomes.get(check_id)
                rows.append((_record_body(item), _record_body(outcome) if outcome else None))
                if len(rows) == limit:
                    return CheckPage(rows, scanned, check_id)
            next_id = start["rid"]["S"].partition("#")[2] if start is not None else None
        return CheckPage(rows, scanned, next_id)

    def count_checks(
        self, workspace: str, query: CheckQuery, *, scan_limit: int = 10_000
    ) -> CheckCounts:
        by_result: dict[str, int] = {}
        scanned = 0
        start: Item | None = None
        # The outcome filter reads each match's body-less outcome record; without it, only
        # the result attribute of each match comes back.
        projection = "rid, c_result"
        pages = self._check_pages(workspace, query, None, scan_limit, projection)
        for items, count, page_start in pages:
            start = page_start
            scanned += count
            for item in items:
                result = item.get("c_result", {}).get("S", "unknown")
                by_result[result] = by_result.get(result, 0) + 1
        # The scan limit was reached: is anything older in the range?
        complete = start is None or not self._check_probe(workspace, query, start["rid"]["S"])
        return CheckCounts(by_result, scanned, complete)

    def record_entry(self, workspace: str, kind: str, ref_id: str) -> Entry | None:
        found_seq: Item | None = None
        key = record_key(workspace, kind, ref_id)
        if not _key_fits(key):
            return None
        for where in (key, _legacy_key(workspace, key["rid"]["S"])):
            got = self.client.get_item(
                TableName=self.records_table,
                Key=where,
                ProjectionExpression="#seq",
                ExpressionAttributeNames={"#seq": "seq"},
                ConsistentRead=True,
            )
            if "Item" in got or where["workspace"]["S"] == workspace:
                found_seq = got.get("Item")
                break
        if found_seq is None:
            return None
        entry = self.client.get_item(
            TableName=self.ledger_table,
            Key={"workspace": _s(workspace), "seq": found_seq["seq"]},
            ConsistentRead=True,
        )
        if "Item" not in entry:
            return None
        found = _entry(entry["Item"])
        return found if (found.kind, found.ref_id) == (kind, ref_id) else None

    # --- a page that stays fast (issue 13, item 7) ------------------------------------
    def checkpoint_before(self, workspace: str, seq: int) -> Checkpoint | None:
        if seq <= 1:
            return None
        got = self.client.query(
            TableName=self.state_table,
            KeyConditionExpression="pk = :pk AND sk < :seq",
            ExpressionAttributeValues={
                ":pk": _s(f"{workspace}#checkpoint"),
                ":seq": _s(f"{seq:020d}"),
            },
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = got.get("Items", [])
        return _checkpoint(items[0]) if items else None
