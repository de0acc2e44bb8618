"""Offline verification of a downloaded chain, entries/s and peak memory, as a ratio to
merely reading the same file and sha256-hashing every line.

Target (issue "Ledger core"): 100,000 entries/s or more.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import in_child, read_and_hash, report
from claros.ledger import ZERO_HASH, ChainVerifier, Entry

WORKSPACE = "bench"


def write_chain(path: Path, n: int) -> None:
    """n entries as ``GET /v1/ledger/entries`` gives them (JSON lines)."""
    prev = ZERO_HASH
    with path.open("w") as out:
        for seq in range(1, n + 1):
            record = {"check_id": f"chk_{seq:016x}", "amount": "120.50", "seq": seq}
            entry = Entry.build(
                WORKSPACE, seq, "check", record["check_id"], 1_796_000_000_000 + seq, record, prev
            )
            out.write(json.dumps(entry.to_json(), separators=(",", ":")) + "\n")
            prev = entry.hash


def verify_file(path: str) -> int:
    verifier = ChainVerifier(WORKSPACE)
    with open(path, "rb") as fh:  # noqa: PTH123
        for line in fh:
            verifier.feed(Entry.from_json(json.loads(line)))
    result = verifier.finish()
    assert result.ok, result.failures[:3]
    return result.entries


def main(n: int = 100_000) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chain.jsonl"
        write_chain(path, n)
        size_mb = path.stat().st_size / 1e6
        baseline = min(
            (in_child("read + sha256 each line", read_and_hash, str(path)) for _ in range(3)),
            key=lambda r: r.seconds,
        )
        verify = min(
            (in_child(f"verify {n:,} entries ({size_mb:.0f} MB)", verify_file, str(path))
             for _ in range(3)),
            key=lambda r: r.seconds,
        )  # fmt: skip
        return [report("Offline verification of a chain", [verify], baseline)]


if __name__ == "__main__":
    main()
