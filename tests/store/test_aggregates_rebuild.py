"""Rebuilding the aggregates from the ledger (``claros.rebuild``; issue 13: ledgers older
than the aggregates), on SQLite and moto DynamoDB: after a rebuild a window counted from
the aggregates is what feeding every record of the window to the counters gives (the
comparison of tests/store/test_aggregates.py), a second rebuild changes nothing, and an
append that lands while the rebuild runs is counted once. The command itself runs as a
real subprocess: its one-line errors exit 2."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claros.aggregates import SPANS
from claros.config import Settings
from claros.evidence.aiuc1 import aiuc1_pack
from claros.evidence.oversight import oversight
from claros.rebuild import rebuild
from claros.signing import FileSigner
from claros.store.base import Store
from claros.wiring import Services, open_store
from tests.api.seed import NOV_1, WS, install_clock, seed_october
from tests.store.test_aggregates import DAY, _mixed, _normal

NOW = NOV_1 + 45 * DAY + 17 * 60_000 + 123


def _every_bucket(store: Store, workspace: str) -> dict[str, dict[str, Any]]:
    return {
        f"{span}:{start}": bucket
        for span in SPANS
        for start, bucket in store.aggregate_buckets(workspace, 0, 10**9, span=span)
    }


def _forget_aggregates(store: Store, workspace: str) -> None:
    """As a ledger written before the aggregates: every one empty."""
    for name in _every_bucket(store, workspace):
        span, start = name.split(":")[0], int(name.split(":")[1])
        _, version = store.aggregate_version(workspace, span, start)
        assert store.put_aggregate(workspace, span, start, {}, expect=version)


def _agrees_with_a_full_scan(store: Store) -> bool:
    for days in (1, 31, 90):
        got = aiuc1_pack(store, WS, days=days, fast_seconds=10, now=NOW)
        want = aiuc1_pack(store, WS, days=days, fast_seconds=10, now=NOW, scan=True)
        got_o = oversight(store, WS, days=days, fast_seconds=10, now=NOW)
        want_o = oversight(store, WS, days=days, fast_seconds=10, now=NOW, scan=True)
        if _normal(got) != _normal(want) or _normal(got_o) != _normal(want_o):
            return False
    return True


@pytest.fixture
def ledger(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    clock = install_clock(monkeypatch)
    services = Services(
        Settings(data_dir=tmp_path / "data", checkpoint_every=7),
        store,
        FileSigner(tmp_path / "data"),
    )
    seed_october(services, clock)
    _mixed(store, random.Random(7), NOV_1 + 5 * DAY, 160)
    return store


@pytest.mark.slow  # runs first among the tests spread one by one (tests/conftest.py)
def test_a_rebuild_gives_back_what_a_full_scan_says(ledger: Store) -> None:
    kept = _every_bucket(ledger, WS)
    _forget_aggregates(ledger, WS)
    assert not _agrees_with_a_full_scan(ledger)  # the old ledger: Home and Evidence count 0
    done = rebuild(ledger, WS)
    head = ledger.head(WS)
    assert head is not None and done.through == head.seq and done.retries == 0
    assert _agrees_with_a_full_scan(ledger)
    # What the appends had folded, exactly: the same aggregates, key by key.
    assert _normal(_every_bucket(ledger, WS)) == _normal(kept)
    # Again: nothing changes (idempotent).
    rebuild(ledger, WS)
    assert _normal(_every_bucket(ledger, WS)) == _normal(kept)


class _AppendsMeanwhile:
    """The store, with an append landing in the hour being rebuilt between the rebuild's
    read of an aggregate's version and its conditional put (the race the version check
    is for), and another while the first pass reads the ledger."""

    def __init__(self, store: Store, ts: int) -> None:
        self.store, self.ts, self.n = store, ts, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def _append(self) -> None:
        self.n += 1
        rec = {"check_id": f"late{self.n}", "ts": self.ts, "app": "shop", "tool": "refund_create",
               "result": "stop", "severity": "high", "amount": "5", "currency": "EUR",
               "agent": {"name": "cursor"}, "rules": []}  # fmt: skip
        self.store.append(WS, "check", f"late-{self.n}", rec, ts=self.ts)

    def entries_with_records(self, workspace: str, **kw: Any) -> Any:
        for i, item in enumerate(self.store.entries_with_records(workspace, **kw)):
            if i == 3 and not kw:
                self._append()  # during the first pass
            yield item

    def put_aggregate(self, workspace: str, span: str, start: int, *a: Any, **kw: Any) -> bool:
        if start == self.ts // SPANS[span] and self.n < 4:
            self._append()  # after the version was read: this put must fail
        return self.store.put_aggregate(workspace, span, start, *a, **kw)


def test_appends_during_the_rebuild_are_counted_once(ledger: Store) -> None:
    _forget_aggregates(ledger, WS)
    last = ledger.head(WS)
    assert last is not None
    racing = _AppendsMeanwhile(ledger, last.ts)
    done = rebuild(racing, WS)  # type: ignore[arg-type]
    assert racing.n >= 3 and done.retries >= 2
    assert _agrees_with_a_full_scan(ledger)
    late = ledger.aggregate_buckets(WS, last.ts // SPANS["hour"], last.ts // SPANS["hour"] + 1)
    entries = list(ledger.entries(WS))
    in_hour = [e for e in entries if e.ts // SPANS["hour"] == last.ts // SPANS["hour"]]
    assert late[0][1]["entries"] == len(in_hour)


# --- the command ------------------------------------------------------------------------
def _run(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    return subprocess.run(
        [sys.executable, "-m", "claros.aggregates", *args],
        capture_output=True, text=True, env=environ, timeout=120,
    )  # fmt: skip


def _refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_command_rebuilds_and_refuses_plainly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    local = open_store(Settings(data_dir=data), create=True)
    try:
        for i in range(5):
            local.append(WS, "check", f"c{i}", {"result": "allow", "agent": {"name": "cc"}},
                         ts=NOV_1 + i * 1000)  # fmt: skip
        want = _every_bucket(local, WS)
        _forget_aggregates(local, WS)
    finally:
        local.close()
    done = _run("rebuild", "--data", str(data), "--workspace", WS)
    assert done.returncode == 0, done.stderr
    assert f"rebuilt the aggregates of {WS} from 5 entries through seq 5" in done.stdout
    again = open_store(Settings(data_dir=data), create=False)
    try:
        assert _normal(_every_bucket(again, WS)) == _normal(want)
    finally:
        again.close()
    _refused(_run("rebuild", "--data", str(data), "--workspace", "nope"),
             "no workspace 'nope' here: nothing to rebuild")  # fmt: skip
    _refused(_run("rebuild", "--data", str(data), "--workspace", "Bad Name"), "workspace name")
    typo = tmp_path / "typo"
    _refused(_run("rebuild", "--data", str(typo), "--workspace", WS), f"no Claros data at {typo}")
    assert not typo.exists()
    usage = _run("rebuild", "--data", str(data))
    assert usage.returncode == 2 and "--workspace" in usage.stderr
    assert "rebuild" in _run("--help").stdout


def test_an_aggregate_is_replaced_only_at_the_version_read(store: Store) -> None:
    assert store.aggregate_version(WS, "hour", 7) == (None, "absent")
    assert store.put_aggregate(WS, "hour", 7, {"entries": 1}, expect="absent") is True
    assert store.put_aggregate(WS, "hour", 7, {"entries": 9}, expect="absent") is False
    bucket, version = store.aggregate_version(WS, "hour", 7)
    assert bucket == {"entries": 1}
    store.append(WS, "check", "c1", {"result": "allow"}, ts=7 * SPANS["hour"] + 5)
    moved, newer = store.aggregate_version(WS, "hour", 7)
    assert newer != version and moved is not None and moved["entries"] == 2
    assert store.put_aggregate(WS, "hour", 7, {"entries": 9}, expect=version) is False
    assert store.put_aggregate(WS, "hour", 7, {"entries": 3}, expect=newer) is True
    assert store.aggregate_buckets(WS, 7, 8) == [(7, {"entries": 3})]
