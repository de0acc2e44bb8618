"""An export of a million bad lines takes the auditor's memory and hours of its time.

``claros verify`` goes on after a failure so that one run names them all, and kept every
failure to print at the end: about 250 bytes for a 2-byte line (``x``), so a 4 MB export
of bad lines took 490 MB, ran 66 s and printed two million lines, and a few hundred MB of
them exhaust any machine (~26 us a line: a GB of them, hours). The export is the
operator's to make (THREATS.md §4); bad input of any size must get a clear answer in
bounded memory, never a hang (§5).

Now the first 1,000 failures are listed and the others counted (``FAIL: and N more
failures, not listed``), and a file with 1,000 lines not in an export's shape is no export
Claros wrote: it is read no further (exit 2)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from claros.ledger import MAX_FAILURES_LISTED
from claros_guard.verify import MAX_BAD_LINES
from tests.api.conftest import Keys
from tests.security.test_ledger_rewrites import _checks, _export

LINES = 1_000_000
LIMIT_BYTES = 200 << 20  # the verify needs ~20 MB of memory here, ~60 MB of address space


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def _verify(export: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.verify", "--export", str(export)],
        capture_output=True, text=True, timeout=600, preexec_fn=_limited,
    )  # fmt: skip


def test_a_million_bad_lines_are_no_export(tmp_path: Path) -> None:
    export = tmp_path / "bad.jsonl"
    with export.open("wb") as f:
        f.write(b'{"type":"header","format":"claros-evidence/1","workspace":"acme"}\n')
        f.write(b"x\n" * LINES)
    got = _verify(export)
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 2, (got.returncode, got.stdout[-500:], got.stderr[-500:])
    assert (
        f"bad.jsonl is not an export Claros wrote: {MAX_BAD_LINES:,} of its lines (up to "
        f"line {MAX_BAD_LINES + 1:,}) are not in an export's shape; the rest was not read"
    ) in got.stderr, got.stderr


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_thousands_of_failing_entries_are_counted_not_all_listed(
    http: httpx.Client, keys: Keys, tmp_path: Path
) -> None:
    _checks(http, keys.agent, 3)
    lines = _export(http, keys, tmp_path / "e.jsonl").read_bytes().splitlines(keepends=True)
    last = max(i for i, ln in enumerate(lines) if ln.startswith(b'{"workspace"'))
    repeats = 3 * MAX_FAILURES_LISTED  # each the same entry again: out of order, bad link
    lines[last + 1 : last + 1] = [lines[last]] * repeats
    bad = tmp_path / "repeated.jsonl"
    bad.write_bytes(b"".join(lines))
    got = _verify(bad)
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 1, (got.returncode, got.stdout[-500:], got.stderr[-500:])
    out = got.stdout.splitlines()
    assert len(out) < MAX_FAILURES_LISTED + 20, len(out)
    total = int(out[-1].split("(")[1].split(" ")[0])
    assert total > repeats, out[-1]
    assert f"FAIL: and {total - MAX_FAILURES_LISTED:,} more failures, not listed" in out
