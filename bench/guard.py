"""What the guard adds to a call: the same MCP SDK client calls the example shop server
directly and through ``claros guard`` (a local Claros server on loopback, no rules), 1,000
times each, and the added latency is the difference of the percentiles.

* a read (``order_read``, ``readOnlyHint``): relayed, never checked;
* an allowed write (``refund_create``): checked with ``POST /v1/check``, then relayed; its
  outcome is reported in the background.

Targets (issue "The guard"): a read adds under 0.5 ms at p50, a checked write under 3 ms.
``python -m bench guard`` (``GUARD_BENCH_CALLS`` changes the count).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from claros.auth import create_key
from claros.config import Settings
from claros.local import LocalServer
from claros.wiring import build_services

SHOP = Path(__file__).resolve().parent.parent / "examples" / "shop_server.py"
CALLS = int(os.environ.get("GUARD_BENCH_CALLS", "1000"))
WARMUP = 50


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


async def _time(call: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    for _ in range(WARMUP):
        await call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def _measure(params: StdioServerParameters, n: int) -> dict[str, list[float]]:
    async with Client(params) as client:

        async def read() -> None:
            result = await client.call_tool("order_read", {"id": "1187"})
            assert not result.is_error

        async def write() -> None:
            result = await client.call_tool("refund_create", {"order": "1188", "amount": 1})
            assert not result.is_error, result.content

        return {"read": await _time(read, n), "write": await _time(write, n)}


def main() -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="claros-bench-"))
    services = build_services(Settings(data_dir=data, checkpoint_every=100_000))
    key = create_key(services.store, "bench", "agent", person="bench@example.com")
    server = LocalServer(services, "127.0.0.1", 0).start()
    env = {
        **os.environ,
        "CLAROS_URL": server.url,
        "CLAROS_KEY": key,
        "CLAROS_LOG": "WARNING",
        "CLAROS_PEER_DIR": tempfile.mkdtemp(prefix="cb"),
    }
    direct = StdioServerParameters(command=sys.executable, args=[str(SHOP)], env=env)
    guarded = StdioServerParameters(
        command=sys.executable,
        args=["-m", "claros_guard.cli", "guard", "--app", "shop", "--", sys.executable, str(SHOP)],
        env=env,
    )
    try:
        base = anyio.run(_measure, direct, CALLS)
        through = anyio.run(_measure, guarded, CALLS)
    finally:
        server.stop()
        services.close()
    print(f"\n## The guard's added latency ({CALLS:,} calls each, MCP SDK client over stdio)")
    print(
        f"{'':28} {'direct p50':>11} {'p99':>8} {'guard p50':>10} {'p99':>8} "
        f"{'added p50':>10} {'p99':>8}  target"
    )
    rows = []
    for kind, target in (("read", 0.5), ("write", 3.0)):
        d50, d99 = _percentiles(base[kind])
        g50, g99 = _percentiles(through[kind])
        name = "read (relayed)" if kind == "read" else "allowed write (checked)"
        verdict = "ok" if g50 - d50 < target else "MISSED"
        print(
            f"{name:28} {d50:9.3f}ms {d99:6.3f}ms {g50:8.3f}ms {g99:6.3f}ms "
            f"{g50 - d50:8.3f}ms {g99 - d99:6.3f}ms  <{target} ms p50: {verdict}"
        )
        rows.append(
            {
                "kind": kind,
                "direct_p50_ms": d50,
                "direct_p99_ms": d99,
                "guard_p50_ms": g50,
                "guard_p99_ms": g99,
                "added_p50_ms": g50 - d50,
                "added_p99_ms": g99 - d99,
                "target_p50_ms": target,
            }
        )
    return {"title": "guard", "rows": rows}


if __name__ == "__main__":
    main()
