"""The evidence export and its offline verification, on a 1,000,000-entry ledger:
entries/s and peak memory of each, verify's time as a ratio to reading the same file and
sha256-hashing every line.

Targets (issue "Evidence for auditors and SIEMs"): export and verify each at 100,000
entries/s or more; peak memory flat (under 200 MB) whatever the size: the same task runs
on a 100,000-entry ledger too, and its peak must be about the same.

Also measured, to document a choice (docs/evidence-format.md): verifying each record by
hashing the event's bytes as written (what ``claros verify`` does) against parsing the
event and re-canonicalizing it, and the export streamed through the local server.

The ledger is made with direct batched SQLite inserts that still form a valid chain (and
a signed checkpoint every 100 entries), not through ``append``: 1M appends would take
minutes and measure something else (bench/append.py does).
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import Result, in_child, read_and_hash, report
from claros.canonical import canonical
from claros.ledger import ZERO_HASH, checkpoint_message, entry_hash

WORKSPACE = "bench"
T0 = 1_796_000_000_000
EVERY = 100
SIZES = (100_000,)  # the quick default; ``python -m bench.export 100000 1000000`` for both
REPEAT = 3
SLOW_SAMPLE = 20_000  # entries verified the slow way (parse + re-canonicalize)

# A check row as Claros writes it, already canonical (sorted keys, no spaces): only the
# numbers change from one record to the next. ``_template_is_canonical`` checks it.
_RECORD = (
    '{{"agent":{{"call_id":"c-{i}","model":"claude","name":"claude-code","session":"s-1",'
    '"via":{{"guard":"claros-guard","version":"0.1.0"}}}},"allowed":true,"app":"shop",'
    '"arguments":{{"amount":{amount},"currency":"EUR","order":"SO-{i}",'
    '"reason":"damaged on arrival, customer sent photos"}},"check_id":"chk_{i:016x}",'
    '"key_id":"3f9a0c1b2d4e5f60","obo_source":"agent_key","on_behalf_of":"dana@example.com",'
    '"result":"allow","rules":[{{"confirm":{{"confirmed_at":1795000000000,'
    '"confirmed_by":"admin@example.com","made_by":"manual"}},"hash":"{rule_hash}",'
    '"id":"refund-half","matched":false,"mode":"enforce","response":"ask","version":3}}],'
    '"tool":"refund_create","ts":{ts},"workspace":"bench"}}'
)
_RULE_HASH = hashlib.sha256(b"refund-half v3").hexdigest()


def _record(i: int) -> str:
    return _RECORD.format(i=i, amount=100 + i % 900, rule_hash=_RULE_HASH, ts=T0 + i)


def _template_is_canonical() -> None:
    from claros import jsonutil

    for i in (1, 77, 123_456):
        text = _record(i)
        assert canonical(jsonutil.loads(text)) == text, text


def build_ledger(data: Path, n: int) -> None:
    """A valid n-entry chain in ``data/claros.db`` with a checkpoint every 100 entries,
    signed with the workspace's key file in ``data``."""
    from claros.signing import FileSigner
    from claros.store.sqlite import SqliteStore

    data.mkdir(parents=True, exist_ok=True)
    SqliteStore(data / "claros.db").close()  # the schema
    signer = FileSigner(data)
    key = signer.active_key(WORKSPACE)
    conn = sqlite3.connect(data / "claros.db", isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO public_keys VALUES (?, ?, ?, ?, ?)",
        (WORKSPACE, key.key_id, key.public_key, key.created_at, key.algorithm),
    )
    prev = ZERO_HASH
    ledger: list[tuple[Any, ...]] = []
    records: list[tuple[Any, ...]] = []
    checkpoints: list[tuple[Any, ...]] = []
    for seq in range(1, n + 1):
        body = _record(seq)
        payload = hashlib.sha256(body.encode()).hexdigest()
        ref, ts = f"chk_{seq:016x}", T0 + seq
        digest = entry_hash(WORKSPACE, seq, "check", ref, ts, payload, prev)
        ledger.append((WORKSPACE, seq, "check", ref, ts, payload, prev, digest))
        records.append((WORKSPACE, "check", ref, seq, body))
        if seq % EVERY == 0 or seq == n:
            key_id, sig = signer.sign(WORKSPACE, checkpoint_message(WORKSPACE, seq, digest, ts))
            checkpoints.append((WORKSPACE, seq, digest, ts, key_id, base64.b64encode(sig).decode()))
        prev = digest
        if len(ledger) == 20_000 or seq == n:
            conn.executemany("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ledger)
            conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)", records)
            conn.executemany("INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)", checkpoints)
            ledger, records, checkpoints = [], [], []
    conn.execute(
        "INSERT INTO heads SELECT * FROM ledger WHERE workspace = ? AND seq = ?", (WORKSPACE, n)
    )
    conn.execute("COMMIT")
    conn.close()


# --- the tasks, each run in a fresh process -----------------------------------------------
def _build(data: str, n: int) -> int:
    build_ledger(Path(data), n)
    return n


def export_file(data: str, out: str) -> int:
    from claros.config import Settings
    from claros.evidence.export import export_lines, prepare_export
    from claros.signing import FileSigner
    from claros.store.sqlite import SqliteStore
    from claros.wiring import Services

    store = SqliteStore(Path(data) / "claros.db")
    services = Services(Settings(data_dir=Path(data)), store, FileSigner(data))
    plan = prepare_export(services, WORKSPACE)
    with open(out, "wb", buffering=1 << 20) as fh:  # noqa: PTH123
        fh.writelines(export_lines(services, plan))
    store.close()
    return plan.last_seq


def verify_file(path: str) -> int:
    from claros_guard.verify import Pins, Progress, verify_export

    result = verify_export(path, None, Pins(None, ""), Progress(False))
    assert result.ok, result.report.failures[:3]
    assert result.report.records_compared == result.report.entries
    return result.report.entries


def verify_recanonicalized(path: str, n: int) -> int:
    """The other way: parse each event and hash its canonical JSON again."""
    from claros import jsonutil
    from claros.ledger import ChainVerifier, Checkpoint, Entry, PublicKey

    checkpoints, keys, done = [], [], 0
    verifier: ChainVerifier | None = None
    with open(path, "rb") as fh:  # noqa: PTH123
        for line in fh:
            data = jsonutil.loads(line)
            kind = data.pop("type", None)
            if kind == "public_key":
                keys.append(PublicKey.from_json(data))
            elif kind == "checkpoint":
                checkpoints.append(Checkpoint.from_json(data))
            elif kind is None:
                if verifier is None:
                    cps = [c for c in checkpoints if c.seq <= n]
                    verifier = ChainVerifier(WORKSPACE, cps, keys, compare_records=True)
                record = data.pop("event")
                verifier.feed(Entry.from_json(data), record)
                done += 1
                if done == n:
                    break
    assert verifier is not None and verifier.finish().ok
    return done


def export_over_http(data: str, out: str) -> int:
    """The local server streams the export (chunked); the client writes it to a file.
    Both run in this process, so the peak covers the server's side too."""
    import httpx

    from claros.auth import create_key
    from claros.config import Settings
    from claros.local import LocalServer
    from claros.signing import FileSigner
    from claros.store.sqlite import SqliteStore
    from claros.wiring import Services

    store = SqliteStore(Path(data) / "claros.db")
    services = Services(Settings(data_dir=Path(data)), store, FileSigner(data))
    key = create_key(store, WORKSPACE, "admin", person="bench@example.com")
    server = LocalServer(services, "127.0.0.1", 0).start()
    lines = 0
    try:
        with (
            httpx.Client(base_url=server.url, timeout=600) as client,
            client.stream(
                "GET", "/api/evidence/export", headers={"Authorization": f"Bearer {key}"}
            ) as answer,
            Path(out).open("wb") as fh,
        ):
            assert answer.status_code == 200
            for chunk in answer.iter_bytes(1 << 20):
                fh.write(chunk)
                lines += chunk.count(b"\n")
    finally:
        server.stop()
        store.close()
    return lines


def _best(name: str, fn: Any, *args: Any, repeat: int = 1) -> Result:
    return min((in_child(name, fn, *args) for _ in range(repeat)), key=lambda r: r.seconds)


def _abab(tasks: list[tuple[str, Any, tuple[Any, ...]]], repeat: int = REPEAT) -> list[Result]:
    """Each task in a fresh child, in turn (A B C A B C ...), ``repeat`` rounds: the fastest
    run of each, with the median of its runs and its highest peak."""
    runs: list[list[Result]] = [[] for _ in tasks]
    for _ in range(max(3, repeat)):
        for i, (name, fn, args) in enumerate(tasks):
            runs[i].append(in_child(name, fn, *args))
    out = []
    for got in runs:
        best = min(got, key=lambda r: r.seconds)
        best.median_seconds = statistics.median(r.seconds for r in got)
        best.peak_mb = max(r.peak_mb or 0 for r in got)
        out.append(best)
    return out


def main(sizes: tuple[int, ...] = SIZES) -> list[dict[str, Any]]:
    _template_is_canonical()
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            data = Path(tmp) / f"ledger-{n}"
            in_child("build the ledger", _build, str(data), n)  # keeps this process small
            path = str(Path(tmp) / f"export-{n}.jsonl")
            in_child("export once", export_file, str(data), path)  # the file the others read
            size_mb = Path(path).stat().st_size / 1e6
            baseline, export, check = _abab([
                (f"read + sha256 each line ({size_mb:.0f} MB)", read_and_hash, (path,)),
                (f"export {n:,} entries", export_file, (str(data), path)),
                (f"verify {n:,} entries", verify_file, (path,)),
            ])  # fmt: skip
            rows = [export, check]
            if n == max(sizes):
                slow_n = min(n, SLOW_SAMPLE)
                rows.append(
                    _best(
                        f"verify, re-canonicalizing ({slow_n:,})",
                        verify_recanonicalized,
                        path,
                        slow_n,
                    )
                )
                http_path = str(Path(tmp) / "http.jsonl")
                rows.append(
                    _best(
                        f"export over HTTP (streamed), {n:,}",
                        export_over_http,
                        str(data),
                        http_path,
                    )
                )
                Path(http_path).unlink()
            out.append(report(f"Evidence export and verify, {n:,} entries", rows, baseline))
            ratio = (check.seconds / check.items) / (baseline.seconds / baseline.items)
            print(
                f"verify / (read + sha256): {ratio:.1f}x; export {export.per_second:,.0f}/s, "
                f"verify {check.per_second:,.0f}/s; peaks {export.peak_mb:.0f} MB and "
                f"{check.peak_mb:.0f} MB"
            )
            Path(path).unlink()
    return out


if __name__ == "__main__":  # python -m bench.export [SIZE ...]
    main(tuple(int(a) for a in sys.argv[1:]) or SIZES)
