"""``claros verify``'s fast run over entry lines (``ChainVerifier.feed_written_run``) says
exactly what the general path says: on every file of the corpus, and on a long export
tampered in the middle of a run in each way the fast run must hand over (an edited
record, hash, link, workspace, kind, seq; a checkpoint that disagrees; another layout)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from claros.chunked import ChunkedLines
from claros.evidence.export import ExportPlan
from claros.evidence.lines import entry_line, typed_line
from claros.ledger import (
    ZERO_HASH,
    ChainVerifier,
    Checkpoint,
    Entry,
    PublicKey,
    checkpoint_message,
    entry_hash,
    key_id_for,
)
from claros_guard.verify import main as verify
from tests.export_corpus import OUT

MANIFEST: list[dict[str, Any]] = json.loads((OUT / "manifest.json").read_text())
WS = "acme"
T0 = 1_790_812_800_000
KEY = SigningKey(hashlib.sha256(b"claros tests: the fast run").digest())


def _general_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def none(self: ChainVerifier, source: ChunkedLines, *_: Any) -> int:
        return 0

    monkeypatch.setattr(ChainVerifier, "feed_written_run", none)


def _both(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[tuple[int, str], tuple[int, str]]:
    fast = verify(args), capsys.readouterr().out
    with monkeypatch.context() as m:
        _general_only(m)
        general = verify(args), capsys.readouterr().out
    return fast, general


@pytest.mark.parametrize("case", MANIFEST, ids=[c["file"] for c in MANIFEST])
def test_corpus_says_the_same_on_both_paths(
    case: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(OUT)
    fast, general = _both(case["args"], monkeypatch, capsys)
    assert fast == general


def _record(seq: int) -> bytes:
    rules = '[{"id":"r1","matched":false}]'
    return f'{{"amount":{seq},"check_id":"chk_{seq}","result":"allow","rules":{rules}}}'.encode()


def _export(
    n: int, edit: Callable[[int, Entry, bytes], bytes] | None = None, other: int = 0
) -> bytes:
    """An n-entry signed export, a checkpoint every 100; ``edit`` rewrites entry lines;
    the record at seq ``other`` is another one (the chain and checkpoints made anew)."""
    raw_key = bytes(KEY.verify_key)
    key = PublicKey(WS, key_id_for(raw_key), base64.b64encode(raw_key).decode(), T0)
    prev, body, cps = ZERO_HASH, [], []
    for seq in range(1, n + 1):
        rec = _record(-seq if seq == other else seq)
        payload = hashlib.sha256(rec).hexdigest()
        digest = entry_hash(WS, seq, "check", f"chk_{seq}", T0 + seq, payload, prev)
        entry = Entry(WS, seq, "check", f"chk_{seq}", T0 + seq, payload, prev, digest)
        line = entry_line(entry, rec)
        body.append(edit(seq, entry, line) if edit else line)
        if seq % 100 == 0:
            sig = KEY.sign(checkpoint_message(WS, seq, digest, T0 + seq)).signature
            cps.append(
                Checkpoint(WS, seq, digest, T0 + seq, key.key_id, base64.b64encode(sig).decode())
            )
        prev = digest
    plan = ExportPlan(WS, T0 + n + 1, 1, n, prev, [key], cps)
    lines = [typed_line("header", plan.header()), typed_line("public_key", key.to_json())]
    lines += [typed_line("checkpoint", cp.to_json()) for cp in cps] + body
    sha = hashlib.sha256(b"".join(lines)).digest()
    signature = {"sha256": sha.hex(), "algorithm": "Ed25519", "key_id": key.key_id,
                 "signature": base64.b64encode(KEY.sign(sha).signature).decode()}  # fmt: skip
    return b"".join(lines) + typed_line("signature", signature)


def _at(
    target: int, change: Callable[[Entry, bytes], bytes]
) -> Callable[[int, Entry, bytes], bytes]:
    return lambda seq, entry, line: change(entry, line) if seq == target else line


EDITS: dict[str, Callable[[int, Entry, bytes], bytes]] = {
    "none": lambda seq, entry, line: line,
    "record edited": _at(150, lambda e, ln: ln.replace(b'"allow"', b'"block"')),
    "record deleted": _at(150, lambda e, ln: entry_line(e, None)),
    "record not an object": _at(150, lambda e, ln: entry_line(e, b"[1]")),
    "hash edited": _at(150, lambda e, ln: ln.replace(e.hash.encode(), b"0" * 64)),
    "link broken": _at(150, lambda e, ln: ln.replace(e.prev_hash.encode(), b"1" * 64)),
    "checkpointed entry edited": _at(200, lambda e, ln: ln.replace(e.hash.encode(), b"2" * 64)),
    "entry dropped": _at(150, lambda e, ln: b""),
    "entry doubled": _at(150, lambda e, ln: ln + ln),
    "other workspace": _at(150, lambda e, ln: ln.replace(b'"acme"', b'"acmf"', 1)),
    "a prune kind": _at(150, lambda e, ln: ln.replace(b'"check"', b'"prune"', 1)),
    "a public key kind": _at(150, lambda e, ln: ln.replace(b'"check"', b'"public_key"', 1)),
    "an escaped ref_id": _at(150, lambda e, ln: ln.replace(b'"chk_150"', b'"chk_\\u0031\\u00350"')),
    "a non-ASCII ref_id": _at(150, lambda e, ln: ln.replace(b'"chk_150"', '"chk_é"'.encode())),
    "CRLF": _at(150, lambda e, ln: ln[:-1] + b"\r\n"),
    "spaces after the colon": _at(150, lambda e, ln: ln.replace(b'"seq":', b'"seq": ')),
    "leading zero seq": _at(150, lambda e, ln: ln.replace(b'"seq":150', b'"seq":0150')),
    "not JSON": _at(150, lambda e, ln: b"{oops\n"),
    "every line edited": lambda seq, e, ln: ln.replace(b'"allow"', b'"block"'),
}


# The same text, written another way: still a valid export.
VALID = {"none", "an escaped ref_id", "spaces after the colon", "CRLF"}


@pytest.mark.parametrize("name", EDITS)
def test_a_long_export_tampered_says_the_same_on_both_paths(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(_export(350, EDITS[name]))
    fast, general = _both(["--export", str(path)], monkeypatch, capsys)
    assert fast == general
    assert fast[0] == (0 if name in VALID else 1), fast[1]


def test_saved_checkpoints_are_compared_on_the_fast_path_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    good, saved = tmp_path / "good.jsonl", tmp_path / "saved.json"
    good.write_bytes(_export(350))
    assert verify(["--export", str(good), "--save", str(saved)]) == 0
    capsys.readouterr()
    # The log rewritten from seq 150 on, consistently re-hashed and re-signed.
    rewritten = tmp_path / "rewritten.jsonl"
    rewritten.write_bytes(_export(350, other=150))
    fast, general = _both(
        ["--export", str(rewritten), "--checkpoints", str(saved)], monkeypatch, capsys
    )
    assert fast == general
    assert fast[0] == 1


def test_the_fast_run_takes_the_entries_of_a_valid_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(_export(350))
    taken: list[int] = []
    real = ChainVerifier.feed_written_run

    def counted(self: ChainVerifier, *args: Any) -> int:
        got = real(self, *args)
        taken.append(got)
        return got

    monkeypatch.setattr(ChainVerifier, "feed_written_run", counted)
    assert verify(["--export", str(path)]) == 0, capsys.readouterr().out
    assert taken == [349]  # all but the first entry (the chain's start), in one run


def _resigned(lines: list[bytes]) -> bytes:
    """The lines with a new export signature (the last line replaced)."""
    body = b"".join(lines[:-1])
    sha = hashlib.sha256(body).digest()
    sig = json.loads(lines[-1])
    sig.update(sha256=sha.hex(), signature=base64.b64encode(KEY.sign(sha).signature).decode())
    return body + typed_line("signature", {k: v for k, v in sig.items() if k != "type"})


def test_a_checkpoint_before_its_key_line_is_checked_once_the_keys_are_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Checkpoints are checked as their lines go by; one whose key comes later is checked
    # when the entries start, as every checkpoint was before.
    lines = _export(350).splitlines(keepends=True)
    lines.insert(4, lines.pop(1))  # the key line after the first three checkpoints
    path = tmp_path / "export.jsonl"
    path.write_bytes(_resigned(lines))
    assert verify(["--export", str(path)]) == 0, capsys.readouterr().out
    assert "3 verified" in capsys.readouterr().out


def test_a_checkpoint_listed_twice_counts_its_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _export(350).splitlines(keepends=True)
    bogus = json.loads(lines[2])
    bogus["hash"] = "0" * 64  # its signature no longer holds
    lines.insert(2, typed_line("checkpoint", {k: v for k, v in bogus.items() if k != "type"}))
    path = tmp_path / "export.jsonl"
    path.write_bytes(_resigned(lines))
    assert verify(["--export", str(path)]) == 0, capsys.readouterr().out
    lines[2], lines[3] = lines[3], lines[2]  # the bogus one last: it is the one that counts
    path.write_bytes(_resigned(lines))
    assert verify(["--export", str(path)]) == 1
    assert "bad signature" in capsys.readouterr().out


@pytest.mark.parametrize("size", [1, 97, 4096])
@pytest.mark.parametrize(
    "name", ["none", "record edited", "checkpointed entry edited", "entry doubled", "CRLF"]
)
def test_reads_of_any_size_say_the_same_on_both_paths(
    name: str,
    size: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The fast run works on the reader's buffer: a line cut by a read, a buffer of one
    # line or of a few, change nothing it says.
    monkeypatch.setattr("claros.chunked.CHUNK", size)
    path = tmp_path / "export.jsonl"
    path.write_bytes(_export(350, EDITS[name]))
    fast, general = _both(["--export", str(path)], monkeypatch, capsys)
    assert fast == general
    assert fast[0] == (0 if name in VALID else 1), fast[1]
    monkeypatch.undo()
    assert verify(["--export", str(path)]) == fast[0]
    assert capsys.readouterr().out == fast[1]  # and the same as with the usual size


def test_an_export_with_no_newline_at_its_end_says_so_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The last entry before an unended line is still taken; the cut line is read whole.
    lines = _export(350).splitlines(keepends=True)
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(lines[:-1])[:-1])  # no signature line, the last entry unended
    fast, general = _both(["--export", str(path)], monkeypatch, capsys)
    assert fast == general
    assert fast[0] == 1 and "the export is not signed" in fast[1]
