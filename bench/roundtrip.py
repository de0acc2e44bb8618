"""Where the guard's added time goes, the part outside the guard process: the guard's own
HTTP client (``claros_guard.keepalive.KeepAlivePool``, what ``claros guard`` sends its
checks with) against a separate ``claros serve`` with checkpoint signing on
(bench/workspace.py: 20 rules, a mapping with a fetch), one request at a time, as the
guard sends them.

* ``GET /v1/me``: the HTTP round trip and the key check, the floor of any request;
* ``POST /v1/check`` that Claros answers "need" (app ``shop-fetch``): the extra round trip a
  write with a fetch pays before its read;
* ``POST /v1/check`` with 20 rules, allowed: the check on a guarded write's path.

Each kind in turn (ABC, ``repeat`` rounds of ``calls``); printed: p50 per round, the fastest
single request, and the server process's CPU ms per request per round (Linux /proc). The
bench checks what it measures: the client socket has TCP_NODELAY, and every request of a
kind rode the one kept-alive connection (no reconnect). Subtract these from
``python -m bench guard``'s added ms to get the guard process's own share; a target below
the check's own p50 here is out of reach on this machine at this load.
``python -m bench roundtrip``.
"""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from bench.guard import _cpu
from bench.workspace import SHOP, SHOP_FETCH, seed, serve
from claros_guard.keepalive import KeepAlivePool

CALLS = int(os.environ.get("ROUNDTRIP_BENCH_CALLS", "150"))
WARMUP = 20


def _body(n: int, app: str) -> dict[str, Any]:
    return {
        "app": app,
        "tool": "refund_create",
        "arguments": {"order": "1188", "amount": 1, "reason": "damaged on arrival"},
        "agent": {"name": "bench", "session": "s-1", "call_id": f"rt-{n}"},
    }


def _socket_of(pool: KeepAlivePool) -> socket.socket:
    """The one kept connection's socket (after a request, the pool holds it idle)."""
    if len(pool._idle) != 1:  # noqa: SLF001 - the bench checks the pool kept one connection
        raise RuntimeError(f"the pool holds {len(pool._idle)} connections, not 1")  # noqa: SLF001
    sock = pool._idle[0].writer.get_extra_info("socket")  # noqa: SLF001
    if sock is None:
        raise RuntimeError("no socket under the kept connection")
    return sock  # type: ignore[no-any-return]


Kinds = dict[str, Callable[[], Awaitable[None]]]


def _kinds(pool: KeepAlivePool) -> Kinds:
    seq = iter(range(10**9))

    async def get() -> None:
        answer = await pool.request("GET", "/v1/me")
        if answer.status_code != 200:
            raise RuntimeError(f"GET /v1/me answered {answer.status_code}")

    async def need() -> None:
        answer = await pool.request("POST", "/v1/check", _body(next(seq), SHOP_FETCH))
        if answer.status_code != 200 or "need" not in answer.json():
            raise RuntimeError(f"the need check answered {answer.status_code}: {answer.text}")

    async def check() -> None:
        answer = await pool.request("POST", "/v1/check", _body(next(seq), SHOP))
        if answer.status_code != 200 or answer.json().get("result") != "allow":
            raise RuntimeError(f"the check answered {answer.status_code}: {answer.text}")

    return {"GET /v1/me (key checked)": get, "POST /v1/check, need": need,
            "POST /v1/check, 20 rules": check}  # fmt: skip


Runs = dict[str, list[tuple[float, float, float]]]


async def _measure(url: str, key: str, pid: int, calls: int, rounds: int) -> tuple[Runs, int]:
    pool = KeepAlivePool(url, {"Authorization": f"Bearer {key}"}, timeout=30, connect_timeout=5)
    try:
        kinds = _kinds(pool)
        for call in kinds.values():
            for _ in range(min(WARMUP, calls)):
                await call()
        sock = _socket_of(pool)
        nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        out: Runs = {}
        for _ in range(max(3, rounds)):
            for name, call in kinds.items():
                cpu, samples = _cpu(pid), []
                for _ in range(calls):
                    start = time.perf_counter()
                    await call()
                    samples.append(time.perf_counter() - start)
                per = (_cpu(pid) - cpu) / calls
                out.setdefault(name, []).append(
                    (statistics.median(samples) * 1000, min(samples) * 1000, per * 1000)
                )
        if _socket_of(pool) is not sock:
            raise RuntimeError("the pool reconnected: a request did not keep the connection")
        return out, nodelay
    finally:
        await pool.aclose()


def main(calls: int = CALLS, rounds: int = 3) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="claros-bench-") as tmp:
        data = Path(tmp)
        keys = seed(data)
        with serve(data) as served:
            runs, nodelay = anyio.run(
                _measure, served.url, keys.agent, served.proc.pid, calls, rounds
            )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## The guard's round trip to Claros   (load average {load}, {os.cpu_count()} cores)")
    print(f"the guard's HTTP client, one kept-alive connection (reused by every request: "
          f"checked), TCP_NODELAY {'on' if nodelay else 'OFF'}; {calls} requests per kind "
          f"per round, {len(next(iter(runs.values())))} rounds in turn")  # fmt: skip
    print(f"{'':28} {'p50 ms per round':>24} {'fastest':>8} {'server CPU ms per round':>26}")
    rows = []
    for name, per_round in runs.items():
        p50s = " ".join(f"{r[0]:6.2f}" for r in per_round)
        cpus = " ".join(f"{r[2]:6.2f}" for r in per_round)
        fastest = min(r[1] for r in per_round)
        print(f"{name:28} {p50s:>24} {fastest:8.2f} {cpus:>26}")
        rows.append(
            {"kind": name, "p50_ms": [r[0] for r in per_round], "fastest_ms": fastest,
             "server_cpu_ms": [r[2] for r in per_round]}
        )  # fmt: skip
    return {"title": "roundtrip", "rows": rows, "load_average": load, "nodelay": bool(nodelay)}


if __name__ == "__main__":
    main()
