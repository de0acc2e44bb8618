"""``claros verify`` on malformed input: a clear failure (exit 1) or usage error (exit 2),
never a traceback or a hang (THREATS.md §4, §5).

A key file (``--keys``, ``--checkpoints``) is read with the stdlib's JSON parser, which
reads ``1e999`` as infinity; ``PublicKey.from_json`` then does ``int(inf)``, an
OverflowError that nobody catches: a traceback and exit 1 ("verification failed")
instead of exit 2 and the file named.

An export is read with ``claros.jsonutil`` (numbers with a fraction or exponent parse as
Decimal); ``PublicKey.from_json`` and the kept lines' ``int(data["seq"])`` then turn a
20-byte ``1e100000000`` into a 100-million-digit integer, which takes hours: one line
added to an export makes the auditor's verify hang instead of failing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import Keys
from tests.security.test_ledger_rewrites import _checks
from tests.security.test_ledger_rewrites import _export as export_to

PROMPTLY = 20  # seconds


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.verify", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _export(http: httpx.Client, keys: Keys, path: Path) -> Path:
    """An export of three checks."""
    _checks(http, keys.agent, 3)
    return export_to(http, keys, path)


@pytest.mark.parametrize("option", ["--keys", "--checkpoints"])
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_key_file_with_an_infinite_created_at_is_a_usage_error(
    http: httpx.Client, keys: Keys, tmp_path: Path, option: str
) -> None:
    export = _export(http, keys, tmp_path / "e.jsonl")
    saved = tmp_path / "saved.json"
    assert _cli("--export", str(export), "--save", str(saved)).returncode == 0
    data = json.loads(saved.read_text())
    data["public_keys"][0]["created_at"] = "@INF@"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data).replace('"@INF@"', "1e999"))
    got = _cli("--export", str(export), option, str(bad))
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 2, (got.returncode, got.stdout, got.stderr[-500:])
    assert str(bad) in got.stderr


@pytest.mark.parametrize("line", ["public_key", "kept"])
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_huge_exponent_in_an_export_fails_promptly(
    http: httpx.Client, keys: Keys, tmp_path: Path, line: str
) -> None:
    export = _export(http, keys, tmp_path / "e.jsonl")
    lines = export.read_bytes().splitlines(keepends=True)
    if line == "public_key":
        at = next(i for i, ln in enumerate(lines) if b'"type":"public_key"' in ln)
        data = json.loads(lines[at])
        data["created_at"] = "@BIG@"
        lines[at] = json.dumps(data, separators=(",", ":")).replace('"@BIG@"', "1e100000000")
        lines[at] = lines[at].encode() + b"\n"
    else:
        first_entry = next(i for i, ln in enumerate(lines) if ln.startswith(b'{"workspace"'))
        kept = b'{"type":"kept","seq":1e100000000,"kind":"rule_version","ref_id":"r","event":{}}\n'
        lines.insert(first_entry, kept)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(lines))
    try:
        # Bounded: fixed, it answers in well under a second (a start-up); before, hours.
        got = _cli("--export", str(bad), timeout=PROMPTLY)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"claros verify still ran after {PROMPTLY} s on a one-line edit of a 3-entry export"
        )
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 1, (got.stdout, got.stderr)
    assert "FAIL: ledger (-): line" in got.stdout and "must be a whole number" in got.stdout


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_deeply_nested_entry_line_is_a_failure_not_a_traceback(
    http: httpx.Client, keys: Keys, tmp_path: Path
) -> None:
    """An entry line not in the writer's layout has its fields read by the stdlib's
    ``raw_decode`` (claros.evidence.lines.parse_entry_line), which raises RecursionError
    on deep nesting; only ValueError is caught there, so verify dies with a traceback."""
    export = _export(http, keys, tmp_path / "e.jsonl")
    lines = export.read_bytes().splitlines(keepends=True)
    deep = b'{"workspace":"acme","x":' + b"[" * 200_000 + b"]" * 200_000 + b',"event":{}}\n'
    lines.insert(len(lines) - 1, deep)  # just before the signature line
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(lines))
    got = _cli("--export", str(bad))
    assert "Traceback" not in got.stderr, got.stderr[-800:]
    assert got.returncode == 1, (got.stdout, got.stderr[-500:])
    assert "FAIL:" in got.stdout, got.stdout
