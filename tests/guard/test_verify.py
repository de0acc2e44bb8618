"""``claros verify --export`` offline, over the corpus in tests/data/exports/ (one file per
failure class, and valid ones, made by tests/export_corpus.py), the documented example,
and the command's edges: usage errors, progress, never importing boto3."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from claros.evidence.lines import LineError, parse_entry_line
from claros.ledger import ChainVerifier
from claros_guard.verify import main as verify
from tests.export_corpus import OUT, files

ROOT = Path(__file__).resolve().parents[2]
MANIFEST: list[dict[str, Any]] = json.loads((OUT / "manifest.json").read_text())
DOC = ROOT / "docs" / "evidence-format.md"


def _id(case: dict[str, Any]) -> str:
    return case["file"].removesuffix(".jsonl") + (
        "+saved" if "--checkpoints" in case["args"] else ""
    )


@pytest.mark.parametrize("case", MANIFEST, ids=[_id(c) for c in MANIFEST])
def test_corpus(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.chdir(OUT)
    assert verify(case["args"]) == case["exit"], capsys.readouterr().out
    out = capsys.readouterr().out
    assert re.search(case["output"], out), out


def test_every_failure_class_has_its_file() -> None:
    covered = {c["file"] for c in MANIFEST if c["exit"] == 1}
    for name in ("record-edited", "record-deleted", "entry-missing", "entries-reordered",
                 "broken-link", "checkpoint-bad-signature", "checkpoint-unknown-key",
                 "tail-cut-off", "rewritten-since-saved"):  # fmt: skip
        assert f"{name}.jsonl" in covered, name


def test_corpus_is_what_the_script_makes(tmp_path: Path) -> None:
    made = files(tmp_path)
    on_disk = {p.name for p in OUT.iterdir()}
    assert set(made) == on_disk, "run: .venv/bin/python -m tests.export_corpus"
    for name, data in made.items():
        assert (OUT / name).read_bytes() == data, f"{name} is stale: python -m tests.export_corpus"


def test_the_documented_example_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = DOC.read_text(encoding="utf-8")
    [block] = re.findall(r"```jsonl\n(.*?)```", doc, flags=re.S)
    assert block.encode() == (OUT / "example.jsonl").read_bytes()
    (tmp_path / "example.jsonl").write_text(block, encoding="utf-8")
    assert verify(["--export", str(tmp_path / "example.jsonl")]) == 0
    assert "3 compared (every record, offline)" in capsys.readouterr().out
    # The hand check the page walks through: the check's record and its entry hash.
    [line] = [ln for ln in block.splitlines() if ln.startswith('{"workspace":"acme","seq":2,')]
    check = json.loads(line)
    event = line.split(',"event":', 1)[1][:-1]
    assert hashlib.sha256(event.encode()).hexdigest() == check["payload_sha256"]
    assert check["payload_sha256"] in doc and check["hash"] in doc
    text = "\n".join(["acme", "2", "check", "chk_1", str(check["ts"]), check["payload_sha256"],
                      check["prev_hash"]])  # fmt: skip
    assert hashlib.sha256(text.encode()).hexdigest() == check["hash"]


def test_usage_and_io_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_export = tmp_path / "x.jsonl"
    not_export.write_text('{"type":"header","format":"something-else"}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x00\xff not json\n")
    bad_saved = tmp_path / "saved.json"
    bad_saved.write_text("[1, 2]")
    valid = str(OUT / "valid.jsonl")
    cases = [
        (["--export", str(tmp_path / "missing.jsonl")], "cannot read"),
        (["--export", str(not_export)], "is not a Claros evidence export"),
        (["--export", str(empty)], "is not a Claros evidence export"),
        (["--export", str(garbage)], "is not a Claros evidence export"),
        (["--export", valid, "--url", "http://x"], "leave out --url and --key"),
        (["--export", valid, "--checkpoints", str(bad_saved)], "holds no checkpoints"),
        (["--export", valid, "--checkpoints", str(garbage)], "is not JSON"),
    ]
    for args, message in cases:
        assert verify(args) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (args, err)
    with pytest.raises(SystemExit) as usage:
        verify(["--no-such-flag"])
    assert usage.value.code == 2


def test_save_from_an_export_then_catch_a_rewrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "mine.json"
    assert verify(["--export", str(OUT / "valid.jsonl"), "--save", str(saved)]) == 0
    assert [c["seq"] for c in json.loads(saved.read_text())["checkpoints"]] == [5, 10, 12]
    capsys.readouterr()
    rewritten = str(OUT / "rewritten-since-saved.jsonl")
    assert verify(["--export", rewritten, "--checkpoints", str(saved)]) == 1
    assert "log rewritten since saved checkpoints" in capsys.readouterr().out
    failing = tmp_path / "not-saved.json"
    assert verify(["--export", str(OUT / "record-edited.jsonl"), "--save", str(failing)]) == 1
    assert "not saved" in capsys.readouterr().err and not failing.exists()


def test_progress_bar_only_when_asked_or_on_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert verify(["--export", str(OUT / "valid.jsonl")]) == 0
    assert capsys.readouterr().err == ""  # stderr is not a terminal here
    assert verify(["--export", str(OUT / "valid.jsonl"), "--progress"]) == 0
    err = capsys.readouterr().err
    assert "verifying [" in err and "/ 12 entries" in err and err.endswith("\n")


def test_a_record_in_another_layout_is_still_compared() -> None:
    """The fast path hashes the event's bytes; a record written differently (spaces, other
    key order) is parsed and compared as the record it is, not called edited."""
    line = next(ln for ln in (OUT / "valid.jsonl").read_bytes().splitlines()
                if ln.startswith(b'{"workspace":"acme","seq":1,'))  # fmt: skip
    data = json.loads(line)
    pretty = json.dumps(data, indent=2, sort_keys=False).encode().replace(b"\n", b" ")
    for form in (line, pretty):
        parsed = parse_entry_line(form)
        verifier = ChainVerifier("acme", compare_records=True)
        verifier.feed_raw(parsed.entry, parsed.raw)
        report = verifier.finish()
        assert report.ok and report.records_compared == 1, report.failures


def test_an_entry_line_nested_too_deeply_is_a_line_error() -> None:
    # Its fields are read by the stdlib's raw_decode first (a line not in the writer's
    # layout), which raises RecursionError, not ValueError, on deep nesting.
    deep = b'{"workspace":"acme","x":' + b"[" * 100_000 + b"]" * 100_000 + b',"event":{}}'
    with pytest.raises(LineError, match="not JSON"):
        parse_entry_line(deep)


CLIENT_ONLY = """
import sys
from claros_guard.cli import main
code = main(["verify", "--export", sys.argv[1]])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("boto3", "botocore"))
assert not heavy, heavy
sys.exit(code)
"""


def test_verify_never_imports_boto3() -> None:
    done = subprocess.run([sys.executable, "-c", CLIENT_ONLY, str(OUT / "valid.jsonl")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: export valid.jsonl" in done.stdout


def test_the_command_line_skips_the_last_collection_a_call_does_not(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `claros verify` as a process's command: it ends next, and its last collection at
    # exit would walk every object it holds. Called from code (argv given), it collects.
    import gc

    from claros_guard.cli import main

    args = ["verify", "--export", str(OUT / "valid.jsonl")]
    frozen = gc.get_freeze_count()
    try:
        assert main(args) == 0 and gc.get_freeze_count() == frozen
        monkeypatch.setattr(sys, "argv", ["claros", *args])
        assert main() == 0 and gc.get_freeze_count() > frozen
        monkeypatch.setattr(sys, "argv", ["claros", "verify", "--export", "nonesuch.jsonl"])
        gc.unfreeze()
        assert main() == 2 and gc.get_freeze_count() > 0  # the same on a failure
    finally:
        gc.unfreeze()
    assert "OK: export valid.jsonl" in capsys.readouterr().out
