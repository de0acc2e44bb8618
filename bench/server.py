"""The server's throughput: ``POST /v1/check`` (20 rules, checkpoints signed inline) against
an authenticated ``GET /v1/me`` on the same ``claros serve`` process, at 1, 4 and 16
clients, each client one keep-alive connection, all with the same agent key.

A third request separates the HTTP and key cost from Claros's own: the same check body on
the app whose mapping needs a read first (``shop-fetch``), which Claros answers "need"
after the key check, the body's parse and validation and the mapping's lookup, with no rule
evaluated and nothing appended (the floor of any ``POST /v1/check``).

GET, need and check run in turn (GET, need, check, GET, ...) ``repeat`` rounds; each
figure is the requests/s (fastest and median round), the server process's CPU time per
request (from /proc: what the machine's load does not inflate), and latency p50/p99 over
all rounds. The bench checks that it measured what it says: every GET is a 200 for the
agent key, every check an allow that evaluated all 20 rules, every need a need, and the
checkpoints the server signed meanwhile are counted. Targets (issue 14): checks/s >= 0.8x
GET/s at 4 and 16 clients, check p99 <= 4x its p50 at 16 clients. ``python -m bench
server`` (``SERVER_BENCH_REQUESTS`` sets the requests per round and client count, default
300).
"""

from __future__ import annotations

import http.client
import json
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import Result, report
from bench.workspace import RULES, SHOP, SHOP_FETCH, WORKSPACE, seed, serve

CLIENTS = (1, 4, 16)
REQUESTS = int(os.environ.get("SERVER_BENCH_REQUESTS", "300"))


def _check_body(n: int, app: str = SHOP) -> bytes:
    return json.dumps({
        "app": app, "tool": "refund_create",
        "arguments": {"order": "1188", "amount": 12.5, "reason": "damaged on arrival"},
        "agent": {"name": "bench", "model": "claude", "session": "s-1", "call_id": f"call-{n}",
                  "via": {"guard": "claros-guard", "version": "0.1.0"}},
    }).encode()  # fmt: skip


Request = Callable[[http.client.HTTPConnection, int], None]


def _get(conn: http.client.HTTPConnection, n: int, headers: dict[str, str]) -> None:
    conn.request("GET", "/v1/me", headers=headers)
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"GET /v1/me answered {response.status}")


def _check(conn: http.client.HTTPConnection, n: int, headers: dict[str, str]) -> None:
    conn.request("POST", "/v1/check", body=_check_body(n), headers=headers)
    response = conn.getresponse()
    body = response.read()
    answer = json.loads(body) if response.status == 200 else {}
    if answer.get("result") != "allow" or len(answer.get("rules") or ()) != RULES:
        raise RuntimeError(f"POST /v1/check answered {response.status}: {body[:200]!r}")


def _need(conn: http.client.HTTPConnection, n: int, headers: dict[str, str]) -> None:
    conn.request("POST", "/v1/check", body=_check_body(n, SHOP_FETCH), headers=headers)
    response = conn.getresponse()
    body = response.read()
    if response.status != 200 or json.loads(body)["result"] != "need":
        raise RuntimeError(f"POST /v1/check (need) answered {response.status}: {body[:200]!r}")


class _Counter:
    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._n += 1
            return self._n


def _round(
    host: str, port: int, clients: int, total: int, send: Any, headers: dict[str, str],
    ids: _Counter,
) -> tuple[float, list[float]]:  # fmt: skip
    """``total`` requests over ``clients`` connections: (wall seconds, latencies)."""
    per = max(1, total // clients)
    latencies: list[float] = []
    errors: list[BaseException] = []
    conns = [http.client.HTTPConnection(host, port, timeout=60) for _ in range(clients)]
    for conn in conns:
        conn.connect()
    barrier = threading.Barrier(clients + 1)

    def body(conn: http.client.HTTPConnection) -> None:
        mine = []
        barrier.wait()
        try:
            for _ in range(per):
                start = time.perf_counter()
                send(conn, ids.next(), headers)
                mine.append(time.perf_counter() - start)
        except BaseException as exc:  # a failed client would make the figure a lie
            errors.append(exc)
        latencies.extend(mine)

    threads = [threading.Thread(target=body, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    for conn in conns:
        conn.close()
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed") from errors[0]
    return wall, latencies


def _cpu_seconds(pid: int) -> float:
    """The server process's CPU time so far (user + system): a cost the machine's load
    does not inflate the way it inflates wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


WHAT = {
    "get": "GET /v1/me (key checked)",
    "need": "POST /v1/check, need",
    "check": "POST /v1/check, 20 rules",
}


def _figures(n: int, runs: dict[str, list[tuple[float, list[float]]]],
             cpu: dict[str, list[float]]) -> dict[str, Any]:  # fmt: skip
    results = {}
    for name, got in runs.items():
        walls = sorted(w for w, _ in got)
        # "cpu s": the server's CPU time over a round, the median of the rounds.
        results[name] = Result(f"{WHAT[name]}, {n} clients", walls[0], len(got[0][1]), None,
                               statistics.median(walls), statistics.median(cpu[name]))  # fmt: skip
    get, check = results["get"], results["check"]
    table = report(f"Server throughput, {n} clients", [results["need"], check], get)
    lat = {k: [s for _, ss in v for s in ss] for k, v in runs.items()}
    p50 = {k: _pct(v, 0.5) for k, v in lat.items()}
    p99 = {k: _pct(v, 0.99) for k, v in lat.items()}
    print(f"{'latency':38} {'GET p50':>9} {'p99':>8} {'need p50':>9} {'p99':>8} {'check p50':>10}"
          f" {'p99':>8} {'check p99/p50':>14}")  # fmt: skip
    print(f"{'':38} {p50['get']:7.2f}ms {p99['get']:6.2f}ms {p50['need']:7.2f}ms"
          f" {p99['need']:6.2f}ms {p50['check']:8.2f}ms {p99['check']:6.2f}ms"
          f" {p99['check'] / p50['check']:14.2f}")  # fmt: skip
    share = check.per_second / get.per_second
    # Same requests per round, so the rates' ratio is the inverse of the times'.
    median = (get.median_seconds or 0) / (check.median_seconds or 1)
    floor = results["need"].per_second / get.per_second
    print(f"checks/s as a share of GET/s: {share:.2f} fastest rounds, {median:.2f} median rounds"
          f" (need: {floor:.2f})")  # fmt: skip
    per = {k: (r.cpu_seconds or 0) / r.items * 1000 for k, r in results.items()}
    # /proc counts CPU in clock ticks (10 ms): a tiny round can show none.
    times = f"{per['check'] / per['get']:.2f}x" if per["get"] else "too short to say"
    print(f"server CPU per request: GET {per['get']:.2f} ms, need {per['need']:.2f} ms,"
          f" check {per['check']:.2f} ms ({times} GET; the check's own work"
          f" {per['check'] - per['need']:.2f} ms)")  # fmt: skip
    table.update(server_cpu_ms=per, clients=n, latency_ms={"p50": p50, "p99": p99},
                 check_per_get=share, check_per_get_median=median,
                 need_per_get=floor)  # fmt: skip
    return table


def _checkpoints(data: Path) -> int:
    """Checkpoints the server signed (signing is on: one every 100 entries)."""
    with sqlite3.connect(data / "claros.db") as db:
        row = db.execute("SELECT count(*) FROM checkpoints WHERE workspace = ?", (WORKSPACE,))
        return int(row.fetchone()[0])


def main(
    requests: int = REQUESTS, repeat: int = 3, clients: tuple[int, ...] = CLIENTS
) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory(prefix="claros-bench-") as tmp:
        data = Path(tmp)
        keys = seed(data)
        headers = {"Authorization": f"Bearer {keys.agent}", "Content-Type": "application/json"}
        ids = _Counter()
        sends = (("get", _get), ("need", _need), ("check", _check))
        with serve(data) as served:
            host, port, pid = "127.0.0.1", int(served.url.rsplit(":", 1)[1]), served.proc.pid
            for _, send in sends:  # warm up every path
                _round(host, port, 2, 40, send, headers, ids)
            signed, checks = _checkpoints(data), 0
            for n in clients:
                runs: dict[str, list[tuple[float, list[float]]]] = {k: [] for k, _ in sends}
                cpu: dict[str, list[float]] = {k: [] for k, _ in sends}
                for _ in range(max(3, repeat)):
                    for name, send in sends:
                        before = _cpu_seconds(pid)
                        runs[name].append(_round(host, port, n, requests, send, headers, ids))
                        cpu[name].append(_cpu_seconds(pid) - before)
                checks += sum(len(lat) for _, lat in runs["check"])
                out.append(_figures(n, runs, cpu))
            signed = _checkpoints(data) - signed
        print(f"\n{checks} checks measured; the server signed {signed} checkpoints meanwhile"
              " (one every 100 entries: signing was on)")  # fmt: skip
        if checks >= 100 and not signed:
            raise RuntimeError("no checkpoint was signed: the checks ran without signing")
    return out


if __name__ == "__main__":
    main()
