"""An export of a million bad lines takes the auditor's memory (and floods the output).

``claros verify`` goes on after a failure so that one run names them all, and kept every
failure to print at the end: about 250 bytes for a 2-byte line (``x``), so a 4 MB export
of bad lines took 490 MB and printed two million lines, and a few hundred MB of them
exhaust any machine. The export is the operator's to make (THREATS.md §4); bad input of
any size must get a clear answer in bounded memory (§5).

Now the first 1,000 failures are listed and the others counted (``FAIL: and N more
failures, not listed``); the verify still fails, with the whole count."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from claros.ledger import MAX_FAILURES_LISTED

LINES = 1_000_000
LIMIT_BYTES = 200 << 20  # the verify needs ~20 MB of memory here, ~60 MB of address space


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def test_a_million_bad_lines_fail_in_bounded_memory(tmp_path: Path) -> None:
    export = tmp_path / "bad.jsonl"
    with export.open("wb") as f:
        f.write(b'{"type":"header","format":"claros-evidence/1","workspace":"acme"}\n')
        f.write(b"x\n" * LINES)
    got = subprocess.run(
        [sys.executable, "-m", "claros_guard.verify", "--export", str(export)],
        capture_output=True, text=True, timeout=600, preexec_fn=_limited,
    )  # fmt: skip
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 1, (got.returncode, got.stdout[-500:], got.stderr[-500:])
    out = got.stdout.splitlines()
    assert len(out) < MAX_FAILURES_LISTED + 20, len(out)
    unlisted = LINES + 1 - MAX_FAILURES_LISTED  # every bad line, and the missing signature
    assert f"FAIL: and {unlisted:,} more failures, not listed" in out, out[-3:]
    assert out[-1] == f"FAIL ({LINES + 1} failures): export bad.jsonl", out[-1]
