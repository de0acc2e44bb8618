"""What the guard adds to a call, set up as a user runs it: the example shop server
(``examples/shop_server.py``, stdio), a separate ``claros serve`` process with checkpoint
signing on (bench/workspace.py: 20 rules per write, a mapping with a fetch), ``claros
guard`` (the console script) in front of the shop server, and one MCP SDK client. The
baseline is the same client calling the same shop server directly.

* a read (``order_read``, ``readOnlyHint``): relayed, never checked;
* an allowed write (``refund_create`` of app ``shop``): checked against 20 rules with
  ``POST /v1/check``, then relayed; its outcome is reported in the background;
* an allowed write that needs a fetch (``refund_create`` of app ``shop-fetch``): the check
  answers "need", the guard reads the order (``order_read``) and checks again.

The three sessions stay open side by side; each round calls direct, then through the
guard (ABAB), ``GUARD_BENCH_CALLS`` calls of each kind per round (default 100), at least
3 rounds. Printed: each p50 and its added p50 (fastest and median round) and the p99 over
all rounds. Targets (issue 14): a checked write adds <= 3 ms p50, one with a fetch <= 5 ms.
``python -m bench guard``.
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


async def _measure(url: str, key: str, calls: int, rounds: int) -> dict[str, list[list[float]]]:
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
        shop = await stack.enter_async_context(Client(guarded(SHOP)))
        fetching = await stack.enter_async_context(Client(guarded(SHOP_FETCH)))
        # (name, baseline call, guarded call): the baseline of each is the direct call.
        pairs = [
            ("read (relayed)", _caller(plain, *read), _caller(shop, *read)),
            ("allowed write, 20 rules", _caller(plain, *write), _caller(shop, *write)),
            ("allowed write, 20 rules + fetch", _caller(plain, *write), _caller(fetching, *write)),
        ]
        for _, base, through in pairs:
            await _time(base, min(WARMUP, calls))
            await _time(through, min(WARMUP, calls))
        out: dict[str, list[list[float]]] = {}
        for _ in range(max(3, rounds)):
            for name, base, through in pairs:
                out.setdefault(f"{name}/direct", []).append(await _time(base, calls))
                out.setdefault(f"{name}/guard", []).append(await _time(through, calls))
        return out


def main(calls: int = CALLS, rounds: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="claros-bench-") as tmp:
        data = Path(tmp)
        keys = seed(data)
        with serve(data) as served:
            runs = anyio.run(_measure, served.url, keys.agent, calls, rounds)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## The guard's added latency   (load average {load})")
    print(f"MCP SDK client over stdio; {calls} calls of each kind per round, "
          f"{len(runs['read (relayed)/direct'])} rounds, direct and guarded in turn")  # fmt: skip
    print(f"{'':32} {'direct p50':>10} {'guard p50':>10} {'added p50':>10} {'(median)':>9}"
          f" {'guard/direct':>12} {'direct p99':>10} {'guard p99':>10}  target")  # fmt: skip
    rows = []
    for name, target in (("read (relayed)", None), ("allowed write, 20 rules", 3.0),
                         ("allowed write, 20 rules + fetch", 5.0)):  # fmt: skip
        direct, guard = runs[f"{name}/direct"], runs[f"{name}/guard"]
        added = sorted(_pct(g, 0.5) - _pct(d, 0.5) for d, g in zip(direct, guard, strict=True))
        d50 = min(_pct(d, 0.5) for d in direct)
        g50 = min(_pct(g, 0.5) for g in guard)
        d99 = _pct([s for r in direct for s in r], 0.99)
        g99 = _pct([s for r in guard for s in r], 0.99)
        verdict = "" if target is None else f"<= {target:g} ms: " + (
            "met" if added[0] <= target else "not met")  # fmt: skip
        mid = statistics.median(added)
        print(f"{name:32} {d50:8.2f}ms {g50:8.2f}ms {added[0]:8.2f}ms {mid:7.2f}ms"
              f" {g50 / d50:12.2f} {d99:8.2f}ms {g99:8.2f}ms  {verdict}")  # fmt: skip
        rows.append(
            {"kind": name, "direct_p50_ms": d50, "guard_p50_ms": g50, "added_p50_ms": added[0],
             "added_p50_median_ms": mid, "direct_p99_ms": d99, "guard_p99_ms": g99,
             "target_p50_ms": target}
        )  # fmt: skip
    return {"title": "guard", "rows": rows, "load_average": load}


if __name__ == "__main__":
    main()
