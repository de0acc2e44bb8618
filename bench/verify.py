"""``claros verify --export FILE``, the command a user runs, against its floor.

Each figure is a separate process, run in turn (A B C A B C ..., ``REPEAT`` rounds), on
the same export; each prints the best and the median run, its CPU time, its peak RSS:

- floor: read every line (``for line in file``), parse it the way verify parses it, and
  sha256 it once. Verify does not parse an entry line as JSON: it reads the fields with
  one regular expression and compares the record by hashing its bytes as written (the
  export writes each record as its canonical JSON, the very bytes ``payload_sha256``
  hashed: docs/evidence-format.md); the floor makes the same match, and parses the other
  lines (header, keys, checkpoints, signature) with ``json``.
- json floor / orjson floor (at the smallest size: per line they cost the same at any
  size): the same, but every line parsed as JSON, by the stdlib (the parser verify
  uses for the lines it does parse) and by orjson (a dependency of Claros that verify
  does not parse with: it parses no entry line), the floor the issue names, to show
  which of "a faster parser" and "less parsing" is worth more.
- verify: ``claros verify --export FILE`` (the console script next to this Python): every
  record compared, every link, every checkpoint's signature, the export's signature; by
  default it checks the entries of a large export with one worker process per CPU it may
  use (the title says how many), the parent reading and hashing the file: its wall time
  is several processes', its CPU time theirs together (waited for, so counted).
- verify --workers 1: the same, in one process (the serial path), as on a machine
  whose cores are busy.

Verify does more than any floor per line: three sha256 (the record, the entry's fields,
the export as a whole) and an Ed25519 signature every 100 lines, where the floor hashes
once: ~1.8x the floor's CPU. Its wall time comes near the floor's only through its
worker processes, on cores that are free: on a machine busy with other work (each
process group gets its share of the cores) the wall ratio tends to the CPU ratio, so
compare runs by their load average, and read "x cpu" beside "x floor".

Every child runs with its bytecode cached, as an installed ``claros`` has it (this
environment sets PYTHONDONTWRITEBYTECODE, which made each run compile its modules from
source: ~0.1 s more for verify than for a floor, which is why the floor looked ~1.5x
faster per entry at 1M than at 100k); the start-up of each is printed on its own.

The export is realistic: ~1.4 KB check rows with two rules (like bench/canonical.py's),
a signed checkpoint every 100 entries, the header, key and signature lines of a real
export, written directly with the real line, hash and signing functions (no ledger in
between) and cached in the temp dir, named by its parameters, so a rerun starts at once.

Peak memory is each child's own ``ru_maxrss`` (``os.wait4``, from a small launcher):
flat means the 1M peak is within 1.2x the 100k peak. Targets (issue "A busy
workspace"): >= 150,000 entries/s at 100k and 1M, within 1.2x of the floor.

``python -m bench.verify [SIZE ...]`` picks sizes (default 100,000 and 1,000,000);
``BENCH_VERIFY_BEFORE`` adds a run of other code, interleaved with the others, for a
before/after in one run: another checkout's ``claros`` console script (e.g. a frozen
main's ``.venv/bin/claros``: it starts as the one measured does), or a DIR holding
another checkout (``git archive`` of an older commit, its ``layers/claros_common`` and
``guard``). A bench never asserts a time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORKSPACE = "bench"
T0 = 1_796_000_000_000
EVERY = 100
SIZES = (100_000, 1_000_000)
REPEAT = 3
# Where built exports are kept between runs ($BENCH_VERIFY_CACHE, else the temp dir): a
# 1M-entry export takes minutes to build and 1.4 GB; its name holds what it was built from.
RESULTS = (
    Path(os.environ.get("BENCH_VERIFY_CACHE") or tempfile.gettempdir()) / "claros-bench-verify"
)
# Bumped when the generated export changes in a way its name does not show.
GENERATION = 2


def default_workers() -> int:
    """The worker processes ``claros verify --export`` starts by default (its --workers).
    Imported only when asked: a floor runs this module too, and importing claros at its
    top would add claros's start-up to every floor (a floor is one plain process)."""
    from claros_guard.verify_parallel import default_workers as workers

    return workers()


def _rule(n: int, matched: bool) -> dict[str, Any]:
    return {
        "id": f"refund-rule-{n}",
        "version": 3 + n,
        "hash": hashlib.sha256(f"rule {n}".encode()).hexdigest(),
        "mode": "enforce",
        "response": "ask" if n % 2 else "block",
        "matched": matched,
        "message": "Refunds over half the order need a second person" if matched else None,
        "confirm": {
            "made_by": "manual",
            "confirmed_by": "admin@example.com",
            "confirmed_at": 1_795_000_000_000 + n,
        },
    }


def record_template() -> str:
    """A check row's canonical JSON with placeholders for what changes per entry."""
    from claros.canonical import canonical

    row = {
        "check_id": "chk_@HEX@",
        "workspace": WORKSPACE,
        "ts": 7_777_777_777_777,
        "app": "shop",
        "tool": "refund_create",
        "arguments": {
            "order": "SO-@I@",
            "amount": 8_888_888,
            "currency": "EUR",
            "reason": "damaged on arrival, customer sent photos of the box and the item",
        },
        "agent": {
            "name": "claude-code",
            "model": "claude",
            "session": "s-1",
            "call_id": "c-@I@",
            "via": {"guard": "claros-guard", "version": "0.1.0"},
        },
        "on_behalf_of": "dana@example.com",
        "obo_source": "agent_key",
        "key_id": "3f9a0c1b2d4e5f60",
        "result": "allow",
        "rules": [_rule(n, n == 1) for n in range(2)],
        "severity": "medium",
        "currency": "EUR",
    }
    return canonical(row)


def _record(template: str, i: int) -> bytes:
    return (
        template.replace("@HEX@", f"{i:016x}")
        .replace("@I@", str(i))
        .replace("7777777777777", str(T0 + i))
        .replace("8888888", str(100 + i % 900))
        .encode()
    )


def export_path(n: int) -> Path:
    """Named by what it is built from: size, checkpoint spacing, record, generation."""
    shape = hashlib.sha256(record_template().encode()).hexdigest()[:12]
    return RESULTS / f"export-{n}-every{EVERY}-{shape}-g{GENERATION}.jsonl"


def write_export(n: int) -> Path:
    """An n-entry signed export (cached): what ``GET /api/evidence/export`` writes."""
    from claros import jsonutil
    from claros.canonical import canonical
    from claros.evidence.export import ExportPlan
    from claros.evidence.lines import entry_line, typed_line
    from claros.ledger import ZERO_HASH, Checkpoint, Entry, checkpoint_message, entry_hash
    from claros.signing import FileSigner

    path = export_path(n)
    if path.exists():
        return path
    RESULTS.mkdir(parents=True, exist_ok=True)
    template = record_template()
    sample = _record(template, 123_457)
    assert canonical(jsonutil.loads(sample)).encode() == sample  # the writer's form exactly
    signer = FileSigner(RESULTS / "verify-keys")
    key = signer.active_key(WORKSPACE)
    # Entries first (to a side file), so the checkpoints, which come before the entries in
    # an export, are known when the head is written.
    body = path.with_suffix(".entries")
    checkpoints: list[Checkpoint] = []
    prev = ZERO_HASH
    with body.open("wb", buffering=1 << 20) as out:
        for seq in range(1, n + 1):
            raw = _record(template, seq)
            payload = hashlib.sha256(raw).hexdigest()
            ref, ts = f"chk_{seq:016x}", T0 + seq
            digest = entry_hash(WORKSPACE, seq, "check", ref, ts, payload, prev)
            out.write(
                entry_line(Entry(WORKSPACE, seq, "check", ref, ts, payload, prev, digest), raw)
            )
            if seq % EVERY == 0 or seq == n:
                key_id, sig = signer.sign(WORKSPACE, checkpoint_message(WORKSPACE, seq, digest, ts))
                checkpoints.append(
                    Checkpoint(WORKSPACE, seq, digest, ts, key_id, base64.b64encode(sig).decode())
                )
            prev = digest
    plan = ExportPlan(WORKSPACE, T0 + n + 1, 1, n, prev, [key], checkpoints)
    signed = hashlib.sha256()
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb", buffering=1 << 20) as out, body.open("rb") as entries:

        def put(line: bytes) -> None:
            signed.update(line)
            out.write(line)

        put(typed_line("header", plan.header()))
        put(typed_line("public_key", key.to_json()))
        for cp in checkpoints:
            put(typed_line("checkpoint", cp.to_json()))
        for line in entries:
            put(line)
        key_id, sig = signer.sign(WORKSPACE, signed.digest())
        signature = {
            "sha256": signed.hexdigest(),
            "algorithm": "Ed25519",
            "key_id": key_id,
            "signature": base64.b64encode(sig).decode(),
        }
        out.write(typed_line("signature", signature))
    body.unlink()
    tmp.replace(path)
    return path


# --- the floors, run as ``python -m bench.verify --floor KIND FILE`` ----------------------
def floor(kind: str, path: str) -> int:
    """Read every line, parse it (``match``: as verify does; ``json``, ``orjson``: all as
    JSON), sha256 it."""
    sha256 = hashlib.sha256
    loads: Any = json.loads
    if kind == "orjson":
        import orjson

        loads = orjson.loads
    n = 0
    with open(path, "rb") as fh:  # noqa: PTH123 - the plainest read
        if kind != "match":
            for line in fh:
                loads(line)
                sha256(line).digest()
                n += 1
            return n
        # Verify's own pattern, handed over by the parent (importing claros here would add
        # its start-up to the floor).
        match = re.compile(bytes.fromhex(os.environ["BENCH_VERIFY_PATTERN"]), re.DOTALL).match
        for line in fh:
            if line.startswith(b'{"w'):  # an entry: its fields, as verify reads them
                m = match(line)
                assert m is not None, line[:200]
                m.groups()
            else:
                json.loads(line)
            sha256(line).digest()
            n += 1
    return n


def _before() -> list[str]:
    """The command of the code to compare with (``BENCH_VERIFY_BEFORE``), if any: another
    checkout's ``claros`` console script, started as a user's is (the fairest: the same
    start-up), or a directory holding another checkout's code (e.g. ``git archive`` of an
    older commit), run with this Python and its ``layers/claros_common`` and ``guard``
    first on the path (``python -m claros_guard.cli``: runpy's imports on top)."""
    before = os.environ.get("BENCH_VERIFY_BEFORE")
    if not before:
        return []
    tree = Path(before)
    if tree.is_file():
        return [str(tree)]
    paths = f"{tree / 'layers' / 'claros_common'}{os.pathsep}{tree / 'guard'}"
    return ["env", f"PYTHONPATH={paths}", sys.executable, "-m", "claros_guard.cli"]


def _claros() -> str:
    here = Path(sys.executable).parent / "claros"
    return str(here) if here.exists() else "claros"


# Run from a small launcher: Linux keeps a process's peak RSS across exec, so a child
# spawned straight from this (bigger) process would report this one's peak as its own.
_LAUNCH = """
import os, sys, time
argv = sys.argv[1:]
start = time.perf_counter()
out = os.open(os.devnull, os.O_WRONLY)
pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, out, 1)])
_, status, use = os.wait4(pid, 0)
wall = time.perf_counter() - start
print(os.waitstatus_to_exitcode(status), wall, use.ru_utime + use.ru_stime, use.ru_maxrss)
"""


def _child_env() -> dict[str, str]:
    """The children's environment: bytecode cached (in a directory of the bench's own),
    as an installed package has it. With PYTHONDONTWRITEBYTECODE set, each run would
    compile its modules from source first, a fixed cost (~0.1 s for verify, which imports
    more than a floor) that a user's ``claros`` never pays and that weighs ten times more
    on 100,000 entries than on a million."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(RESULTS / "pycache")
    return env


def _spawn(argv: list[str]) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MB of one child process (its own, from wait4)."""
    done = subprocess.run(
        [sys.executable, "-S", "-c", _LAUNCH, *argv],
        capture_output=True,
        check=True,
        text=True,
        env=_child_env(),
    )
    code, wall, cpu, peak_kb = done.stdout.split()
    if code != "0":
        raise SystemExit(f"{' '.join(argv)} exited {code}: {done.stderr[-500:]}")
    return float(wall), float(cpu), int(peak_kb) / 1024


def _has_orjson() -> bool:
    try:
        import orjson  # noqa: F401
    except ImportError:
        return False
    return True


def _row(name: str, n: int, got: list[tuple[float, float, float]]) -> dict[str, Any]:
    walls = [g[0] for g in got]
    best = min(got)
    return {
        "name": name,
        "entries": n,
        "per_second": n / best[0],
        "median_per_second": n / statistics.median(walls),
        "seconds": best[0],
        "median_seconds": statistics.median(walls),
        "cpu_seconds": min(g[1] for g in got),
        "peak_mb": max(g[2] for g in got),
    }


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(n: int, repeat: int = REPEAT) -> dict[str, Any]:
    path = str(write_export(n))
    size_mb = Path(path).stat().st_size / 1e6
    from claros.ledger import _written_pattern

    os.environ["BENCH_VERIFY_PATTERN"] = _written_pattern(WORKSPACE).pattern.hex()
    floor_cmd = [sys.executable, "-m", "bench.verify", "--floor"]
    tasks = [
        (f"floor: read + match + sha256 ({size_mb:.0f} MB)", [*floor_cmd, "match", path]),
        (f"verify, {default_workers()} processes ({n:,})", [_claros(), "verify", "--export", path]),
        (f"verify --workers 1 ({n:,})", [_claros(), "verify", "--workers", "1", "--export", path]),
    ]
    if n <= min(SIZES):  # per line they cost the same at any size: once is enough
        tasks.insert(1, ("json floor: read + json.loads + sha256", [*floor_cmd, "json", path]))
        if _has_orjson():
            tasks.insert(2, ("orjson floor: read + orjson + sha256", [*floor_cmd, "orjson", path]))
    before = _before()
    if before:
        tasks.append((f"before: verify --export ({n:,})", [*before, "verify", "--export", path]))
    # Each child twice on a 100-entry export, untimed but the second shown: its bytecode
    # is cached after the first, and its start-up (a fixed cost, weighing ten times more
    # on 100,000 entries than on a million) is seen apart from its cost per line.
    warm = str(write_export(EVERY))
    startup = [(_spawn([*argv[:-1], warm]), _spawn([*argv[:-1], warm]))[1] for _, argv in tasks]
    load_before = _load()
    runs: list[list[tuple[float, float, float]]] = [[] for _ in tasks]
    for _ in range(max(3, repeat)):
        for i, (_, argv) in enumerate(tasks):
            runs[i].append(_spawn(argv))
    rows = [_row(name, n, got) for (name, _), got in zip(tasks, runs, strict=True)]
    title = (
        f"claros verify --export, {n:,} entries; verify uses {default_workers()} worker processes "
        "(one per CPU it may use) and the parent; every floor is one process"
    )
    load = f"{load_before} at the start, {_load()} at the end"
    print(f"\n## {title}   (load average {load}; {max(3, repeat)} rounds, ABAB)")
    print(f"{'':40} {'entries/s':>10} {'median/s':>10} {'min s':>7} {'median s':>8} "
          f"{'cpu s':>7} {'peak MB':>7} {'x floor':>7} {'x cpu':>6}")  # fmt: skip
    base = rows[0]
    for row in rows:
        row["ratio"] = row["seconds"] / base["seconds"]
        row["cpu_ratio"] = row["cpu_seconds"] / base["cpu_seconds"]
        print(f"{row['name']:40} {row['per_second']:10,.0f} {row['median_per_second']:10,.0f} "
              f"{row['seconds']:7.3f} {row['median_seconds']:8.3f} {row['cpu_seconds']:7.3f} "
              f"{row['peak_mb']:7.1f} {row['ratio']:7.2f} {row['cpu_ratio']:6.2f}")  # fmt: skip
    starts = ", ".join(
        f"{name.split(':')[0]} {cpu:.3f}"
        for (name, _), (_, cpu, _) in zip(tasks, startup, strict=True)
    )
    print(f"  start-up, CPU s on a 100-entry export (bytecode cached): {starts}")
    # On a loaded machine wall time waits for a core; CPU time is the steadier figure.
    for row in rows[1:]:
        print(f"  {row['name']}: {n / row['cpu_seconds']:,.0f} entries per CPU second")
    return {"title": title, "rows": rows, "load_average": load}


def main(sizes: tuple[int, ...] = SIZES) -> list[dict[str, Any]]:
    started = time.perf_counter()
    out = [measure(n) for n in sizes]
    for name in ("verify,", "verify --workers 1", "before: verify"):
        peaks = [row["peak_mb"] for r in out for row in r["rows"] if row["name"].startswith(name)]
        if len(peaks) > 1:
            steps = " -> ".join(f"{p:.1f} MB" for p in peaks)
            print(f"\n{name} peak RSS: {steps} ({peaks[-1] / peaks[0]:.2f}x)")
    print(f"bench verify: {time.perf_counter() - started:.0f} s (load average {_load()})")
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--floor"]:
        floor(sys.argv[2], sys.argv[3])
    else:
        main(tuple(int(a) for a in sys.argv[1:]) or SIZES)
