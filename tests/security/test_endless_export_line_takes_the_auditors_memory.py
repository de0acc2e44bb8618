"""An export holding one endless line takes all of the auditor's memory.

``claros verify --export`` reads an export a quarter of a megabyte at a time, but a line
was read whole before anything looked at it, and then copied and parsed: a 400 MB line
took 1.66 GB of memory (about four times its size). The export comes from the operator
(THREATS.md §4), so one line of a few GB added to it kills the auditor's verify (out of
memory) instead of failing it: bad input of any size must get a clear answer in bounded
memory (§5).

Now a line longer than 64 MB (``claros_guard.verify.MAX_LINE``; a record is at most a
request body, 1 MB by default) is read no further: exit 2, naming the file."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from claros_guard.verify import MAX_LINE
from tests.api.conftest import Keys
from tests.security.test_ledger_rewrites import _checks, _export

# The verify may use this much address space: far above what it needs (~150 MB with its
# workers), far below what reading the line whole took.
LIMIT_BYTES = 700 << 20
LINE_BYTES = 3 * MAX_LINE


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def _with_endless_line(export: Path, out: Path) -> Path:
    """``export`` with a line of LINE_BYTES after its first entry, the rest as it was."""
    lines = export.read_bytes().splitlines(keepends=True)
    first = next(i for i, ln in enumerate(lines) if ln.startswith(b'{"workspace"'))
    with out.open("wb") as f:
        f.writelines(lines[: first + 1])
        f.write(b'{"workspace":"acme","event":"')
        block = b"a" * (1 << 20)
        for _ in range(LINE_BYTES >> 20):
            f.write(block)
        f.write(b'"}\n')
        f.writelines(lines[first + 1 :])
    return out


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_an_endless_line_is_refused_in_bounded_memory(
    http: httpx.Client, keys: Keys, tmp_path: Path, workers: str
) -> None:
    _checks(http, keys.agent, 3)
    big = _with_endless_line(_export(http, keys, tmp_path / "e.jsonl"), tmp_path / "big.jsonl")
    got = subprocess.run(
        [sys.executable, "-m", "claros_guard.verify", "--export", str(big), "--workers", workers],
        capture_output=True, text=True, timeout=300, preexec_fn=_limited,
    )  # fmt: skip
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 2, (got.returncode, got.stdout[-500:], got.stderr[-500:])
    assert f"{big} is not an export Claros wrote: a line is longer than" in got.stderr
