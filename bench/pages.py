"""Every /app page and /api/evidence/{aiuc1,oversight,verify} as the ledger grows.

``python -m bench pages [SIZE ...]`` (default 10,000, 100,000 and 1,000,000 entries in one
workspace, on SQLite). Each ledger is built once and cached in the temp dir
(``claros-bench-pages/``): rows written straight through the store's connection in big
transactions, with a real chain (every entry hashed and linked), a signed checkpoint every
100 entries, the hourly and daily aggregates folded as ``append`` folds them, and the
verified-through state from one full verify. The workload is realistic: checks by four
agents for three people over 120 days (allows, nudges, asks and stops with amounts in
three currencies, approved repeats), approvals, overrides, outcomes and unchecked writes.

Then a real local server per size answers the admin's requests over HTTP, each URL
``REPEAT`` times (``BENCH_PAGES_REPEAT``) with the sizes' requests interleaved; the tables
give each size's min and median, and the last column their ratios to the smallest size
(the targets, issue 13: under 300 ms at 1M, and 1M within 2x of 10k). First as a server
answers every look at a page but the first (the sums of past days kept per ledger head,
``claros.evidence.span_cache``), then the first look (those sums dropped before each
request); each in wall time and in the process's CPU time, which a loaded machine changes
least. The ledger ends when it was built: a window's last day holds entries up to then
(none when the bench runs on a later day), where a live workspace's holds them up to now.
A first look's cost moves with the clock: the window's start edge reads up to ~12 hour
rows (by the hour of the day) and up to 30 minutes of records (by the minute of the hour,
~175 records at 1M), whichever way reads less (``claros.evidence.windowed``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

WORKSPACE = "bench"
ADMIN = "admin@bench.test"
PEOPLE = ("dana@bench.test", "erin@bench.test", "sam@bench.test")
SIZES = (10_000, 100_000, 1_000_000)
REPEAT = int(os.environ.get("BENCH_PAGES_REPEAT", "5"))
EVERY = 100
SPAN_DAYS = 120
GENERATION = 5  # bumped when the workload changes, so a stale cache is not reused
URLS = (
    "/app",
    "/app?days=90",
    "/app/activity",
    "/app/activity?result=stop",
    "/app/activity?q=SO-4242",
    "/app/checks/{check}",
    "/app/asks",
    "/app/rules",
    "/app/keys",
    "/app/device",
    "/app/evidence",
    "/api/evidence/aiuc1?days=90",
    "/api/evidence/oversight?days=90",
    "/api/evidence/verify",
)
# Not a page: the file ``claros verify --checkpoints`` reads, every checkpoint of the
# workspace (one per EVERY entries), so it grows with the ledger by design.
DOWNLOADS = ("/app/evidence/checkpoints",)
AGENTS = (
    {"name": "claude-code", "model": "claude", "via": {"guard": "claros-hooks", "version": "1"}},
    {"name": "cursor", "via": {"guard": "claros-guard", "version": "1"}},
    {"name": "codex", "via": {"guard": "claros-guard", "version": "1"}},
    {"name": "playwright"},
)
RULES = ("refund-half", "refund-huge", "payout-stop")


def _cache() -> Path:
    """Built ledgers are kept between runs (1M entries take minutes to build)."""
    where = os.environ.get("BENCH_PAGES_CACHE")
    found = Path(where) if where else Path(tempfile.gettempdir()) / "claros-bench-pages"
    found.mkdir(parents=True, exist_ok=True)
    return found


def _record(i: int, ts: int, rng: random.Random, key_id: str) -> tuple[str, str, dict[str, Any]]:
    roll = rng.random()
    if roll < 0.80:
        result = rng.choices(("allow", "nudge", "ask", "stop"), (70, 10, 12, 8))[0]
        agent = AGENTS[i % len(AGENTS)]
        rule = RULES[i % 3]
        rec: dict[str, Any] = {
            "check_id": f"chk_{i:09d}", "ts": ts, "app": "shop" if i % 3 else "bank",
            "tool": "refund_create" if i % 3 else "payout", "result": result,
            "arguments": {"order": f"SO-{i}", "amount": str(10 + i % 5000), "currency": "EUR"},
            "agent": {**agent, "session": f"s{i // 50}", "call_id": f"c{i}"},
            "on_behalf_of": PEOPLE[i % 3], "obo_source": "key", "key_id": key_id,
            "rules": [{"id": rule, "version": 1, "hash": "ab" * 32, "matched": result != "allow",
                       "confirm": {"made_by": "manual", "confirmed_by": ADMIN}}],
        }  # fmt: skip
        if result != "allow":
            rec["severity"] = {"stop": "high", "ask": "medium", "nudge": "low"}[result]
            rec["amount"] = str(10 + i % 5000)
            rec["currency"] = ("EUR", "USD", "GBP")[i % 3]
            if result == "ask":
                rec["ask_id"] = f"ask_{i:09d}"
        return "check", rec["check_id"], rec
    if roll < 0.88:
        return "approval", f"apv_{i:09d}", {
            "ask_id": f"ask_{i:09d}", "check_id": f"chk_{i:09d}",
            "decision": rng.choice(("approve", "deny")), "authority": "owner",
            "decided_by": PEOPLE[i % 2], "opened_at": ts - rng.randrange(1000, 90_000),
            "decided_at": ts,
        }  # fmt: skip
    if roll < 0.90:
        return "override", f"ovr_{i:09d}", {
            "override_id": f"ovr_{i:09d}", "check_id": f"chk_{i - 1:09d}",
            "verdict": rng.choice(("wrong_stop", "missed", "right_stop")),
            "rule_id": RULES[i % 3], "by": ADMIN, "at": ts, "check_result": "stop",
            "check_rules": [{"id": RULES[i % 3], "version": 1, "matched": True}],
        }  # fmt: skip
    if roll < 0.98:
        return "outcome", f"chk_{i - 1:09d}", {
            "check_id": f"chk_{i - 1:09d}", "status": "ok", "reported_at": ts,
            "key_id": key_id, "check_result": "allow", "agent": AGENTS[i % 4]["name"],
        }  # fmt: skip
    return "unchecked", f"unc_{i:09d}", {
        "agent": AGENTS[i % 2], "key_id": key_id, "app": "shop", "tool": "refund_create",
        "reason": "Claros unreachable",
    }  # fmt: skip


def build(size: int, data_dir: Path) -> None:
    """The ledger of ``size`` entries in ``data_dir`` (a local server's data directory)."""
    from claros import jsonutil
    from claros.aggregates import SPANS, fold
    from claros.auth import add_member, create_key
    from claros.config import Settings
    from claros.evidence.verified import verify_now
    from claros.ledger import ZERO_HASH, Checkpoint, Entry, checkpoint_message
    from claros.rules.model import RuleSpec
    from claros.rules.service import put_rule
    from claros.store.base import record_bytes
    from claros.wiring import build_services

    services = build_services(Settings(data_dir=data_dir))
    store, signer = services.store, services.signer
    admin_key = create_key(store, WORKSPACE, "admin", person=ADMIN)
    (data_dir / "admin-key").write_text(admin_key)
    for person in PEOPLE:
        add_member(store, WORKSPACE, person)
    agent_key = create_key(store, WORKSPACE, "agent", person=PEOPLE[0])
    from claros.auth import authenticate

    key_id = authenticate(store, f"Bearer {agent_key}").key_id
    admin = authenticate(store, f"Bearer {admin_key}")
    for rule, response in zip(RULES, ("ask", "stop", "stop"), strict=True):
        put_rule(services, admin, RuleSpec(id=rule, workflow_id="refunds", app="shop",
                                           tools=["refund_create"], when="amount > 100",
                                           response=response, owners=[PEOPLE[0]],
                                           title=rule))  # type: ignore[arg-type]  # fmt: skip
    head = store.head(WORKSPACE)
    seq, prev = (head.seq, head.hash) if head else (0, ZERO_HASH)
    public = signer.active_key(WORKSPACE)
    store.add_public_key(public)
    rng = random.Random(size)
    fast = functools.partial(json.dumps, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    end = int(time.time() * 1000)
    start = end - SPAN_DAYS * 86_400_000
    n = size - seq
    buckets: dict[tuple[str, int], dict[str, Any]] = {}
    conn = store._conn()  # type: ignore[attr-defined]  # noqa: SLF001 - bulk load, bench only
    ledger, records, cps = [], [], []
    for i in range(n):
        ts = start + (end - start) * i // n
        kind, ref, rec = _record(i, ts, rng, key_id)
        # The generated records hold only strings, ints and bools, none empty: sorted
        # compact JSON is their canonical form (checked on the first ones).
        text = fast(rec)
        if i < 50:
            raw, _ = record_bytes(rec)
            assert raw.decode() == text, (raw, text)
        payload = hashlib.sha256(text.encode()).hexdigest()
        seq += 1
        entry = Entry.build(WORKSPACE, seq, kind, ref, ts, rec, prev, payload=payload)
        prev = entry.hash
        ledger.append((WORKSPACE, seq, kind, ref, ts, payload, entry.prev_hash, entry.hash))
        records.append((WORKSPACE, kind, ref, seq, text))
        # Each record into its hour; the days are those hours added up, below.
        fold(buckets.setdefault(("hour", ts // SPANS["hour"]), {}), seq, kind, rec)
        if seq % EVERY == 0:
            cp_ts = ts + 1
            key, sig = signer.sign(WORKSPACE, checkpoint_message(WORKSPACE, seq, entry.hash, cp_ts))
            cps.append(Checkpoint(WORKSPACE, seq, entry.hash, cp_ts, key,
                                  base64.b64encode(sig).decode()))  # fmt: skip
        if len(ledger) >= 50_000 or i == n - 1:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ledger)
            conn.executemany("INSERT OR IGNORE INTO records VALUES (?, ?, ?, ?, ?)", records)
            conn.executemany(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
                [(c.workspace, c.seq, c.hash, c.ts, c.key_id, c.signature) for c in cps],
            )
            last = ledger[-1]
            conn.execute("INSERT OR REPLACE INTO heads VALUES (?, ?, ?, ?, ?, ?, ?, ?)", last)
            conn.execute("COMMIT")
            ledger, records, cps = [], [], []
    from claros.evidence.windowed import merge, trim

    days: dict[tuple[str, int], dict[str, Any]] = {}
    for (_span, hour), bucket in buckets.items():
        merge(days.setdefault(("day", hour * SPANS["hour"] // SPANS["day"]), {}), bucket)
    buckets.update({key: trim(day) for key, day in days.items()})
    conn.execute("BEGIN IMMEDIATE")
    for (span, begin), bucket in buckets.items():
        row = conn.execute(
            "SELECT body FROM aggregates WHERE workspace = ? AND span = ? AND start = ?",
            (WORKSPACE, span, begin),
        ).fetchone()
        if row:  # the rules' own entries, appended through the store
            merge(bucket, jsonutil.loads(row[0]))
            trim(bucket)
        conn.execute("INSERT OR REPLACE INTO aggregates VALUES (?, ?, ?, ?)",
                     (WORKSPACE, span, begin, jsonutil.dumps(bucket)))  # fmt: skip
    # Activity's check index, as the store's append writes it (the bulk load above goes
    # past the append): without it Activity and the check page listed nothing and were
    # timed on an empty index.
    from claros.store.sqlite import _CHECK_COLUMNS

    conn.execute(
        f"INSERT OR REPLACE INTO check_index SELECT {_CHECK_COLUMNS} FROM records"
        " WHERE kind = 'check'"
    )
    conn.execute("COMMIT")
    state = verify_now(store, WORKSPACE)
    assert not state["failures"], state["failures"][:3]
    services.close()


def _ledger(size: int) -> Path:
    target = _cache() / f"pages-{size}-g{GENERATION}"
    if not (target / "built").exists():
        import shutil

        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        began = time.perf_counter()
        print(f"building a ledger of {size:,} entries in {target} ...", flush=True)
        build(size, target)
        (target / "built").write_text(f"{time.perf_counter() - began:.0f} s\n")
        print(f"  built in {time.perf_counter() - began:.0f} s", flush=True)
    return target


Timings = dict[str, tuple[float, float] | None]  # url: (min, median) seconds


def _once(
    client: httpx.Client, url: str, headers: dict[str, str], before: Any
) -> tuple[float, float]:
    """One request's wall time and the process's CPU time it took (server threads and
    client: what a loaded machine changes least)."""
    before()
    began, used = time.perf_counter(), time.process_time()
    got = client.get(url, headers=headers)
    wall, cpu = time.perf_counter() - began, time.process_time() - used
    assert got.status_code == 200, (url, got.status_code)
    return wall, cpu


def _summary(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return ordered[0], ordered[len(ordered) // 2]


def _interleaved(
    url: str,
    calls: list[tuple[int, httpx.Client, str, dict[str, str]]],
    sizes: list[int],
    out: dict[int, dict[str, Timings]],
) -> None:
    """``url`` REPEAT times at every size, the sizes taking turns, kept sums first (warm),
    then dropped before each request (cold)."""
    from claros.evidence import span_cache

    for sort, before in (("warm", lambda: None), ("cold", span_cache.clear)):
        walls: dict[int, list[float]] = {size: [] for size in sizes}
        cpus: dict[int, list[float]] = {size: [] for size in sizes}
        for _ in range(REPEAT):
            for size, client, path, headers in calls:
                wall, cpu = _once(client, path, headers, before)
                walls[size].append(wall)
                cpus[size].append(cpu)
        cpu_sort = "cpu" if sort == "warm" else "cold_cpu"
        for size in sizes:
            out[size][sort][url] = _summary(walls[size])
            out[size][cpu_sort][url] = _summary(cpus[size])


def measure(sizes: list[int]) -> dict[int, dict[str, Timings]]:
    """Each URL's wall and CPU time at every size, min and median of REPEAT, with the sums
    of past days kept per ledger head (``claros.evidence.span_cache``, as a server answers
    every look at a page but the first) and with them dropped before each request (the
    first look). One server per size, all up at once, and the sizes' requests interleaved
    (10k, 1M, 10k, 1M, ...): a load that comes and goes on a shared machine falls on
    every size alike, so the ratios are fair."""
    from claros.config import Settings
    from claros.local import LocalServer
    from claros.wiring import build_services

    served = []
    out: dict[int, dict[str, Timings]] = {}
    try:
        for size in sizes:
            data_dir = _ledger(size)
            key = (data_dir / "admin-key").read_text().strip()
            services = build_services(Settings(data_dir=data_dir))
            server = LocalServer(services, port=0).start()
            client = httpx.Client(base_url=server.url, timeout=120)
            served.append((size, key, services, server, client))
            out[size] = {"warm": {}, "cpu": {}, "cold": {}, "cold_cpu": {}}
        paths: dict[int, str] = {}
        for size, key, _services, _server, client in served:
            api = {"Authorization": f"Bearer {key}"}
            newest = client.get("/api/checks?limit=1", headers=api).json()["checks"]
            # A ledger that lists no check would time Activity and the check page on
            # nothing (as the bulk load did before it wrote the check index).
            if not newest:
                raise SystemExit(f"bench pages: the {size:,}-entry ledger lists no check")
            paths[size] = newest[0]["check_id"]
        for url in (*URLS, *DOWNLOADS):
            calls = []
            for size, key, _services, _server, client in served:
                headers = {"Authorization": f"Bearer {key}"}
                if url.startswith("/app"):
                    headers["Accept"] = "text/html"
                path = url.replace("{check}", paths[size])
                first = client.get(path, headers=headers)
                if first.status_code == 404:
                    break  # not served on this branch
                assert first.status_code == 200, (url, first.status_code, first.text[:300])
                calls.append((size, client, path, headers))
            if len(calls) < len(served):
                for found in out.values():
                    for sort in found.values():
                        sort[url] = None
                continue
            _interleaved(url, calls, sizes, out)
    finally:
        for _size, _key, services, server, client in served:
            client.close()
            server.stop()
            services.close()
    return out


def _table(
    title: str, urls: tuple[str, ...], sizes: list[int], results: dict[int, Timings]
) -> None:
    """Each cell the min / median in ms; the ratios of the largest size to the smallest,
    of the mins and of the medians."""
    print(f"\n## {title}")
    head = "".join(f"{f'{s:,} min/med':>20}" for s in sizes)
    print(f"{'':36}{head}{'x smallest min/med':>22}")
    for url in urls:
        row = [results[s][url] for s in sizes]
        cells = "".join(
            f"{'-':>20}" if t is None else f"{t[0] * 1000:9.1f} /{t[1] * 1000:7.1f}ms" for t in row
        )
        low, high = row[0], row[-1]
        ratio = (
            f"{high[0] / low[0]:14.2f} /{high[1] / low[1]:5.2f}"
            if low is not None and high is not None and len(row) > 1
            else ""
        )
        print(f"{url:36}{cells}{ratio}")


def main(argv: list[str] | None = None) -> None:
    """``python -m bench pages`` (sizes from BENCH_PAGES_SIZES=10000,100000 or the
    defaults) or ``python -m bench.pages SIZE ...``."""
    sizes = [int(a) for a in argv or ()] or list(SIZES)
    if not argv and os.environ.get("BENCH_PAGES_SIZES"):
        sizes = [int(s) for s in os.environ["BENCH_PAGES_SIZES"].split(",")]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    began = time.perf_counter()
    measured = measure(sizes)

    def of(sort: str) -> dict[int, Timings]:
        return {size: m[sort] for size, m in measured.items()}

    _table(f"/app pages and evidence routes, admin, {REPEAT} looks each, sizes interleaved "
           f"(load average {load})", URLS, sizes, of("warm"))  # fmt: skip
    _table("the same, CPU time (server and client, one process)", URLS, sizes, of("cpu"))
    _table("first look: the sums of past days read again for each request", URLS, sizes,
           of("cold"))  # fmt: skip
    _table("first look, CPU time", URLS, sizes, of("cold_cpu"))
    _table("downloads (every checkpoint: grows with the ledger by design)", DOWNLOADS, sizes,
           of("warm"))  # fmt: skip
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nbench pages took {time.perf_counter() - began:.0f} s (load average {load})")


if __name__ == "__main__":
    main(sys.argv[1:])
