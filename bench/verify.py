"""``claros verify --export FILE``, the command a user runs, against its floor.

Each figure runs a separate process, in turn (ABAB, ``REPEAT`` rounds):

- floor: read every line, parse it the way verify parses it, sha256 it. Verify reads an
  entry line's fields with one regular expression and hashes the record's bytes as
  written (the export writes each record as its canonical JSON, the bytes
  ``payload_sha256`` hashed: docs/evidence-format.md), so it parses no record as JSON at
  all; the floor does the same match. The floor with a full JSON parse per line (stdlib
  ``json``) is shown beside it, to show what "less parsing per line" is worth.

Why less parsing rather than a faster parser: measured on these lines (CPU s per 100,000,
read + parse + sha256, in one process): the regex 0.67-1.05, orjson 1.15-1.20, stdlib
json 1.72. orjson would be a new dependency and still slower than not parsing, and a
parsed record would have to be re-canonicalized to be hashed, which costs far more
(docs/evidence-format.md); hashing the record's bytes as written is stricter too (the
writer guarantees its canonical form, and bytes that do not hash right go the slow way).
- verify: ``.venv/bin/claros verify --export FILE`` (the console script), every record
  compared, every link, every checkpoint signature and the export's signature.

The export is realistic: ~1.4 KB check rows with a few rules (like bench/canonical.py's),
a signed checkpoint every 100 entries, the header, key and signature lines of a real
export, written directly with the real line, hash and signing functions (no ledger in
between) and cached under bench/results/ (gitignored), so a rerun starts at once.

Peak memory is the child's own ``ru_maxrss`` (``os.wait4``): flat
means the 1M peak is within 1.2x the 100k peak. Targets (issue "A busy workspace"):
>= 150,000 entries/s at 100k and 1M, within 1.2x of the floor.

``python -m bench.verify [SIZE ...]`` picks sizes (default 100,000 and 1,000,000);
``BENCH_VERIFY_BEFORE=DIR`` adds a run of the code in DIR (a ``git archive`` of an older
commit), interleaved with the others, for a before/after in one run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import Result, report

WORKSPACE = "bench"
T0 = 1_796_000_000_000
EVERY = 100
SIZES = (100_000, 1_000_000)
REPEAT = 3
RESULTS = Path(__file__).resolve().parent / "results"
# Bumped when the generated export changes, so a stale cached file is not reused.
GENERATION = 1


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
    return RESULTS / f"verify-export-{n}-g{GENERATION}.jsonl"


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
    """Read every line, parse it (as verify does, or with stdlib json), sha256 it."""
    n = 0
    if kind == "json":
        loads = json.loads
        with open(path, "rb") as fh:  # noqa: PTH123 - the plainest read
            for line in fh:
                loads(line)
                hashlib.sha256(line).digest()
                n += 1
        return n
    from claros.evidence.lines import _WRITTEN

    match = _WRITTEN.match
    with open(path, "rb") as fh:  # noqa: PTH123
        for line in fh:
            # Entry lines: the fields by the regex, the record's bytes hashed; the few
            # other lines (header, keys, checkpoints, signature) with the JSON parser.
            if line.startswith(b'{"w'):
                m = match(line)
                assert m is not None
                hashlib.sha256(line[m.end() : -2]).digest()
            else:
                json.loads(line)
            hashlib.sha256(line).digest()
            n += 1
    return n


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


def _spawn(argv: list[str]) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MB of one child process (its own, from wait4)."""
    done = subprocess.run(
        [sys.executable, "-S", "-c", _LAUNCH, *argv], capture_output=True, check=True, text=True
    )
    code, wall, cpu, peak_kb = done.stdout.split()
    if code != "0":
        raise SystemExit(f"{' '.join(argv)} exited {code}: {done.stderr[-500:]}")
    return float(wall), float(cpu), int(peak_kb) / 1024


def measure(n: int, repeat: int = REPEAT) -> dict[str, Any]:
    path = str(write_export(n))
    size_mb = Path(path).stat().st_size / 1e6
    floor_cmd = [sys.executable, "-m", "bench.verify", "--floor"]
    tasks = [
        (f"floor: read + regex + sha256 ({size_mb:.0f} MB)", [*floor_cmd, "regex", path]),
        (f"claros verify --export ({n:,})", [_claros(), "verify", "--export", path]),
    ]
    if n <= min(SIZES):  # for scale, once: it costs more than the rest together at 1M
        tasks.insert(1, ("floor: read + json.loads + sha256", [*floor_cmd, "json", path]))
    before = os.environ.get("BENCH_VERIFY_BEFORE")
    if before:  # another checkout of the code (e.g. ``git archive`` of an older commit)
        tree = Path(before)
        paths = f"{tree / 'layers' / 'claros_common'}{os.pathsep}{tree / 'guard'}"
        argv = ["env", f"PYTHONPATH={paths}", sys.executable, "-m", "claros_guard.cli"]
        tasks.append((f"before: verify --export ({n:,})", [*argv, "verify", "--export", path]))
    runs: list[list[tuple[float, float, float]]] = [[] for _ in tasks]
    for _ in range(max(3, repeat)):
        for i, (_, argv) in enumerate(tasks):
            runs[i].append(_spawn(argv))
    results = []
    for (name, _), got in zip(tasks, runs, strict=True):
        fastest = min(got)
        results.append(
            Result(
                name,
                fastest[0],
                n,
                max(g[2] for g in got),
                statistics.median(g[0] for g in got),
                fastest[1],
            )  # fmt: skip
        )
    base, *rest = results
    out = report(f"claros verify --export, {n:,} entries", rest, base)
    # On a loaded machine wall time waits for a core; CPU time is the steadier ratio.
    for r in rest:
        if base.cpu_seconds and r.cpu_seconds:
            ratio = r.cpu_seconds / base.cpu_seconds
            print(
                f"  {r.name}: {n / r.cpu_seconds:,.0f} entries per CPU s, {ratio:.2f}x the floor's"
            )
    return out


def main(sizes: tuple[int, ...] = SIZES) -> list[dict[str, Any]]:
    out = [measure(n) for n in sizes]
    if len(out) > 1:
        peaks = [
            row["peak_mb"] for r in out for row in r["rows"] if row["name"].startswith("claros")
        ]
        print(f"\nverify peak RSS: {' -> '.join(f'{p:.1f} MB' for p in peaks)}"
              f" ({peaks[-1] / peaks[0]:.2f}x)")  # fmt: skip
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--floor"]:
        floor(sys.argv[2], sys.argv[3])
    else:
        main(tuple(int(a) for a in sys.argv[1:]) or SIZES)
