"""Heartbeat checkpoints: the rule (``due_checkpoints``) on both stores, and the local
server's heartbeat thread signing a tail left unsigned for CLAROS_LEDGER_CHECKPOINT_MAX_AGE."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from claros.auth import create_key, ensure_workspace
from claros.checkpoints import due_checkpoints
from claros.config import Settings
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.base import Store
from claros.wiring import Services
from tests.api.conftest import bearer, check_body

WS = "acme"


def test_due_checkpoints_by_count_and_by_age(store: Store, tmp_path: Path) -> None:
    signer = FileSigner(tmp_path)
    ensure_workspace(store, WS)
    ensure_workspace(store, "quiet")  # no entries: never signed
    t0 = 1_796_000_000_000
    for i in range(3):
        store.append(WS, "check", f"c{i}", {"n": i}, ts=t0 + i)
    # Young tail, fewer than N entries: nothing is due.
    assert due_checkpoints(store, signer, every=5, max_age_s=60, now=t0 + 10_000) == []
    # The oldest unsigned entry is 60 s old: the head is signed.
    [cp] = due_checkpoints(store, signer, every=5, max_age_s=60, now=t0 + 60_000)
    assert (cp.workspace, cp.seq) == (WS, 3)
    assert due_checkpoints(store, signer, every=5, max_age_s=60, now=t0 + 600_000) == []
    for i in range(3, 8):
        store.append(WS, "check", f"c{i}", {"n": i}, ts=t0 + 700_000)
    # N entries past the last checkpoint: signed however young.
    [cp] = due_checkpoints(store, signer, every=5, max_age_s=60, now=t0 + 700_001)
    assert cp.seq == 8
    assert [c.seq for c in store.checkpoints(WS)] == [3, 8]


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_local_heartbeat_signs_a_stale_tail(store: Store, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", checkpoint_every=1000, checkpoint_max_age_s=1)
    services = Services(settings, store, FileSigner(settings.data_dir))
    agent = create_key(store, WS, "agent", person="dana@acme.test")
    server = LocalServer(services, "127.0.0.1", 0).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as http:

            def check(n: int) -> None:
                body = check_body(agent={"name": "t", "call_id": str(n)})
                assert http.post("/v1/check", json=body, headers=bearer(agent)).status_code == 200

            def signed_at(seq: int) -> bool:
                latest = store.latest_checkpoint(WS)
                return latest is not None and latest.seq == seq

            check(1)
            assert store.latest_checkpoint(WS) is None  # 1 entry of 1,000: not inline
            # The heartbeat beats every second and signs once the tail is 1 s old.
            assert _wait_for(lambda: signed_at(1), 5), "the heartbeat signed nothing"
            time.sleep(1.2)  # nothing new: nothing more is signed
            assert [cp.seq for cp in store.checkpoints(WS)] == [1]
            check(2)
            check(3)
            assert _wait_for(lambda: signed_at(3), 5)
            assert [cp.seq for cp in store.checkpoints(WS)] == [1, 3]
    finally:
        server.stop()
