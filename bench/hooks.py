"""What a Claude Code hook costs on a call Claros never checks: ``claros hook pre`` for
``Read``, run as Claude Code runs it (the installed ``claros`` console script, a new
process, the hook's JSON on stdin), against ``python -c pass`` (the interpreter starting
and stopping, which no Python hook can beat).

The two are interleaved (A B A B ...) so that a burst of load on this shared machine hits
both alike, in ``ROUNDS`` rounds of ``PAIRS`` pairs. Each run is timed on the wall clock and
by CPU time (``resource.getrusage(RUSAGE_CHILDREN)``, user + system, before and after the
child is waited for). Printed: p50 and min of each, per round and over all, their ratio,
and the load average before and after.

Target (issue 11, "Claude Code hooks never loosen Claude Code"): under 150 ms p50 wall.
``python -m bench hooks`` (``HOOK_BENCH_PAIRS``, ``HOOK_BENCH_ROUNDS`` change the counts).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PAIRS = int(os.environ.get("HOOK_BENCH_PAIRS", "20"))
ROUNDS = max(3, int(os.environ.get("HOOK_BENCH_ROUNDS", "3")))
TARGET_MS = 150.0
EVENT = {
    "session_id": "bench",
    "hook_event_name": "PreToolUse",
    "tool_name": "Read",
    "tool_input": {"file_path": "README.md"},
    "tool_use_id": "toolu_bench",
}


def console_script() -> str:
    """The ``claros`` installed next to this Python (the virtualenv's), else on PATH."""
    beside = Path(sys.executable).parent / "claros"
    found = str(beside) if beside.exists() else shutil.which("claros")
    if not found:
        raise SystemExit("bench hooks: no claros console script (pip install -e . first)")
    return found


def _dead_url() -> str:
    """A loopback port nobody listens on: the hook must not need Claros for a Read."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float, bytes]:
    cpu = _cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench hooks: {argv} exited {done.returncode}: {done.stderr[-300:]!r}")
    return wall, _cpu() - cpu, done.stdout


def _ms(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples) * 1000, min(samples) * 1000


def main(pairs: int = PAIRS, rounds_: int = ROUNDS) -> dict[str, Any]:
    claros = console_script()
    state = tempfile.mkdtemp(prefix="claros-bench-hooks-")
    env = {
        **os.environ,
        "CLAROS_URL": _dead_url(),
        "CLAROS_KEY": "ck_agent_bench_not_a_real_key",
        "CLAROS_STATE_DIR": state,
        "CLAROS_PEER_DIR": tempfile.mkdtemp(prefix="cbh"),
    }
    hook = [claros, "hook", "pre"]
    base = [sys.executable, "-c", "pass"]
    stdin = json.dumps(EVENT).encode()
    load_before = os.getloadavg()
    _run(hook, stdin, env)  # warm the page cache and bytecode once
    _run(base, b"", env)
    rounds: list[dict[str, list[float]]] = []
    for _ in range(max(3, rounds_)):
        got: dict[str, list[float]] = {"hook": [], "hook_cpu": [], "base": [], "base_cpu": []}
        for _ in range(pairs):
            wall, cpu, out = _run(hook, stdin, env)
            if out.strip():
                raise SystemExit(f"bench hooks: a Read got an answer, expected none: {out!r}")
            got["hook"].append(wall)
            got["hook_cpu"].append(cpu)
            wall, cpu, _ = _run(base, b"", env)
            got["base"].append(wall)
            got["base_cpu"].append(cpu)
        rounds.append(got)
    load_after = os.getloadavg()
    shutil.rmtree(state, ignore_errors=True)

    shape = f"{len(rounds)} rounds x {pairs} ABAB pairs"
    print(f"\n## claros hook pre for Read vs python -c pass ({shape})")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")  # fmt: skip
    print(
        f"{'':10} {'hook p50':>9} {'min':>7} {'cpu p50':>8} {'base p50':>9} {'min':>7} "
        f"{'cpu p50':>8} {'ratio p50':>9} {'ratio cpu':>9}"
    )
    rows = []
    every = {k: [v for r in rounds for v in r[k]] for k in rounds[0]}
    for name, got in [*((f"round {i + 1}", r) for i, r in enumerate(rounds)), ("all", every)]:
        h50, hmin = _ms(got["hook"])
        b50, bmin = _ms(got["base"])
        hc50 = statistics.median(got["hook_cpu"]) * 1000
        bc50 = statistics.median(got["base_cpu"]) * 1000
        ratio, cpu_ratio = h50 / b50, hc50 / bc50 if bc50 else float("inf")
        print(
            f"{name:10} {h50:7.1f}ms {hmin:5.1f}ms {hc50:6.1f}ms {b50:7.1f}ms {bmin:5.1f}ms "
            f"{bc50:6.1f}ms {ratio:9.2f} {cpu_ratio:9.2f}"
        )
        rows.append({"name": name, "hook_p50_ms": h50, "hook_min_ms": hmin, "hook_cpu_p50_ms": hc50,
                     "base_p50_ms": b50, "base_min_ms": bmin, "base_cpu_p50_ms": bc50,
                     "ratio_p50": ratio, "ratio_cpu_p50": cpu_ratio})  # fmt: skip
    h50 = rows[-1]["hook_p50_ms"]
    verdict = "ok" if h50 < TARGET_MS else "MISSED"
    print(f"target: claros hook pre for Read under {TARGET_MS:.0f} ms p50: {h50:.1f} ms, {verdict}")
    return {"title": "hooks", "rows": rows, "load_before": load_before, "load_after": load_after}


if __name__ == "__main__":
    main()
