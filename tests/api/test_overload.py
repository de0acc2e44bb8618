"""Overload: when the ledger cannot take a check in time, ``POST /v1/check`` answers 503
with ``Retry-After`` and the reason, at once (never a hang), with nothing written; the 503
is counted (``Overloaded``: a Powertools metric in AWS, the local server's counter)."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from claros.local import LocalServer
from claros.store.base import Store
from claros.store.dynamo import DynamoStore
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body
from tests.store.test_group_commit import Gate

DYNAMO = pytest.mark.parametrize("store", ["dynamodb"], indirect=True)


def _checks(store: Store) -> int:
    return sum(1 for e in store.entries(WORKSPACE) if e.kind == "check")


def test_a_check_the_ledger_cannot_take_in_time_is_a_503_writing_nothing(
    http: httpx.Client, keys: Keys, store: Store, server: LocalServer
) -> None:
    before = store.head(WORKSPACE)
    store._group.wait_s = 0.3  # type: ignore[attr-defined]
    gate = Gate(store)  # another append holds the ledger's transaction
    holder = threading.Thread(target=store.append, args=(WORKSPACE, "note", "n1", {"n": 1}))
    holder.start()
    try:
        assert gate.entered.wait(10)
        began = time.monotonic()
        busy = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
        took = time.monotonic() - began
    finally:
        gate.open()
        holder.join(30)
    assert busy.status_code == 503, busy.text
    assert took < 10  # the bounded wait, not a hang
    assert int(busy.headers["Retry-After"]) >= 1
    body = busy.json()
    assert body["error"] == "unavailable" and "nothing was written" in body["message"]
    assert server.metrics["Overloaded"] == 1
    # Nothing of the refused check: only the holder's entry came after the keys' entries.
    after = store.head(WORKSPACE)
    assert after is not None and after.seq == (before.seq if before else 0) + 1
    assert _checks(store) == 0
    # Once the ledger is free the same check goes through.
    again = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
    assert again.status_code == 200, again.text
    assert _checks(store) == 1 and server.metrics["Overloaded"] == 1


@DYNAMO
def test_a_chain_head_that_keeps_moving_is_a_503_writing_nothing(
    http: httpx.Client, keys: Keys, store: Store, server: LocalServer
) -> None:
    assert isinstance(store, DynamoStore)
    # The key's first use is noted (a doc write, at most once a minute): done before the
    # race, so the writes counted below are the check's alone.
    assert http.get("/v1/me", headers=bearer(keys.agent)).status_code == 200
    real = store.client
    tries: list[int] = []

    class Racing:
        """Another process wins every race for the head."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def transact_write_items(self, **kwargs: Any) -> Any:
            tries.append(1)
            error = {"Code": "TransactionConflictException", "Message": "busy"}
            raise ClientError({"Error": error}, "TransactWriteItems")  # type: ignore[typeddict-item]

    store.client = Racing()  # type: ignore[assignment]
    store.max_attempts, store.base_delay_s = 3, 0.001
    try:
        busy = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
    finally:
        store.client = real
    assert busy.status_code == 503, busy.text
    assert busy.headers["Retry-After"] == "1"
    assert "the ledger is busy" in busy.json()["message"] and "3 attempts" in busy.json()["message"]
    assert len(tries) == 3 and server.metrics["Overloaded"] == 1
    assert _checks(store) == 0
