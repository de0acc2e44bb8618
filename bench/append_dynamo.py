"""Appends to one workspace on DynamoDB (moto behind ThreadedMotoServer, over HTTP as boto3
talks to DynamoDB), 1, 4, 16 and 64 writer threads: group commit (today's append) against
the append before it (each append racing for the head alone, ``group_commit=False``),
in one run, interleaved (old, new, old, new ...), ``BENCH_ROUNDS`` rounds (default 3).
A run takes no new append after ``BENCH_APPEND_SECONDS`` (default 10 s): the old path
manages under one append a second with 64 writers, so without the cap it alone would take
twenty minutes; a run cut short is marked ``cut at N s`` and its appends/s is what it did
in that time (the appends already in flight finish and count), and so are its retries and
gave-up appends: fewer than a run to the end would show.

Per configuration: appends/s, latency p50/p99 of one append, retries (a transaction lost
to another writer) and gave-up appends (``ChainBusyError``: what the API answers 503), and
the new figures as ratios to the old. moto's timings say nothing about DynamoDB's latency
(docs/deploy.md works out the ceiling on the real service); the ratios show what sharing
transactions does to the same work. The tables come from template.yaml, moto is patched
as in the tests (tests/aws.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from bench.append import sample_row
from claros.store.base import ChainBusyError

WRITERS = (1, 4, 16, 64)
PROCESSES = (4, 16)  # writer processes (main_processes)
CAP_SECONDS = float(os.environ.get("BENCH_APPEND_SECONDS", "10"))


@dataclass
class Run:
    name: str
    writers: int
    appends: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    retries: int = 0
    cut: bool = False  # stopped taking appends at CAP_SECONDS
    gave_up: int = 0
    transactions: int = 0

    @property
    def per_second(self) -> float:
        return self.appends / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def moto_server() -> Iterator[tuple[Any, dict[str, str]]]:
    """A ThreadedMotoServer with the template's tables; (boto3 client, table names)."""
    import boto3
    import httpx
    from botocore.config import Config
    from moto.server import ThreadedMotoServer

    from tests.aws import patch_moto_dynamodb, tables_from_template

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                            "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
            mp.setitem(os.environ, name, value)
        patch_moto_dynamodb(mp)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            # moto keeps its state per process, not per server: start from an empty one
            # (a test run before this in the same process may have left its tables).
            httpx.post(f"http://{host}:{port}/moto-api/reset", timeout=30).raise_for_status()
            client = boto3.client(
                "dynamodb",
                region_name="us-east-1",
                endpoint_url=f"http://{host}:{port}",
                # Every writer thread its own connection: the pool must not queue them.
                config=Config(max_pool_connections=256, retries={"max_attempts": 1}),
            )
            yield client, tables_from_template(client)
        finally:
            server.stop()


def run_once(client: Any, tables: dict[str, str], writers: int, per: int, new: bool,
             workspace: str) -> Run:  # fmt: skip
    from claros.store.dynamo import DynamoStore
    from tests.aws import STORE_TABLES

    store = DynamoStore(
        client, **{arg: tables[lid] for arg, lid in STORE_TABLES.items()}, group_commit=new
    )
    run = Run("group commit" if new else "before (racing)", writers)
    lock = threading.Lock()

    def retried() -> None:
        with lock:
            run.retries += 1

    store.on_retry = retried
    barrier = threading.Barrier(writers + 1)

    deadline = [0.0]

    def body(w: int) -> None:
        barrier.wait()
        for i in range(per):
            if time.perf_counter() > deadline[0]:
                run.cut = True
                break
            began = time.perf_counter()
            try:
                store.append(workspace, "check", f"chk_{w:03d}_{i:06d}", sample_row(w * per + i))
            except ChainBusyError:
                with lock:
                    run.gave_up += 1
                continue
            took = time.perf_counter() - began
            with lock:
                run.appends += 1
                run.latencies.append(took)

    threads = [threading.Thread(target=body, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + CAP_SECONDS
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    run.seconds = time.perf_counter() - start
    run.transactions = store._group.transactions
    head = store.head(workspace)
    assert head is not None and head.seq == run.appends, "the chain lost or gained appends"
    return run


def _median_run(runs: list[Run]) -> Run:
    """The run with the median throughput (its own latencies, retries and give-ups)."""
    return sorted(runs, key=lambda r: r.per_second)[len(runs) // 2]


def _print(writers: int, old: list[Run], new: list[Run], *, unit: str = "writer threads",
           before: str = "before") -> dict[str, Any]:  # fmt: skip
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## DynamoDB (moto server) append, one workspace, {writers} {unit}"
          f"   (load average {load}, {len(old)} rounds, median run; before: {before})")  # fmt: skip
    print(f"{'':22} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'retries/append':>15}"
          f" {'gave up':>8} {'appends/txn':>12}")  # fmt: skip
    rows = {}
    for name, runs in (("before", old), ("group commit", new)):
        r = _median_run(runs)
        tried = r.appends + r.gave_up
        # Writer processes: what a transaction carried is not counted (a dash).
        none = f"{'1.0':>12}" if unit == "writer threads" else f"{'-':>12}"
        per_txn = f"{r.appends / r.transactions:12.1f}" if r.transactions else none
        label = f"{name}, cut at {CAP_SECONDS:g} s" if any(x.cut for x in runs) else name
        print(f"{label:22} {r.per_second:10.1f} {r.pct(0.5) * 1e3:8.1f} {r.pct(0.99) * 1e3:8.1f}"
              f" {r.retries / max(tried, 1):15.2f} {r.gave_up:8d} {per_txn}")  # fmt: skip
        rows[name] = {"per_second": r.per_second, "p50_ms": r.pct(0.5) * 1e3,
                      "p99_ms": r.pct(0.99) * 1e3, "retries": r.retries, "gave_up": r.gave_up,
                      "appends": r.appends, "min_per_second": min(x.per_second for x in runs),
                      "max_per_second": max(x.per_second for x in runs),
                      "cut_at_s": CAP_SECONDS if any(x.cut for x in runs) else None}  # fmt: skip
    b, n = rows["before"], rows["group commit"]
    ratio = n["per_second"] / b["per_second"] if b["per_second"] else float("inf")
    p99 = n["p99_ms"] / b["p99_ms"] if b["p99_ms"] else float("nan")
    spread = f"{min(x.per_second for x in new) / max(x.per_second for x in old):.1f}"
    print(f"{'ratio new/old':22} {ratio:10.1f}x{'':7} {p99:8.2f}x   (throughput ratio of the"
          f" worst new run to the best old run: {spread}x)")  # fmt: skip
    return {"title": f"DynamoDB group commit, {writers} {unit}", "rows": rows,
            "throughput_ratio": ratio, "load_average": load}  # fmt: skip


def main(writers_list: tuple[int, ...] = WRITERS, total: int | None = None,
         processes_list: tuple[int, ...] = PROCESSES) -> list[dict[str, Any]]:  # fmt: skip
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    out = []
    with moto_server() as (client, tables):
        for writers in writers_list:
            # Enough appends per writer for a steady state, few enough that the old path
            # (a few appends/s under contention) finishes in seconds.
            per = max(4, (total or 192) // writers) if writers > 1 else (total or 96) // 2
            old: list[Run] = []
            new: list[Run] = []
            for r in range(rounds):
                old.append(run_once(client, tables, writers, per, False, f"old-{writers}-{r}"))
                new.append(run_once(client, tables, writers, per, True, f"new-{writers}-{r}"))
            out.append(_print(writers, old, new))
        out += _processes(client, tables, processes_list, total)
    return out


if __name__ == "__main__":
    main()


# --- processes: each writer its own process and store, as Lambda environments are ------

# A writer process: its own boto3 client and DynamoStore, one append at a time. It says
# "ready", waits for "go" on stdin, appends until its count or the deadline, and prints
# one JSON line: its latencies, retries and gave-up appends. PYTHONPATH picks the code
# (BENCH_APPEND_GROUP_BEFORE: the layer at that git revision, first on the path).
_WORKER = """
import json, os, sys, time
import boto3
from botocore.config import Config
from claros.store.base import ChainBusyError
from claros.store.dynamo import DynamoStore
from bench.append import sample_row
a = json.loads(sys.argv[1])
client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=a["endpoint"],
                      config=Config(retries={"max_attempts": 1}))
options = {} if a["pending"] is None else {"pending_appends": a["pending"]}
store = DynamoStore(client, **a["tables"], **options)
out = {"latencies": [], "retries": 0, "gave_up": 0, "cut": False}
def retried():
    out["retries"] += 1
store.on_retry = retried
print("ready", flush=True)
sys.stdin.readline()
deadline = time.perf_counter() + a["cap"]
for i in range(a["per"]):
    if time.perf_counter() > deadline:
        out["cut"] = True
        break
    began = time.perf_counter()
    try:
        store.append(a["workspace"], "check", f"chk_{a['w']:03d}_{i:06d}",
                     sample_row(a["w"] * a["per"] + i))
    except ChainBusyError:
        out["gave_up"] += 1
        continue
    out["latencies"].append(time.perf_counter() - began)
print(json.dumps(out), flush=True)
"""


def _before_layer(rev: str, where: str) -> str:
    """The layer's code at git revision ``rev`` (BENCH_APPEND_GROUP_BEFORE), unpacked in
    ``where``: the "before" writers run it."""
    import io
    import subprocess
    import tarfile
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "archive", rev, "layers/claros_common/claros"],
        cwd=repo, capture_output=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(where, filter="data")
    return str(Path(where) / "layers" / "claros_common")


def run_processes(endpoint: str, tables: dict[str, str], writers: int, per: int,
                  path: str | None, pending: bool | None, name: str, workspace: str,
                  client: Any) -> Run:  # fmt: skip
    """``writers`` processes × ``per`` appends to one workspace; ``path`` first on the
    writers' PYTHONPATH (None: this tree's code)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from claros.store.dynamo import DynamoStore
    from tests.aws import STORE_TABLES

    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in (path, str(repo)) if p])
    store_tables = {arg: tables[lid] for arg, lid in STORE_TABLES.items()}
    procs = []
    for w in range(writers):
        args = {"endpoint": endpoint, "tables": store_tables, "per": per, "w": w,
                "workspace": workspace, "cap": CAP_SECONDS, "pending": pending}  # fmt: skip
        procs.append(subprocess.Popen(  # noqa: S603 - this interpreter, our own script
            [sys.executable, "-c", _WORKER, json.dumps(args)], cwd=repo, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        ))  # fmt: skip
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    run = Run(name, writers)
    for p in procs:
        assert p.stdout is not None
        got = json.loads(p.stdout.readline())
        p.wait(60)
        p.stdout.close()
        if p.stdin is not None:
            p.stdin.close()
        run.latencies += got["latencies"]
        run.retries += got["retries"]
        run.gave_up += got["gave_up"]
        run.cut = run.cut or got["cut"]
    run.seconds = time.perf_counter() - start
    run.appends = len(run.latencies)
    store = DynamoStore(client, **store_tables)
    head = store.head(workspace)
    assert (head.seq if head else 0) == run.appends, "the chain lost or gained appends"
    return run


def main_processes(processes_list: tuple[int, ...] = PROCESSES,
                   total: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Writer processes on their own moto server (``main`` runs them on its own)."""
    with moto_server() as (client, tables):
        return _processes(client, tables, processes_list, total)


def _processes(client: Any, tables: dict[str, str], processes_list: tuple[int, ...],
               total: int | None) -> list[dict[str, Any]]:  # fmt: skip
    """Writer processes (Lambda environments), the code before against this tree's,
    interleaved: before = the layer at BENCH_APPEND_GROUP_BEFORE (a git revision) if set,
    else this tree with ``pending_appends=False`` (appends that lose only retry)."""
    import tempfile

    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    rev = os.environ.get("BENCH_APPEND_GROUP_BEFORE")
    out = []
    with tempfile.TemporaryDirectory(prefix="append-before-") as where:
        before_path = _before_layer(rev, where) if rev else None
        before: tuple[str | None, bool | None] = (before_path, None) if rev else (None, False)
        label = f"before ({rev})" if rev else "before (no queue)"
        endpoint = client.meta.endpoint_url
        for writers in processes_list:
            per = max(4, (total or 256) // writers)
            old: list[Run] = []
            new: list[Run] = []
            for r in range(rounds):
                old.append(run_processes(endpoint, tables, writers, per, before[0],
                                         before[1], label, f"pold-{writers}-{r}",
                                         client))  # fmt: skip
                new.append(run_processes(endpoint, tables, writers, per, None, True,
                                         "pending queue", f"pnew-{writers}-{r}",
                                         client))  # fmt: skip
            out.append(_print(writers, old, new, unit="processes", before=label))
    return out
