"""Appends to one SQLite ledger from 1, 4 and 16 threads: group commit (today's append)
against one transaction per append (``group_commit=False``, the append before it), in one
run, interleaved (old, new, old, new ...), ``BENCH_ROUNDS`` rounds (default 3); appends/s,
p50/p99 of one append, appends per transaction, and the ratio new/old.

Both use the store's settings (WAL, synchronous=FULL by default: every commit syncs the
WAL; ``CLAROS_SQLITE_SYNC=normal`` syncs only at WAL checkpoints), so what group commit
saves here is one commit, and one sync, per append, and the write lock's handoffs (a
waiting writer sleeps in SQLite's busy handler).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.append import sample_row
from bench.append_dynamo import Run
from claros.store.sqlite import SqliteStore

WRITERS = (1, 4, 16)


def run_once(root: Path, writers: int, per: int, new: bool, tag: str) -> Run:
    store = SqliteStore(root / f"{tag}.db", group_commit=new)
    run = Run("group commit" if new else "before", writers)
    lock = threading.Lock()
    barrier = threading.Barrier(writers + 1)

    def body(w: int) -> None:
        barrier.wait()
        mine = []
        for i in range(per):
            began = time.perf_counter()
            store.append("bench", "check", f"chk_{w:03d}_{i:06d}", sample_row(w * per + i))
            mine.append(time.perf_counter() - began)
        with lock:
            run.latencies += mine
            run.appends += len(mine)

    threads = [threading.Thread(target=body, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    run.seconds = time.perf_counter() - start
    run.transactions = store._group.transactions if new else run.appends
    head = store.head("bench")
    assert head is not None and head.seq == writers * per, "the chain lost or gained appends"
    store.close()
    return run


def main(writers_list: tuple[int, ...] = WRITERS, total: int = 1600) -> list[dict[str, Any]]:
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for writers in writers_list:
            per = total // writers
            old: list[Run] = []
            new: list[Run] = []
            for r in range(rounds):
                old.append(run_once(Path(tmp), writers, per, False, f"old-{writers}-{r}"))
                new.append(run_once(Path(tmp), writers, per, True, f"new-{writers}-{r}"))
            out.append(_print(writers, old, new))
    return out


def _print(writers: int, old: list[Run], new: list[Run]) -> dict[str, Any]:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## SQLite append, one ledger, {writers} writers   (load average {load}, "
          f"{len(old)} rounds, median run)")  # fmt: skip
    print(f"{'':14} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'appends/txn':>12}")
    rows = {}
    for name, runs in (("before", old), ("group commit", new)):
        r = sorted(runs, key=lambda x: x.per_second)[len(runs) // 2]
        per_txn = r.appends / r.transactions if r.transactions else 0.0
        print(f"{name:14} {r.per_second:10.0f} {r.pct(0.5) * 1e3:8.2f} {r.pct(0.99) * 1e3:8.2f}"
              f" {per_txn:12.1f}")  # fmt: skip
        rows[name] = {"per_second": r.per_second, "p50_ms": r.pct(0.5) * 1e3,
                      "p99_ms": r.pct(0.99) * 1e3, "appends_per_txn": per_txn}  # fmt: skip
    ratio = rows["group commit"]["per_second"] / rows["before"]["per_second"]
    p99 = rows["group commit"]["p99_ms"] / rows["before"]["p99_ms"]
    print(f"{'ratio new/old':14} {ratio:9.2f}x {'':8} {p99:7.2f}x")
    return {"title": f"SQLite group commit, {writers} writers", "rows": rows,
            "throughput_ratio": ratio, "load_average": load}  # fmt: skip


if __name__ == "__main__":
    main()
