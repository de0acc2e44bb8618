"""Idempotent writes: a client that retries with the same ``Idempotency-Key`` header gets
the first answer again instead of a second record.

Powertools' idempotency utility does the bookkeeping; its records live in our own Store
(docs in the global collection ``idempotency``), so it works the same on SQLite and
DynamoDB. A key is scoped to the calling API key and the route; reusing it with another
body is refused (422). Requests without the header run as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.idempotency import (
    BasePersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from claros import jsonutil
from claros.auth import Principal
from claros.clock import now_ms
from claros.errors import ClarosError, ConflictError
from claros.store.base import GLOBAL, DocWrite, Store
from claros.store.base import ConflictError as StoreConflictError

__all__ = ["StorePersistence", "run_idempotently"]

HEADER = "idempotency-key"
COLLECTION = "idempotency"
MAX_KEY = 255


class ReusedKeyError(ClarosError):
    status, code = 422, "idempotency_key_reused"


class StorePersistence(BasePersistenceLayer):
    """Powertools idempotency records as Store docs, with the same conditions as its
    DynamoDB layer: a record may be taken over only when absent, expired, or in progress
    past its in-progress expiry."""

    def __init__(self, store: Store) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.store = store

    @staticmethod
    def _to_doc(record: DataRecord) -> dict[str, Any]:
        return {
            "status": record.status,
            "expiry": record.expiry_timestamp,
            "in_progress_expiry": record.in_progress_expiry_timestamp,
            "data": record.response_data,
            "payload_hash": record.payload_hash,
        }

    @staticmethod
    def _to_record(key: str, doc: dict[str, Any]) -> DataRecord:
        return DataRecord(
            idempotency_key=key,
            status=doc["status"],
            expiry_timestamp=doc.get("expiry"),
            in_progress_expiry_timestamp=doc.get("in_progress_expiry"),
            response_data=doc.get("data") or "",
            payload_hash=doc.get("payload_hash") or "",
        )

    def _get_record(self, idempotency_key: str) -> DataRecord:
        doc = self.store.get_doc(GLOBAL, COLLECTION, idempotency_key)
        if doc is None:
            raise IdempotencyItemNotFoundError
        return self._to_record(idempotency_key, doc.value)

    def _put_record(self, data_record: DataRecord) -> None:
        key = data_record.idempotency_key
        doc = self.store.get_doc(GLOBAL, COLLECTION, key)
        if doc is not None:
            old = self._to_record(key, doc.value)
            now_s, now = now_ms() // 1000, now_ms()
            expired = (old.expiry_timestamp or 0) < now_s
            stale = old.status == "INPROGRESS" and (old.in_progress_expiry_timestamp or 0) < now
            if not (expired or stale):
                self._validate_payload(data_payload=data_record, stored_data_record=old)
                raise IdempotencyItemAlreadyExistsError(old_data_record=old)
        write = DocWrite(GLOBAL, COLLECTION, key, self._to_doc(data_record), doc.rev if doc else 0)
        try:
            self.store.write_docs([write])
        except StoreConflictError as exc:  # another request took it meanwhile
            raise IdempotencyItemAlreadyExistsError() from exc

    def _update_record(self, data_record: DataRecord) -> None:
        self.store.write_docs(
            [DocWrite(GLOBAL, COLLECTION, data_record.idempotency_key, self._to_doc(data_record))]
        )

    def _delete_record(self, data_record: DataRecord) -> None:
        self.store.write_docs([DocWrite(GLOBAL, COLLECTION, data_record.idempotency_key, None)])


def run_idempotently(
    store: Store,
    principal: Principal,
    route: str,
    headers: dict[str, str],
    body: str | None,
    run: Callable[[], tuple[int, Any]],
    lambda_context: Any = None,
) -> Response[str]:
    """Run ``run`` (giving status and JSON body) at most once per Idempotency-Key."""
    key = headers.get(HEADER)
    if key is None:
        status, answer = run()
        return Response(status, "application/json", jsonutil.dumps(answer))
    if not key or len(key) > MAX_KEY:
        raise ClarosError(f"Idempotency-Key must be 1 to {MAX_KEY} characters")
    config = IdempotencyConfig(
        event_key_jmespath="[key_id, route, key]",
        payload_validation_jmespath="body",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=24 * 3600,
        hash_function="sha256",
    )
    if lambda_context is not None:
        config.register_lambda_context(lambda_context)

    @idempotent_function(
        data_keyword_argument="request",
        persistence_store=StorePersistence(store),
        config=config,
    )
    def once(request: dict[str, Any]) -> dict[str, Any]:
        status, answer = run()
        # Only successes are kept: a refused request may be retried as it is.
        return {"status": status, "body": jsonutil.dumps(answer)}

    request = {"key_id": principal.key_id, "route": route, "key": key, "body": body or ""}
    try:
        result = once(request=request)
    except IdempotencyValidationError as exc:
        raise ReusedKeyError(
            "this Idempotency-Key was used with another body; use a new key for a new request"
        ) from exc
    except IdempotencyAlreadyInProgressError as exc:
        raise ConflictError(
            "a request with this Idempotency-Key is still in progress; retry in a moment"
        ) from exc
    return Response(
        int(result["status"]),
        "application/json",
        str(result["body"]),
        headers={"Idempotency-Key": key},
    )
