"""``claros verify --export`` with worker processes (claros_guard.verify_parallel) says
exactly what the serial path says (``--workers 1``) and the general path (no fast run):
on every file of the corpus, on a tampered line in any buffer, a broken link at a
buffer's boundary, a truncated file, a bad checkpoint, saved checkpoints; and it falls
back to the serial reader when a worker fails or no worker can start.

The exports here are small: the size from which the workers are used is lowered to 0 and
the buffers handed to them to a few lines, so that every line sits in some buffer at
some place, and ``take`` is watched to show the parallel path did run."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

import claros_guard.verify as verify_module
import claros_guard.verify_parallel as vp
import tests.guard.test_verify_fast as fast
from claros.ledger import ChainVerifier, PublicKey, key_id_for
from claros_guard.verify import main as verify
from tests.export_corpus import OUT
from tests.guard.test_verify_fast import EDITS, VALID, _at, _export, _general_only

MANIFEST: list[dict[str, Any]] = json.loads((OUT / "manifest.json").read_text())
# Edits whose text holds seq 150 ("chk_150", "seq":150), or at 200 (moved 199 on, past
# the end): tried where they change something.
WORDED_AT_150 = {
    "an escaped ref_id",
    "a non-ASCII ref_id",
    "leading zero seq",
    "checkpointed entry edited",
}  # fmt: skip  (seq 200: tried at 3 and 150)


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Workers used at any size, buffers of ~5 lines; what each ``take`` answered."""
    monkeypatch.setattr(vp, "MIN_BYTES", 0)
    monkeypatch.setattr(vp, "SLOT", 2048)
    monkeypatch.setattr("claros_guard.verify.default_workers", lambda: 2)
    took: list[bool] = []
    real = vp.ParallelEntries.take

    def watched(self: vp.ParallelEntries, *args: Any) -> bool:
        got = real(self, *args)
        took.append(got)
        return got

    monkeypatch.setattr(vp.ParallelEntries, "take", watched)
    return took


def _saved(tmp_path: Path, data: bytes) -> Path:
    """``data`` as an export file in ``tmp_path``."""
    path = tmp_path / "export.jsonl"
    path.write_bytes(data)
    return path


@pytest.fixture
def clean_export(tmp_path: Path) -> Path:
    """An untouched export of 350 entries."""
    return _saved(tmp_path, _export(350))


def _three(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[tuple[int, str], tuple[int, str], tuple[int, str]]:
    """(with 2 workers, with 1, the general path only): exit code and output of each."""
    many = verify([*args, "--workers", "2"]), capsys.readouterr().out
    one = verify([*args, "--workers", "1"]), capsys.readouterr().out
    with monkeypatch.context() as m:
        _general_only(m)
        general = verify([*args, "--workers", "1"]), capsys.readouterr().out
    return many, one, general


@pytest.mark.parametrize("case", MANIFEST, ids=[c["file"] for c in MANIFEST])
def test_corpus_says_the_same_with_workers(
    case: dict[str, Any],
    parallel: list[bool],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(OUT)
    many, one, general = _three(case["args"], monkeypatch, capsys)
    assert many == one == general


@pytest.mark.parametrize("name", EDITS)
@pytest.mark.parametrize("at", [3, 150, 349])
def test_a_line_tampered_in_any_buffer_says_the_same_with_workers(
    name: str,
    at: int,
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if at != 150 and name in WORDED_AT_150 and not (at == 3 and name.startswith("checkp")):
        pytest.skip("this edit names seq 150 in its text: it is tried there")
    edit = EDITS[name]
    path = _saved(tmp_path, _export(350, lambda seq, e, ln: edit(seq - at + 150, e, ln)))
    many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
    assert many == one == general
    assert many[0] == (0 if name in VALID else 1), many[1]
    assert parallel[0] is True  # the workers did check it


@pytest.mark.slow  # runs first among the tests spread one by one (tests/conftest.py)
def test_a_broken_link_at_every_place_says_the_same_with_workers(
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Buffers of ~5 lines: among 2..40 every line starts a buffer at some size, ends one
    # at another, or sits inside one.
    broken = EDITS["link broken"]
    for size in (1024, 1500, 2048):
        monkeypatch.setattr(vp, "SLOT", size)
        for seq in range(2, 41):
            path = tmp_path / f"link-{seq}.jsonl"
            path.write_bytes(_export(40, lambda s, e, ln, seq=seq: broken(s - seq + 150, e, ln)))
            many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
            assert many == one == general, (size, seq)
            assert many[0] == 1 and f"broken link: prev_hash {'1' * 64}" in many[1]
    assert all(parallel)


def test_a_truncated_export_says_the_same_with_workers(
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    whole = _export(120)
    path = tmp_path / "cut.jsonl"
    for cut in (len(whole) // 2, len(whole) - 300, len(whole) - 1, len(whole) * 9 // 10):
        path.write_bytes(whole[:cut])
        many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
        assert many == one == general, cut
        if cut == len(whole) - 1:  # only the signature line's newline: still whole
            assert many[0] == 0, many[1]
        else:
            assert many[0] == 1 and "the export is not signed" in many[1]


@pytest.mark.parametrize("name", ["checkpointed entry edited", "record edited", "CRLF"])
def test_a_checkpoint_that_disagrees_says_the_same_with_workers(
    name: str,
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _saved(tmp_path, _export(350, _at(300, lambda e, ln: EDITS[name](150, e, ln))))
    many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
    assert many == one == general


def test_a_bad_checkpoint_signature_says_the_same_with_workers(
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = _export(350).splitlines(keepends=True)
    cp = json.loads(lines[3])  # the checkpoint at seq 200
    assert cp["type"] == "checkpoint" and cp["seq"] == 200
    cp["signature"] = cp["signature"][::-1]
    lines[3] = (json.dumps(cp, separators=(",", ":")) + "\n").encode()
    path = _saved(tmp_path, b"".join(lines))
    many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
    assert many == one == general
    assert many[0] == 1 and "bad signature" in many[1]


def test_saved_checkpoints_are_compared_with_workers(
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good, saved = tmp_path / "good.jsonl", tmp_path / "saved.json"
    good.write_bytes(_export(350))
    assert verify(["--export", str(good), "--save", str(saved)]) == 0
    capsys.readouterr()
    rewritten = tmp_path / "rewritten.jsonl"
    rewritten.write_bytes(_export(350, other=150))
    for path, code in ((good, 0), (rewritten, 1)):
        args = ["--export", str(path), "--checkpoints", str(saved)]
        many, one, general = _three(args, monkeypatch, capsys)
        assert many == one == general
        assert many[0] == code, many[1]


def test_a_worker_that_fails_hands_its_buffer_to_the_serial_reader(
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _saved(tmp_path, _export(350, EDITS["record edited"]))
    calls: list[int] = []
    real = vp.scan

    def flaky(slot: int, length: int, *rest: Any) -> Any:
        if slot % 2:
            raise MemoryError("a worker ran out of memory")
        return real(slot, length, *rest)

    monkeypatch.setattr(vp, "scan", flaky)
    many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
    assert many == one == general
    assert many[0] == 1 and "record chk_150 edited" in many[1]
    assert parallel[0] is True and not calls


def test_a_worker_killed_mid_buffer_hands_its_buffers_to_the_serial_reader(
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A worker that dies (out of memory, a signal) never answers: its pipe closes, and
    # the parent checks the buffers it held, and every later one, itself.
    path = _saved(tmp_path, _export(350, EDITS["record edited"]))
    real = vp.scan

    def killed(slot: int, length: int, *rest: Any) -> Any:
        if slot == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(slot, length, *rest)

    monkeypatch.setattr(vp, "scan", killed)
    many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
    assert many == one == general
    assert many[0] == 1 and "record chk_150 edited" in many[1]
    assert parallel[0] is True


def test_no_worker_processes_falls_back_to_the_serial_path(
    parallel: list[bool],
    clean_export: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:

    def no_fork() -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(vp.os, "fork", no_fork)
    many, one, _ = _three(["--export", str(clean_export)], monkeypatch, capsys)
    assert many == one and many[0] == 0
    assert parallel[0] is False


def test_a_line_longer_than_a_buffer_is_read_by_the_parent(
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(vp, "SLOT", 300)  # shorter than an entry line
    path = _saved(tmp_path, _export(350, EDITS["hash edited"]))
    many, one, general = _three(["--export", str(path)], monkeypatch, capsys)
    assert many == one == general and many[0] == 1


def test_small_exports_and_one_worker_stay_serial(
    clean_export: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    took: list[bool] = []
    monkeypatch.setattr(vp.ParallelEntries, "take", lambda *a: took.append(True) or True)
    assert verify(["--export", str(clean_export), "--workers", "2"]) == 0  # below MIN_BYTES
    monkeypatch.setattr(vp, "MIN_BYTES", 0)
    assert verify(["--export", str(clean_export), "--workers", "1"]) == 0
    assert took == []
    capsys.readouterr()


@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_workers_must_be_a_positive_number(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        verify(["--export", "x.jsonl", "--workers", bad])
    assert exc.value.code == 2
    assert "is not a number of processes (1 or more)" in capsys.readouterr().err


def test_the_workers_use_the_fast_runs_own_checks(
    parallel: list[bool], clean_export: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a worker answers is what ChainVerifier.feed_written_run took: no other check.
    assert vp.scan.__code__.co_names.count("feed_written_run") == 1
    assert hasattr(ChainVerifier, "take_run")
    assert verify(["--export", str(clean_export), "--workers", "2"]) == 0
    assert "350 compared" in capsys.readouterr().out and parallel == [True]


@pytest.mark.parametrize("batch", [2, 4096])
def test_checkpoint_signatures_checked_by_workers_settle_in_line_order(
    batch: int,
    parallel: list[bool],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("claros_guard.verify.SIGNATURE_BATCH", batch)
    checked: list[int] = []
    real = vp.SignatureChecks.submit

    def watched(self: vp.SignatureChecks, jobs: Any) -> Any:
        got = real(self, jobs)
        checked.append(len(jobs) if self.workers.procs or not jobs else -1)
        return got

    monkeypatch.setattr(vp.SignatureChecks, "submit", watched)
    # A key line after three checkpoints, a checkpoint listed twice: as the serial path.
    fast.test_a_checkpoint_before_its_key_line_is_checked_once_the_keys_are_known(tmp_path, capsys)
    fast.test_a_checkpoint_listed_twice_counts_its_last_line(tmp_path, capsys)
    assert checked and all(n >= 0 for n in checked)  # the workers did check them
    assert (batch == 2) == (len(checked) > 4)  # in batches of 2: more than one a run
    # And the saved-checkpoints and bad-signature cases, in batches too.
    test_a_bad_checkpoint_signature_says_the_same_with_workers(
        parallel, tmp_path, monkeypatch, capsys
    )
    test_saved_checkpoints_are_compared_with_workers(parallel, tmp_path, monkeypatch, capsys)


def _echo(n: int, sent: bytes, answer: int) -> tuple[int, int, bytes]:
    """A worker's task in the tests below: what it was sent, and ``answer`` bytes."""
    return n, len(sent), bytes(answer)


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(vp, "_echo", _echo, raising=False)  # before the fork: theirs too
    pool = vp.Workers(2)
    assert pool.start("acme")
    yield pool
    pool.close()


def test_a_busy_worker_has_its_next_task_waiting_in_its_pipe(workers: vp.Workers) -> None:
    # Sent ahead, so that it starts on it the moment it answers, not once this process
    # (busy hashing a buffer, say) has taken the answer and sent another.
    answers = [workers.apply("_echo", (n, b"", 0)) for n in range(5)]
    assert [len(w.tasks) for w in workers.procs] == [1 + vp.AHEAD] * 2
    assert len(workers.queue) == 1  # the fifth waits here
    assert [a.get(10) for a in answers] == [(n, 0, b"") for n in range(5)]
    assert not workers.queue and not any(w.tasks for w in workers.procs)


def test_a_large_task_waits_for_a_worker_with_nothing_to_do(workers: vp.Workers) -> None:
    # A task sent ahead sits in a pipe while its worker may be sending a large answer:
    # only a small one may, or each side would wait for the other.
    large = bytes(vp.AHEAD_BYTES)
    first = [workers.apply("_echo", (n, b"", 0)) for n in range(2)]
    waiting = workers.apply("_echo", (2, large, 0))
    assert [len(w.tasks) for w in workers.procs] == [1, 1] and len(workers.queue) == 1
    assert first[0].get(10) == (0, 0, b"")  # a worker is free: it goes there, alone
    assert not workers.queue and all(len(w.tasks) <= 1 for w in workers.procs)
    assert waiting.get(10) == (2, len(large), b"") and first[1].get(10) == (1, 0, b"")


ANSWERS_LARGER_THAN_A_PIPE = """
import claros_guard.verify_parallel as vp
from tests.guard.test_verify_parallel import _echo

vp._echo = _echo
vp.AHEAD_BYTES = int(sys.argv[1])
pool = vp.Workers(2)
assert pool.start("acme")
answers = [pool.apply("_echo", (n, bytes(int(sys.argv[2])), 1 << 20)) for n in range(8)]
print([(n, size, len(data)) for n, size, data in (a.get(30) for a in answers)])
pool.close()
"""


def _larger_than_a_pipe(ahead_bytes: int, task_bytes: int, wait: float = 60) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + ANSWERS_LARGER_THAN_A_PIPE, str(ahead_bytes),
         str(task_bytes)],
        capture_output=True, text=True, timeout=wait, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_answers_larger_than_a_pipe_while_tasks_wait_ahead() -> None:
    # Each answer is several times what a pipe holds, each worker with a task ahead:
    # neither side waits for the other for ever (in a process of its own, so that a
    # hang is a timeout here).
    got = _larger_than_a_pipe(vp.AHEAD_BYTES, 1000)
    assert got == f"{[(n, 1000, 1 << 20) for n in range(8)]}\n"


def test_a_task_sent_ahead_larger_than_a_pipe_would_hang() -> None:
    # What the bound on a task sent ahead is for: without it, this waits for ever.
    with pytest.raises(subprocess.TimeoutExpired):
        _larger_than_a_pipe(1 << 30, 300_000, wait=5)


def test_the_workers_end_once_every_answer_is_in(
    parallel: list[bool],
    clean_export: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Told so when the last answer is in, they end while the parent takes the last
    # buffers, not after: by the time it closes them, each has ended on its own.
    ended: list[bool] = []
    real = vp.Workers.close

    def close(self: vp.Workers) -> None:
        for worker in self.procs:
            for _ in range(1000):  # bounded: up to ~10 s for a loaded machine
                pid, status = os.waitpid(worker.pid, os.WNOHANG)
                if pid:
                    ended.append(os.waitstatus_to_exitcode(status) == 0)
                    break
                time.sleep(0.01)
            else:
                ended.append(False)
        real(self)

    monkeypatch.setattr(vp.Workers, "close", close)
    assert verify(["--export", str(clean_export), "--workers", "2"]) == 0
    assert parallel == [True] and ended == [True, True]
    capsys.readouterr()


def test_a_batch_of_signatures_is_checked_in_small_tasks_answered_in_order(
    workers: vp.Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tasks of SIGNATURE_TASK, taken by whichever worker is free: both end a batch at
    # about the same time. The answers are in the order of the jobs whatever the order
    # the tasks end in; a bad signature is named at its place.
    signing = SigningKey(bytes(range(32)))
    raw = bytes(signing.verify_key)
    key = PublicKey("acme", key_id_for(raw), base64.b64encode(raw).decode(), 0)
    jobs = []
    for n in range(100):
        message = b"checkpoint %d" % n
        signature = signing.sign(message).signature if n != 77 else bytes(64)
        jobs.append((key, message, base64.b64encode(signature).decode()))
    sizes: list[int] = []
    real = workers.apply

    def apply(name: str, args: tuple[Any, ...]) -> Any:
        sizes.append(len(args[0]))
        return real(name, args)

    monkeypatch.setattr(workers, "apply", apply)
    checks = vp.SignatureChecks(workers)
    checks.workspace = "acme"
    assert checks.submit(jobs)() == [n != 77 for n in range(100)]
    assert sizes == [vp.SIGNATURE_TASK] * 3 + [100 - 3 * vp.SIGNATURE_TASK]


WHAT_THE_WORKERS_START_WITH = """
import sys
import claros_guard.verify_parallel as vp
from claros_guard.cli import main

vp.MIN_BYTES, vp.SLOT = 0, 2048
code = main(["verify", "--export", sys.argv[1], "--workers", "2"])
print(sorted(m for m in sys.modules if m.split(".")[0] in ("multiprocessing", "selectors")))
sys.exit(code)
"""


def test_the_workers_start_without_multiprocessing(clean_export: Path) -> None:
    # Its Pipe and wait cost ~15 ms of imports before the first fork (and wait builds a
    # selector each call): two os.pipe() a worker and select.poll do the same.
    done = subprocess.run(
        [sys.executable, "-c", WHAT_THE_WORKERS_START_WITH, str(clean_export)],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "[]" and "OK: export" in done.stdout


def test_verify_defines_no_dataclass() -> None:
    # Importing dataclasses imports inspect, ast, dis and tokenize (~41 million
    # instructions) and each one compiles its methods: all before the first line is read.
    for module in (vp, verify_module):
        made_here = [
            v for v in vars(module).values() if getattr(v, "__module__", "") == module.__name__
        ]
        assert not [v for v in made_here if dataclasses.is_dataclass(v)], module.__name__
