"""What the guard adds to a call, set up as a user runs it: the example shop server
(``examples/shop_server.py``, stdio), a separate ``claros serve`` process with checkpoint
signing on (bench/workspace.py: 20 rules per write, a mapping with a fetch), ``claros
guard`` (the console script) in front of the shop server, and one MCP SDK client. The
baseline is the same client calling the same shop server directly.

* a read (``order_read``, ``readOnlyHint``): relayed, never checked;
* an allowed write (``refund_create`` of app ``shop``): checked against 20 rules with
  ``POST /v1/check``, then relayed; its outcome is reported in the background;
* an allowed write that needs a fetch (``refund_create`` of app ``shop-fetch``): on the
  first call the check answers "need", the guard reads the order (``order_read``) and
  checks again; from then on (every measured call: the warm-up makes the first) the guard
  reads the order ahead and checks once (docs/guard.md, "The record read ahead").

The three sessions stay open side by side; each round calls direct, then through the
guard (ABAB), ``GUARD_BENCH_CALLS`` calls of each kind per round (default 100), at least
3 rounds. Printed per kind: p50 / p90 / p99 direct and through the guard (p50 of the fastest
round, p90 and p99 over all rounds), the added p50 (fastest and median round) and the
ratio, and beside the wall times the CPU time per call of the guard process and of the
``claros serve`` process while the guarded calls ran (Linux /proc; the wrapped shop
server's own CPU is the same on both sides and not counted). On a machine whose load is
above its core count, CPU time turns into wall time several times over: read the added ms
with the load average and the CPU columns. Targets (issue 14): a checked write adds
<= 3 ms p50, one with a fetch <= 5 ms. ``python -m bench guard``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from bench.workspace import SHOP, SHOP_FETCH, claros_command, seed, serve

SHOP_SERVER = Path(__file__).resolve().parent.parent / "examples" / "shop_server.py"
CALLS = int(os.environ.get("GUARD_BENCH_CALLS", "100"))
WARMUP = 20

Call = Callable[[], Awaitable[Any]]


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu(pid: int | None) -> float:
    """Seconds of CPU (user + system) process ``pid`` has used; 0 where /proc is not."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(pid: int) -> dict[int, str]:
    """The child processes of ``pid`` and their command lines (Linux /proc)."""
    found: dict[int, str] = {}
    try:
        entries = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    except OSError:
        return found
    for entry in entries:
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found[int(entry.name)] = cmdline.decode(errors="replace")
    return found


def _guard_pid(before: dict[int, str]) -> int | None:
    """The ``claros guard`` process started since ``before`` was taken."""
    for pid, cmdline in _children(os.getpid()).items():
        if pid not in before and " guard " in f" {cmdline} ":
            return pid
    return None


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


async def _time(call: Call, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


def _caller(client: Client, tool: str, arguments: dict[str, Any]) -> Call:
    async def call() -> None:
        result = await client.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")

    return call


Runs = dict[str, list[list[float]]]


async def _measure(url: str, key: str, calls: int, rounds: int, server: int) -> Runs:
    env = {**os.environ, "CLAROS_URL": url, "CLAROS_KEY": key, "CLAROS_LOG": "WARNING",
           "CLAROS_PEER_DIR": tempfile.mkdtemp(prefix="cb")}  # fmt: skip
    python = sys.executable
    direct = StdioServerParameters(command=python, args=[str(SHOP_SERVER)], env=env)
    claros = claros_command()

    def guarded(app: str) -> StdioServerParameters:
        args = [*claros[1:], "guard", "--app", app, "--", python, str(SHOP_SERVER)]
        return StdioServerParameters(command=claros[0], args=args, env=env)

    read = ("order_read", {"id": "1187"})
    write = ("refund_create", {"order": "1188", "amount": 1, "reason": "damaged on arrival"})
    async with AsyncExitStack() as stack:
        plain = await stack.enter_async_context(Client(direct))
        before = _children(os.getpid())
        shop = await stack.enter_async_context(Client(guarded(SHOP)))
        shop_pid = _guard_pid(before)
        before = _children(os.getpid())
        fetching = await stack.enter_async_context(Client(guarded(SHOP_FETCH)))
        fetch_pid = _guard_pid(before)
        # (name, baseline call, guarded call, guard process): the baseline of each is the
        # direct call.
        pairs = [
            ("read (relayed)", _caller(plain, *read), _caller(shop, *read), shop_pid),
            ("allowed write, 20 rules", _caller(plain, *write), _caller(shop, *write), shop_pid),
            ("allowed write, 20 rules + fetch", _caller(plain, *write),
             _caller(fetching, *write), fetch_pid),
        ]  # fmt: skip
        for _, base, through, _pid in pairs:
            await _time(base, min(WARMUP, calls))
            await _time(through, min(WARMUP, calls))
        out: Runs = {}
        for _ in range(max(3, rounds)):
            for name, base, through, pid in pairs:
                out.setdefault(f"{name}/direct", []).append(await _time(base, calls))
                guard_cpu, server_cpu = _cpu(pid), _cpu(server)
                out.setdefault(f"{name}/guard", []).append(await _time(through, calls))
                cpu = [(_cpu(pid) - guard_cpu) / calls, (_cpu(server) - server_cpu) / calls]
                out.setdefault(f"{name}/cpu", []).append(cpu)
        return out


def main(calls: int = CALLS, rounds: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="claros-bench-") as tmp:
        data = Path(tmp)
        keys = seed(data)
        with serve(data) as served:
            runs = anyio.run(_measure, served.url, keys.agent, calls, rounds, served.proc.pid)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## The guard's added latency   (load average {load}, {os.cpu_count()} cores)")
    print(f"MCP SDK client over stdio; {calls} calls of each kind per round, "
          f"{len(runs['read (relayed)/direct'])} rounds, direct and guarded in turn (ABAB); "
          "p50 of the fastest round, p90/p99 over all rounds; added p50: fastest round "
          "(median round); CPU ms per guarded call (median round): guard process, "
          "claros serve")  # fmt: skip
    print(f"{'':32} {'direct p50/p90/p99':>20} {'guard p50/p90/p99':>20} {'added p50':>17}"
          f" {'ratio':>6} {'cpu guard':>9} {'server':>7}  target")  # fmt: skip
    rows = []
    for name, target in (("read (relayed)", None), ("allowed write, 20 rules", 3.0),
                         ("allowed write, 20 rules + fetch", 5.0)):  # fmt: skip
        direct, guard = runs[f"{name}/direct"], runs[f"{name}/guard"]
        added = sorted(_pct(g, 0.5) - _pct(d, 0.5) for d, g in zip(direct, guard, strict=True))
        d50 = min(_pct(d, 0.5) for d in direct)
        g50 = min(_pct(g, 0.5) for g in guard)
        every_d = [x for r in direct for x in r]
        every_g = [x for r in guard for x in r]
        d90, d99 = _pct(every_d, 0.9), _pct(every_d, 0.99)
        g90, g99 = _pct(every_g, 0.9), _pct(every_g, 0.99)
        guard_cpu = statistics.median(c[0] for c in runs[f"{name}/cpu"]) * 1000
        server_cpu = statistics.median(c[1] for c in runs[f"{name}/cpu"]) * 1000
        verdict = "" if target is None else f"<= {target:g} ms: " + (
            "met" if added[0] <= target else "not met")  # fmt: skip
        mid = statistics.median(added)
        print(f"{name:32} {d50:6.2f}/{d90:6.2f}/{d99:6.2f} {g50:6.2f}/{g90:6.2f}/{g99:6.2f}"
              f" {added[0]:6.2f} ({mid:6.2f}) {g50 / d50:6.2f} {guard_cpu:9.2f} "
              f"{server_cpu:7.2f}  {verdict}")  # fmt: skip
        rows.append(
            {"kind": name, "direct_p50_ms": d50, "direct_p90_ms": d90, "direct_p99_ms": d99,
             "guard_p50_ms": g50, "guard_p90_ms": g90, "guard_p99_ms": g99,
             "added_p50_ms": added[0], "added_p50_median_ms": mid, "ratio_p50": g50 / d50,
             "guard_cpu_ms_per_call": guard_cpu, "server_cpu_ms_per_call": server_cpu,
             "target_p50_ms": target}
        )  # fmt: skip
    return {"title": "guard", "rows": rows, "load_average": load}


if __name__ == "__main__":
    main()
