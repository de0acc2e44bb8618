"""The project's benchmark harness: time a task and its baseline in one run, print ratios.

These machines are noisy, so a figure alone means little; a ratio to a baseline measured
seconds apart on the same machine means more. Each measurement is the best of ``repeat``
runs. Peak memory is measured in a fresh child process (``ru_maxrss``), so one task's
garbage does not count against the next.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Result", "best_of", "in_child", "interleaved", "read_and_hash", "report"]


@dataclass
class Result:
    name: str
    seconds: float
    items: int
    peak_mb: float | None = None
    median_seconds: float | None = None  # set by interleaved(): min is ``seconds``
    cpu_seconds: float | None = None  # this process's CPU time in the fastest run

    @property
    def per_second(self) -> float:
        return self.items / self.seconds if self.seconds else float("inf")


def best_of(name: str, items: int, fn: Callable[[], Any], repeat: int = 3) -> Result:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return Result(name, best, items)


def interleaved(
    baseline: tuple[str, Callable[[], Any]],
    subjects: list[tuple[str, Callable[[], Any]]],
    items: int,
    repeat: int = 5,
) -> tuple[Result, list[Result]]:
    """Baseline and subjects run in turn (A B C A B C ...), ``repeat`` rounds, so drift in
    the machine's load hits them alike. Each Result holds the fastest run (``seconds``), the
    median, and the CPU time of the fastest run."""
    tasks = [baseline, *subjects]
    runs: list[list[tuple[float, float]]] = [[] for _ in tasks]
    for _ in range(max(3, repeat)):
        for i, (_, fn) in enumerate(tasks):
            cpu, start = time.process_time(), time.perf_counter()
            fn()
            runs[i].append((time.perf_counter() - start, time.process_time() - cpu))
    results = []
    for (name, _), got in zip(tasks, runs, strict=True):
        wall = sorted(w for w, _ in got)
        fastest = min(got)
        results.append(Result(name, fastest[0], items, None, statistics.median(wall), fastest[1]))
    return results[0], results[1:]


def _peak_kb() -> int:
    """This process's peak resident memory. Linux keeps ``ru_maxrss`` across exec, so a
    spawned child would report its parent's peak if that was higher; VmHWM starts afresh
    with the new program."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    start = time.perf_counter()
    items = fn(*args)
    seconds = time.perf_counter() - start
    conn.send((seconds, items, _peak_kb() / 1024))
    conn.close()


def in_child(name: str, fn: Callable[..., int], *args: Any) -> Result:
    """Run ``fn(*args)`` (which returns how many items it did) in a fresh process."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args))
    proc.start()
    seconds, items, peak = parent.recv()
    proc.join()
    return Result(name, seconds, items, peak)


def report(title: str, results: list[Result], baseline: Result) -> dict[str, Any]:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## {title}   (load average {load})")
    print(f"{'':38} {'items/s':>12} {'min s':>9} {'median s':>9} {'cpu s':>8} {'peak MB':>8}"
          f" {'x baseline':>10}")  # fmt: skip
    rows = []
    for r in [baseline, *results]:
        ratio = r.seconds / baseline.seconds * (baseline.items / r.items) if r.items else 0
        peak = f"{r.peak_mb:8.1f}" if r.peak_mb is not None else f"{'':8}"
        median = f"{r.median_seconds:9.3f}" if r.median_seconds is not None else f"{'':9}"
        cpu = f"{r.cpu_seconds:8.3f}" if r.cpu_seconds is not None else f"{'':8}"
        mark = " (baseline)" if r is baseline else ""
        print(f"{r.name:38} {r.per_second:12,.0f} {r.seconds:9.3f} {median} {cpu} {peak}"
              f" {ratio:10.2f}{mark}")  # fmt: skip
        rows.append({"name": r.name, "per_second": r.per_second, "seconds": r.seconds,
                     "median_seconds": r.median_seconds, "cpu_seconds": r.cpu_seconds,
                     "peak_mb": r.peak_mb, "ratio": ratio})  # fmt: skip
    return {"title": title, "rows": rows, "load_average": load}


def dump(results: list[dict[str, Any]]) -> str:
    return json.dumps(results, indent=2)


def read_and_hash(path: str) -> int:
    """The baseline of the verify benchmarks: read a file line by line and sha256 each."""
    n = 0
    with open(path, "rb") as fh:  # noqa: PTH123 - the baseline is the plainest read
        for line in fh:
            hashlib.sha256(line).digest()
            n += 1
    return n
