"""Idempotent writes: a client that retries with the same ``Idempotency-Key`` header gets
the first answer again instead of a second record.

A key is scoped to the calling API key and the route; reusing it with another body is
refused (422). Requests without the header run as usual. The record is a doc in a global
collection of the Store (so it works the same on SQLite and DynamoDB), named by the sha256
of (API key id, route, Idempotency-Key). Each function that takes keys keeps its answers
in a collection of its own, which only its role may write (template.yaml,
``WriteItsOwnDocsOnly``): ``idempotency_check`` (``POST /v1/check``),
``idempotency_outcome`` (the outcome routes) and ``idempotency`` (the admin function's).
In one shared collection the outcome role could rewrite the answer kept for a check, and
the guard's retry of that check got an ``allowed: true`` no check had given
(tests/security/aws/test_outcome_role_plants_a_check_answer.py). The record:

    status        INPROGRESS while a request runs under the key, then COMPLETED
    payload_hash  sha256 of the body: the same key with another body is refused
    holder        who runs it (host, process, request), for the log of a takeover
    lease_until   ms: the holder's hold on the key ends then (its time budget)
    expiry        ms: after this the key may be used again (24 h)
    data          COMPLETED: the answer given, sent again to every retry

A request takes the key with a conditional write (absent, or the revision it read), runs,
and writes COMPLETED with its answer; a request that fails deletes the record, so a
corrected retry runs. A retry that finds the key INPROGRESS within its lease is answered
409 ``idempotency_in_progress`` with Retry-After (the first may yet finish): clients treat
it as "retry later", never as delivered, unlike the ``conflict`` 409 ("already recorded").
A holder that dies (a server killed mid-request, a Lambda that timed out) never finishes:
once its lease has ended the next retry takes the key over and runs. All times are
``claros.clock``'s.

The lease is the request's time budget: the Lambda's remaining time (the local server
gives each request 30 s), plus a second; a request that outlives it may run twice, which
the records themselves catch where it matters (one outcome per check).

A write that is one ledger append whose record the store itself refuses a second time
(an outcome: one per check) needs no INPROGRESS hold: ``run_in_append`` reads the key's
record and hands the request a ``KeyedAnswer``, whose COMPLETED record goes into the
append's own transaction, conditional on the revision read. So the key and the write land
together or not at all (a crash leaves nothing to take over), a race for the same key
loses on the record or the key's condition (a 409 "recorded already"), and the request
costs one transaction instead of three (take, append, complete: ~2.5 ms of server CPU per
outcome report, most of it in the two extra commits). The entry's seq is not known before
the append: the answer is kept without it and the replay reads it back
(``Store.record_entry``).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import secrets
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from claros import jsonutil
from claros.api.http import ADMIN_ANSWERS, CHECK_ANSWERS, OUTCOME_ANSWERS
from claros.auth import Principal
from claros.clock import now_ms
from claros.errors import ClarosError
from claros.store.base import GLOBAL, DocWrite, Store
from claros.store.base import ConflictError as StoreConflictError

__all__ = [
    "CHECK_ANSWERS",
    "COLLECTION",
    "OUTCOME_ANSWERS",
    "IdempotencyInProgressError",
    "KeyedAnswer",
    "ReusedKeyError",
    "run_idempotently",
    "run_in_append",
]

log = logging.getLogger("claros.idempotency")

HEADER = "idempotency-key"
COLLECTION = ADMIN_ANSWERS  # unless the caller names its own (claros.api.http)
MAX_KEY = 255
EXPIRES_MS = 24 * 3600 * 1000
DEFAULT_LEASE_MS = 30_000  # without a time budget (a caller outside any Lambda context)
LEASE_MARGIN_MS = 1_000
INPROGRESS, COMPLETED = "INPROGRESS", "COMPLETED"
_TAKES = 3  # a key raced for by this many requests in a row is still answered


class ReusedKeyError(ClarosError):
    status, code = 422, "idempotency_key_reused"


class IdempotencyInProgressError(ClarosError):
    """Another request holds the key now: retry after ``retry_after_s``. Not "delivered"."""

    status, code = 409, "idempotency_in_progress"

    def __init__(self, message: str, *, retry_after_s: int, lease_until: int) -> None:
        super().__init__(message, details={"retry_after_s": retry_after_s,
                                           "lease_until": lease_until})  # fmt: skip
        self.retry_after_s = retry_after_s


def _doc_key(principal: Principal, route: str, key: str) -> str:
    scoped = jsonutil.dumps([principal.key_id, route, key])
    return hashlib.sha256(scoped.encode("utf-8", "surrogatepass")).hexdigest()


def _lease_ms(context: Any) -> int:
    # A context that gives the request's time left (a Lambda's); tested by its method, as
    # a runtime-checkable protocol would, without the protocol's per-call walk.
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if callable(remaining):
        return max(0, int(remaining())) + LEASE_MARGIN_MS
    return DEFAULT_LEASE_MS


def _holder(context: Any) -> str:
    request = getattr(context, "aws_request_id", "") or secrets.token_hex(6)
    return f"{socket.gethostname()}/{os.getpid()}/{request}"


def _live(record: dict[str, Any], now: int) -> bool:
    if record.get("status") == COMPLETED:
        return int(record.get("expiry") or 0) > now
    if record.get("status") == INPROGRESS:
        return int(record.get("lease_until") or 0) > now
    return False


def _answer_of(store: Store, data: Mapping[str, Any]) -> dict[str, Any]:
    """A COMPLETED record's answer; one kept by ``run_in_append`` gets its entry's seq
    back from the store (``seq_of``: workspace, kind and ref id of its record)."""
    seq_of = data.get("seq_of")
    if not seq_of:
        return dict(data)
    body = jsonutil.loads(str(data["body"]))
    entry = store.record_entry(str(seq_of[0]), str(seq_of[1]), str(seq_of[2]))
    if entry is not None:  # (gone only if pruned, long after the key's 24 h)
        body["seq"] = entry.seq
    return {"status": data["status"], "body": jsonutil.dumps(body)}


def _look(
    store: Store, collection: str, doc_key: str, payload_hash: str
) -> tuple[Any, dict[str, Any] | None]:
    """The key's record (a Doc, or None) and, when it is COMPLETED and live, its answer.
    ReusedKeyError for another body, IdempotencyInProgressError while another holds it."""
    doc = store.get_doc(GLOBAL, collection, doc_key)
    now = now_ms()
    if doc is not None and _live(doc.value, now):
        old = doc.value
        if old.get("payload_hash") != payload_hash:
            raise ReusedKeyError(
                "this Idempotency-Key was used with another body; use a new key for a new request"
            )
        if old["status"] == COMPLETED:
            return doc, _answer_of(store, old["data"])
        until = int(old["lease_until"])
        wait = max(1, math.ceil((until - now) / 1000))
        raise IdempotencyInProgressError(
            "a request with this Idempotency-Key is still in progress; it is not recorded "
            f"yet: retry in {wait} s",
            retry_after_s=wait,
            lease_until=until,
        )
    return doc, None


def _take(
    store: Store, collection: str, doc_key: str, payload_hash: str, lease_ms: int, holder: str
) -> int | dict[str, Any]:
    """Take the key (the revision now held) or find its answer (the stored ``data``).
    StoreConflictError when another request wrote the record meanwhile."""
    doc, answer = _look(store, collection, doc_key, payload_hash)
    if answer is not None:
        return answer
    now = now_ms()
    if doc is not None and doc.value.get("status") == INPROGRESS:
        log.warning(
            "Idempotency-Key record %s: the lease of %s ended %d ms ago without an answer "
            "(it died mid-request); this request takes it over",
            doc_key[:16],
            doc.value.get("holder", "?"),
            now - int(doc.value.get("lease_until") or 0),
        )
    record = {
        "status": INPROGRESS,
        "payload_hash": payload_hash,
        "holder": holder,
        "lease_until": now + lease_ms,
        "expiry": now + EXPIRES_MS,
    }
    rev = doc.rev if doc is not None else 0
    store.write_docs([DocWrite(GLOBAL, collection, doc_key, record, rev)])
    return rev + 1


def _release(
    store: Store, collection: str, doc_key: str, rev: int, value: dict[str, Any] | None
) -> None:
    """Complete (``value``) or drop the record we hold at ``rev``; if another request took
    it over meanwhile (we outlived our lease), it is theirs now and stays."""
    try:
        store.write_docs([DocWrite(GLOBAL, collection, doc_key, value, rev)])
    except StoreConflictError:
        log.warning("Idempotency-Key record %s was taken over before this request ended",
                    doc_key[:16])  # fmt: skip


def run_idempotently(
    store: Store,
    principal: Principal,
    route: str,
    headers: dict[str, str],
    body: str | None,
    run: Callable[[], tuple[int, Any]],
    lambda_context: Any = None,
    collection: str = COLLECTION,
) -> Response[str]:
    """Run ``run`` (giving status and JSON body) at most once per Idempotency-Key, its
    answer kept in ``collection`` (the calling function's own)."""
    key = headers.get(HEADER)
    if key is None:
        status, answer = run()
        return Response(status, "application/json", jsonutil.dumps(answer))
    if not key or len(key) > MAX_KEY:
        raise ClarosError(f"Idempotency-Key must be 1 to {MAX_KEY} characters")
    doc_key = _doc_key(principal, route, key)
    payload_hash = hashlib.sha256((body or "").encode("utf-8", "surrogatepass")).hexdigest()
    lease_ms, holder = _lease_ms(lambda_context), _holder(lambda_context)
    for attempt in range(_TAKES):
        try:
            taken = _take(store, collection, doc_key, payload_hash, lease_ms, holder)
            break
        except StoreConflictError:  # another request wrote the record meanwhile: look again
            if attempt == _TAKES - 1:
                raise
    if isinstance(taken, dict):
        result = taken
    else:
        try:
            status, answer = run()
        except Exception:
            # A refused or failed request may be retried as it is (or corrected). If even
            # this fails (the disk still full), the lease ends it.
            try:
                _release(store, collection, doc_key, taken, None)
            except Exception:
                log.exception("could not drop the Idempotency-Key record %s", doc_key[:16])
            raise
        result = {"status": status, "body": jsonutil.dumps(answer)}
        done = {"status": COMPLETED, "payload_hash": payload_hash, "holder": holder,
                "expiry": now_ms() + EXPIRES_MS, "data": result}  # fmt: skip
        try:
            _release(store, collection, doc_key, taken, done)
        except Exception:
            # The work is done and this is its answer: give it. A retry (there is none
            # once the client has the answer) would find the key held until the lease ends.
            log.exception("could not keep the answer under Idempotency-Key record %s",
                          doc_key[:16])  # fmt: skip
    return Response(
        int(result["status"]),
        "application/json",
        str(result["body"]),
        headers={"Idempotency-Key": key},
    )


@dataclass(frozen=True)
class KeyedAnswer:
    """The Idempotency-Key record a ``run_in_append`` request writes in its own append."""

    collection: str
    doc_key: str
    rev: int  # the record's revision as read (0: none), the write's condition
    payload_hash: str
    holder: str

    def write(
        self, status: int, answer: Mapping[str, Any], seq_of: tuple[str, str, str]
    ) -> DocWrite:
        """The COMPLETED record of ``answer`` (without its ``seq``, which the replay reads
        back from the entry of the record ``seq_of`` names)."""
        data = {"status": status, "body": jsonutil.dumps(dict(answer)), "seq_of": list(seq_of)}
        done = {"status": COMPLETED, "payload_hash": self.payload_hash, "holder": self.holder,
                "expiry": now_ms() + EXPIRES_MS, "data": data}  # fmt: skip
        return DocWrite(GLOBAL, self.collection, self.doc_key, done, self.rev)


def run_in_append(
    store: Store,
    principal: Principal,
    route: str,
    headers: dict[str, str],
    body: str | None,
    run: Callable[[KeyedAnswer | None], tuple[int, Any]],
    lambda_context: Any = None,
    collection: str = COLLECTION,
) -> Response[str]:
    """Run ``run`` at most once per Idempotency-Key, for a write that is one ledger append
    of a record the store refuses twice: ``run`` puts ``KeyedAnswer.write`` among its
    append's doc writes (None: the request has no key). The answer is kept in
    ``collection``, the calling function's own."""
    key = headers.get(HEADER)
    if key is None:
        status, answer = run(None)
        return Response(status, "application/json", jsonutil.dumps(answer))
    if not key or len(key) > MAX_KEY:
        raise ClarosError(f"Idempotency-Key must be 1 to {MAX_KEY} characters")
    doc_key = _doc_key(principal, route, key)
    payload_hash = hashlib.sha256((body or "").encode("utf-8", "surrogatepass")).hexdigest()
    doc, result = _look(store, collection, doc_key, payload_hash)
    if result is None:
        keyed = KeyedAnswer(collection, doc_key, doc.rev if doc is not None else 0,
                            payload_hash, _holder(lambda_context))  # fmt: skip
        status, answer = run(keyed)
        result = {"status": status, "body": jsonutil.dumps(answer)}
    return Response(
        int(result["status"]),
        "application/json",
        str(result["body"]),
        headers={"Idempotency-Key": key},
    )
