"""``claros verify``: re-check a workspace's ledger on your own machine.

    claros verify [--url U] [--key K] [--save FILE] [--checkpoints FILE] [--keys FILE]
                  [--progress]
    claros verify --export FILE [--checkpoints FILE] [--keys FILE] [--save FILE] [--progress]
                  [--workers N]

Online, it downloads the ledger (``GET /v1/ledger/entries`` page by page), the signed
checkpoints and the public keys, and checks everything here with the very code the server
uses (``claros.ledger.ChainVerifier``). With an audit or admin key every record is
compared with its entry; with an agent or service key, the chain and signatures only.
Offline, ``--export`` checks an evidence export (``GET /api/evidence/export``): every
record, every link, every signature and the export's own signature, with no key and no
access to Claros. A large export's entries are checked by worker processes
(``claros_guard.verify_parallel``, ``--workers N``), with the same result.

``--save FILE`` keeps the checkpoints that were just verified (and the public keys). Put
that file where Claros cannot change it. Later, ``--checkpoints FILE`` proves the log was
not rewritten since: each saved checkpoint must still be in the log and match it, and the
saved keys are pinned: every checkpoint (and an export's own signature) must be signed by
one of them, or by a key that a checkpoint signed with one of them introduced (a rotation's
``public_key`` entry). ``--keys FILE`` (``GET /v1/ledger/pubkey``) pins keys explicitly.

Exit 0 when everything holds; 1 on any failure (each printed as ``FAIL: seq N (kind):
what differs``); 2 on usage or I/O errors. Never imports boto3.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import gc
import hashlib
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

from claros.chunked import ChunkedLines, LineTooLong
from claros.evidence.lines import (
    EXPORT_FORMAT,
    LineError,
    is_entry_line,
    parse_entry_line,
    parse_typed_line,
)
from claros.ledger import (
    READ_KINDS,
    ChainVerifier,
    Checkpoint,
    Entry,
    Failure,
    Failures,
    PublicKey,
    VerifyReport,
    kept_from_json,
    key_id_for,
    slim_checkpoints,
    verify_signature,
)
from claros_guard.verify_parallel import (
    AHEAD,
    SIGNATURE_BATCH,
    ParallelEntries,
    SignatureChecks,
    Workers,
    default_workers,
)

__all__ = ["SAVED_FORMAT", "VerifyError", "add_parser", "main", "run"]

SAVED_FORMAT = "claros-checkpoints/1"
PAGE = 10_000
# The longest line an export may hold: a record is at most a request body (1 MB by
# default, CLAROS_MAX_BODY_BYTES; 400 KB compressed in DynamoDB). A longer line is read no
# further, so a crafted export cannot take the auditor's memory (a line costs ~4x its size).
MAX_LINE = 64 << 20
# How many lines not in an export's shape (not JSON, an unknown type, a line out of its
# place) are read before the file is taken for no export at all (exit 2).
MAX_BAD_LINES = 1000


class VerifyError(Exception):
    """A usage or I/O problem: nothing could be verified (exit 2)."""


# --- progress ---------------------------------------------------------------------------
class Progress:
    """A one-line progress bar on stderr, at most a few updates a second."""

    def __init__(self, enabled: bool, total: int | None = None, stream: IO[str] | None = None):
        self.enabled = enabled
        self.total = total
        self.stream = stream or sys.stderr
        self._last = 0.0
        self._shown = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.2:
            return
        self._last = now
        if self.total:
            width = 30
            filled = min(width, width * done // self.total)
            bar = "#" * filled + "." * (width - filled)
            text = f"\rverifying [{bar}] {done:,} / {self.total:,} entries"
        else:
            text = f"\rverifying: {done:,} entries"
        self.stream.write(text)
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()


# --- saved checkpoints ------------------------------------------------------------------
# NamedTuples, not dataclasses: with them, a plain ``claros verify`` would import
# ``dataclasses`` (and ``inspect``, ``ast``, ``tokenize``: ~40 million instructions, more
# than PyNaCl and argparse together) and compile their methods, before its first line.
class Saved(NamedTuple):
    """A file of checkpoints saved earlier (``--save``), and the keys that signed them."""

    path: str
    workspace: str
    checkpoints: dict[int, Checkpoint]
    keys: list[PublicKey]


def load_saved(path: str) -> Saved:
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as exc:
        raise VerifyError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except RecursionError:
        raise VerifyError(f"{path} is not JSON this verifier reads: nested too deeply") from None
    except ValueError as exc:
        raise VerifyError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("checkpoints"), list):
        raise VerifyError(f"{path} holds no checkpoints (save them with claros verify --save)")
    keys_json = data.get("public_keys") or data.get("keys") or []
    if not isinstance(keys_json, list) or not all(
        isinstance(x, dict) for x in [*data["checkpoints"], *keys_json]
    ):
        raise VerifyError(f"{path}: a checkpoint or key is malformed: not a JSON object")
    try:
        checkpoints = [Checkpoint.from_json(c) for c in data["checkpoints"]]
        keys = [PublicKey.from_json(k) for k in keys_json]
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # json reads 1e999 as inf
        raise VerifyError(f"{path}: a checkpoint or key is malformed: {exc}") from exc
    if not checkpoints:
        raise VerifyError(f"{path} holds no checkpoints: it proves nothing")
    workspaces = {cp.workspace for cp in checkpoints}
    if len(workspaces) != 1:
        raise VerifyError(f"{path} mixes workspaces: {', '.join(sorted(workspaces))}")
    return Saved(path, workspaces.pop(), {cp.seq: cp for cp in checkpoints}, keys)


def load_keys(path: str) -> list[PublicKey]:
    """Trusted public keys: ``GET /v1/ledger/pubkey``'s answer, a list of keys, or a file
    of saved checkpoints (its keys)."""
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as exc:
        raise VerifyError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except RecursionError:
        raise VerifyError(f"{path} is not JSON this verifier reads: nested too deeply") from None
    except ValueError as exc:
        raise VerifyError(f"{path} is not JSON: {exc}") from exc
    listed = data
    if isinstance(data, dict):
        listed = data.get("keys", data.get("public_keys"))
    if not isinstance(listed, list) or not all(isinstance(k, dict) for k in listed):
        raise VerifyError(f"{path} lists no keys (save GET /v1/ledger/pubkey)")
    try:
        keys = [PublicKey.from_json(k) for k in listed]
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # json reads 1e999 as inf
        raise VerifyError(f"{path}: a key is malformed: {exc}") from exc
    for key in keys:
        if not _genuine(key):
            raise VerifyError(f"{path}: key {key.key_id} does not match its public key")
    if not keys:
        raise VerifyError(f"{path} lists no keys: it pins nothing")
    return keys


class Pins(NamedTuple):
    """The keys trusted from the start (None: the log's own keys are trusted), and where
    they come from, in words."""

    keys: list[PublicKey] | None
    source: str

    @classmethod
    def of(cls, saved: Saved | None, keys_file: str | None) -> Pins:
        given = load_keys(keys_file) if keys_file else []
        found = [*given, *(saved.keys if saved is not None else [])]
        sources = [f for f in (keys_file, saved.path if saved and saved.keys else None) if f]
        if not found:
            return cls(None, "")
        return cls(found, " and ".join(sources))

    def line(self, verifier: ChainVerifier) -> str:
        if self.keys is None:
            return (
                "keys:        not pinned; the log's own keys are trusted. Pass --checkpoints "
                "FILE (saved with --save) or --keys FILE to pin them"
            )
        ids = ", ".join(verifier.pinned_ids or [])
        return (
            f"keys:        pinned by {self.source} ({ids}); every checkpoint checked "
            "against them and the keys they introduced"
        )


class SavedCheck:
    """Compares saved checkpoints with a log as its entries go past."""

    def __init__(self, saved: Saved, log_keys: Iterable[PublicKey], where: str) -> None:
        self.saved = saved
        self.where = where
        self.failures: list[Failure] = []
        # A saved file with its keys is checked with those only (a file whose keys were
        # swapped fails closed); one without keys (GET /v1/ledger/checkpoints's answer)
        # with the log's.
        keys = {k.key_id: k for k in (saved.keys or list(log_keys)) if _genuine(k)}
        self.want: dict[int, Checkpoint] = {}
        for seq, cp in sorted(saved.checkpoints.items()):
            key = keys.get(cp.key_id)
            if key is None:
                self._fail(seq, f"saved checkpoint signed by unknown key {cp.key_id}")
            elif not verify_signature(key, cp.message(), cp.signature):
                self._fail(seq, f"saved checkpoint has a bad signature (key {cp.key_id})")
            else:
                self.want[seq] = cp
        self.seen: dict[int, Entry] = {}

    def _fail(self, seq: int, problem: str, kind: str = "checkpoint") -> None:
        self.failures.append(Failure(seq, kind, problem))

    def observe(self, entry: Entry) -> None:
        if entry.seq in self.want:
            self.seen[entry.seq] = entry

    def finish(self, log_checkpoints: Mapping[int, Checkpoint], report: VerifyReport) -> None:
        rewritten = "log rewritten since saved checkpoints"
        for seq, cp in self.want.items():
            theirs = log_checkpoints.get(seq)
            if theirs is None:
                self._fail(
                    seq,
                    f"{rewritten}: {self.where} no longer has the checkpoint at "
                    f"seq {seq} (saved hash {cp.hash})",
                )
            elif theirs.hash != cp.hash:
                self._fail(
                    seq,
                    f"{rewritten}: the saved checkpoint says hash {cp.hash}, "
                    f"{self.where}'s says {theirs.hash}",
                )
            entry = self.seen.get(seq)
            if entry is not None and entry.hash != cp.hash:
                self._fail(
                    seq,
                    f"{rewritten}: the saved checkpoint says hash {cp.hash}, the "
                    f"entry has {entry.hash}",
                    entry.kind,
                )
            elif entry is None and seq > (report.last_seq or 0):
                self._fail(
                    seq,
                    f"tail cut off: saved checkpoint at seq {seq} but the log ends "
                    f"at seq {report.last_seq or 0}",
                )

    @property
    def matched(self) -> int:
        failed = {f.seq for f in self.failures}
        return sum(1 for seq in self.want if seq not in failed)


def _genuine(key: PublicKey) -> bool:
    try:
        raw = base64.b64decode(key.public_key, validate=True)
    except ValueError:
        return False
    return len(raw) == 32 and key_id_for(raw) == key.key_id


def save_checkpoints(
    path: str,
    workspace: str,
    checkpoints: Iterable[Checkpoint],
    keys: Iterable[PublicKey],
    source: str,
) -> int:
    from claros.clock import utc_now  # here: only a save needs it (and its imports)

    cps = sorted(checkpoints, key=lambda c: c.seq)
    data = {
        "format": SAVED_FORMAT,
        "workspace": workspace,
        "saved_at": utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source,
        "public_keys": [k.to_json() for k in keys],
        "checkpoints": [c.to_json() for c in cps],
    }
    from claros_guard.files import FileProblem, write_file  # only to save (it loads YAML)

    try:
        write_file(path, json.dumps(data, indent=1) + "\n")
    except FileProblem as exc:
        raise VerifyError(str(exc)) from None
    return len(cps)


# --- the result -------------------------------------------------------------------------
class Result(NamedTuple):
    what: str  # "export FILE" or "the ledger at URL"
    workspace: str
    report: VerifyReport
    records: str  # how records were compared, in words
    lines: list[str]  # further facts to print
    checkpoints: dict[int, Checkpoint]
    keys: list[PublicKey]
    # Whether a checkpoint at the head was asked for (None: not online, or not saving).
    asked: str | None = None

    @property
    def ok(self) -> bool:
        return self.report.ok

    def print(self, out: IO[str]) -> None:
        rep = self.report
        span = f"seq {rep.first_seq}..{rep.last_seq}" if rep.entries else "none"
        last_cp = rep.last_checkpoint_seq
        print(f"claros verify: {self.what}, workspace {self.workspace}", file=out)
        print(f"  entries:     {rep.entries:,} ({span})", file=out)
        print(f"  records:     {self.records}", file=out)
        if rep.kept_records:
            print(
                f"  kept:        {rep.kept_records:,} rule and mapping versions from before the "
                "prune, checked against the prune entries that list them",
                file=out,
            )
        print(
            f"  checkpoints: {rep.checkpoints_verified:,} verified"
            + (f", the last at seq {last_cp}" if last_cp is not None else "")
            + f"; {rep.unsigned_tail:,} entries after the last checkpoint",
            file=out,
        )
        for line in self.lines:
            print(f"  {line}", file=out)
        for failure in rep.failures:
            print(f"FAIL: {failure}", file=out)
        unlisted = getattr(rep.failures, "unlisted", 0)
        if unlisted:
            print(f"FAIL: and {unlisted:,} more failures, not listed", file=out)
        n = len(rep.failures)
        status = "OK" if self.ok else f"FAIL ({n} failure{'s' if n != 1 else ''})"
        print(f"{status}: {self.what}", file=out)


# --- an export, offline -----------------------------------------------------------------
class _ExportReader:
    """Reads an export in one pass: header, keys and checkpoints, entries, signature."""

    def __init__(
        self,
        name: str,
        saved: Saved | None,
        pins: Pins,
        progress: Progress,
        keep: bool = True,
        workers: int = 1,
    ) -> None:
        self.name = name
        # Whether the export's checkpoints are kept whole for the result (to --save them)
        # or for comparing saved ones; otherwise they go once the verifier has them.
        self.keep = keep or saved is not None
        self.saved = saved
        self.pins = pins
        self.progress = progress
        self.digest = hashlib.sha256()
        self.header: dict[str, Any] = {}
        self.keys: list[PublicKey] = []
        self.checkpoints: dict[int, Checkpoint] = {}  # whole, when kept
        # The checkpoints whose signatures were checked as their lines went by, compact
        # (the verifier takes this very table), and, by seq, those checked at _start.
        self.signed = slim_checkpoints("")
        self.pending: dict[int, Checkpoint] = {}
        self._genuine_keys: dict[str, PublicKey] = {}
        self._keys_seen = -1
        # Rule and mapping versions kept below a prune's cut: (seq, kind, ref_id, record).
        self.kept: list[tuple[int, str, str, Any]] = []
        self.extra: list[Failure] = Failures()  # the first ones listed, the others counted
        self.verifier: ChainVerifier | None = None
        self.saved_check: SavedCheck | None = None
        self.signature: dict[str, Any] | None = None
        self.signed_digest = b""
        self.line_no = 0
        # The worker processes, for a large export: they check the checkpoints'
        # signatures, put off (``deferred``: each with the key it would be checked with
        # then) and sent a batch at a time while this process reads on (``inflight``),
        # settled in line order; then the entries (ParallelEntries).
        self.workers = Workers(workers)
        self.deferred: list[tuple[Checkpoint, PublicKey | None]] | None = None
        self.inflight: deque[tuple[list[tuple[Checkpoint, PublicKey | None]], Any]] = deque()
        self.signatures = SignatureChecks(self.workers)

    def _fail(self, problem: str, seq: int | None = None, kind: str | None = None) -> None:
        """A line not in an export's shape. Past ``MAX_BAD_LINES`` of them the file is no
        export Claros wrote, and it is read no further: a few GB of 2-byte bad lines took
        hours (~26 us each, a JSON parse and its error), where an export's entries take
        ~7 us for ~1.4 KB."""
        self.extra.append(Failure(seq, kind, f"line {self.line_no}: {problem}"))
        if len(self.extra) >= MAX_BAD_LINES:
            raise VerifyError(
                f"{self.name} is not an export Claros wrote: {MAX_BAD_LINES:,} of its lines "
                f"(up to line {self.line_no:,}) are not in an export's shape; the rest was not "
                f"read (the first: {self.extra[0]})"
            )

    def read(
        self,
        source: ChunkedLines,
        parallel: ParallelEntries | None = None,
        handle: IO[bytes] | None = None,
    ) -> None:
        """``parallel``: check the entries with other processes where it pays, from the
        second entry on (the first starts the chain), reading the rest of ``handle``
        (``source`` reads from it)."""
        self._header(source.next_line() or b"")
        if parallel is not None and handle is not None:
            if parallel.pays(handle, len(source.buf) - source.pos):
                # The workers start now, and check the signatures while this reads on.
                self.signatures.workspace = str(self.header["workspace"])
                self.deferred = []
        while (line := source.next_line()) is not None:
            if self.one_line(line):
                if parallel is not None and handle is not None:
                    tried, parallel = parallel, None
                    left = len(source.buf) - source.pos
                    if tried.pays(handle, left) and tried.take(self, source, handle):
                        return  # it read every line to the end
                self._run(source)

    def one_line(self, line: bytes) -> bool:
        """The serial reader's work on one line (after the header); True if it was an
        entry line."""
        self.line_no += 1
        entry = False
        if self.signature is not None:
            self._fail("more lines after the export's signature line")
        elif is_entry_line(line):
            self._entry(line)
            entry = True
        else:
            self._typed(line)
        self.digest.update(line)
        return entry

    def serial_lines(self, source: ChunkedLines) -> None:
        """Every line of ``source`` (after the header), serially: the parallel path hands
        over what it did not take."""
        while (line := source.next_line()) is not None:
            if self.one_line(line):
                self._run(source)

    def _run(self, source: ChunkedLines) -> None:
        """After an entry, the entries that follow in the writer's layout, the fast way
        (``ChainVerifier.feed_written_run``, the same checks), up to the next line it
        leaves in ``source``."""
        assert self.verifier is not None
        leave = self.saved_check.want if self.saved_check is not None else ()
        limit = 20_000 if self.progress.enabled else 1 << 62
        # The run makes no reference cycles, only short-lived tuples and bytes, which
        # would set off a cyclic collection every few hundred lines (~10% of the time).
        collecting = gc.isenabled()
        gc.disable()
        try:
            while True:  # with a progress bar, it comes back every ``limit`` lines
                taken = self.verifier.feed_written_run(source, self.digest, leave, limit)
                self.line_no += taken
                if not taken:
                    return
                self.progress.update(self.verifier.report.entries)
                if taken < limit:
                    return
        finally:
            if collecting:
                gc.enable()

    def _header(self, line: bytes) -> None:
        self.line_no = 1
        try:
            header = parse_typed_line(line) if line.strip() else {}
        except LineError as exc:
            raise VerifyError(f"{self.name} is not a Claros evidence export: {exc}") from None
        if header.get("type") != "header" or header.get("format") != EXPORT_FORMAT:
            raise VerifyError(
                f"{self.name} is not a Claros evidence export (its first line should be a "
                f'header with "format": "{EXPORT_FORMAT}")'
            )
        if not isinstance(header.get("workspace"), str):
            raise VerifyError(f"{self.name}: the header names no workspace")
        self.header = header
        self.signed = slim_checkpoints(header["workspace"])
        self.digest.update(line)
        total = header.get("entries")
        self.progress.total = total if isinstance(total, int) and total > 0 else None

    def _typed(self, line: bytes) -> None:
        try:
            data = parse_typed_line(line)
            kind = data.get("type")
            if kind == "signature":
                self.signature = data
                self.signed_digest = self.digest.digest()
                return
            if self.verifier is not None:
                self._fail(f"a {kind} line among the entries (keys and checkpoints come first)")
                return
            fields = {k: v for k, v in data.items() if k != "type"}
            if kind == "public_key":
                self.keys.append(PublicKey.from_json(fields))
            elif kind == "checkpoint":
                self._checkpoint(Checkpoint.from_json(fields))
            elif kind == "kept":
                self.kept.append(kept_from_json(fields))
            else:
                self._fail(f"unknown line type {kind!r}")
        except (LineError, KeyError, TypeError, ValueError) as exc:
            self._fail(f"malformed line: {exc}")

    def _checkpoint(self, cp: Checkpoint) -> None:
        """A checkpoint line: its signature checked now, with the keys listed so far (and
        the pinned ones), so that only what verification needs is kept of it, in the
        compact table (a 1M-entry export brings 10,000). One that does not verify now is
        kept whole, and checked when the entries start, as all were before. A seq listed
        twice counts once, its last line (the one kept of two that do not verify is
        checked at the place of the first, unless a line that verified came between)."""
        if self.keep:
            self.checkpoints[cp.seq] = cp
        key = self._key_for(cp)
        if self.deferred is not None:  # checked by the workers, settled in order
            self.deferred.append((cp, key))
            if len(self.deferred) >= SIGNATURE_BATCH:
                self._send_deferred()
        else:
            self._settle(cp, key, key is not None and self._signed_by(key, cp))

    @staticmethod
    def _signed_by(key: PublicKey, cp: Checkpoint) -> bool:
        return verify_signature(key, cp.message(), cp.signature)

    def _settle(self, cp: Checkpoint, key: PublicKey | None, ok: bool) -> None:
        if key is not None and ok:
            self.pending.pop(cp.seq, None)
            self.signed.put(cp.seq, cp.hash, cp.ts, key.key_id)
        else:
            self.signed.discard(cp.seq)
            self.pending[cp.seq] = cp

    def _send_deferred(self) -> None:
        """The checkpoints put off so far, to the workers; those sent before settled in
        the order of their lines once more than a batch per worker and task ahead waits
        (so the workers never run dry while this process reads, and what waits stays
        small however long the log)."""
        deferred, self.deferred = self.deferred or [], []
        jobs = [(key, cp.message(), cp.signature) for cp, key in deferred if key is not None]
        self.inflight.append((deferred, self.signatures.submit(jobs)))
        while len(self.inflight) > self.workers.count * (AHEAD + 1):
            self._settle_oldest()

    def _settle_oldest(self) -> None:
        deferred, answer = self.inflight.popleft()
        answers = iter(answer())
        for cp, key in deferred:
            self._settle(cp, key, key is not None and next(answers))

    def _settle_deferred(self) -> None:
        """Every checkpoint put off: checked and settled in the order of their lines, as
        if checked there (the entries start)."""
        if self.deferred is None:
            return
        if self.deferred:
            self._send_deferred()
        self.deferred = None
        while self.inflight:
            self._settle_oldest()

    def _key_for(self, cp: Checkpoint) -> PublicKey | None:
        """The key the verifier would check ``cp`` with, among those listed so far."""
        if len(self.keys) != self._keys_seen:  # the keys the verifier takes: genuine, ours
            workspace = self.header["workspace"]
            listed = [*self.keys, *(self.pins.keys or [])]
            self._genuine_keys = {
                k.key_id: k for k in listed if k.workspace == workspace and _genuine(k)
            }
            self._keys_seen = len(self.keys)
        if cp.workspace != self.header["workspace"]:
            return None
        return self._genuine_keys.get(cp.key_id)

    def _start(self) -> ChainVerifier:
        self._settle_deferred()
        workspace = str(self.header["workspace"])
        # The pending ones are checked after the keys, as a verifier checks those it is
        # given; none has a seq of the signed ones (a seq is in one or the other).
        verifier = ChainVerifier(
            workspace,
            self.pending.values(),
            self.keys,
            compare_records=True,
            pinned=self.pins.keys,
            checked=self.signed,
        )
        self.pending = {}
        if self.saved is not None:
            self.saved_check = SavedCheck(self.saved, self.keys, "the export")
        for seq, kind, ref_id, record in self.kept:
            verifier.feed_kept(seq, kind, ref_id, record)
        self.verifier = verifier
        return verifier

    def _entry(self, line: bytes) -> None:
        verifier = self.verifier or self._start()
        try:
            parsed = parse_entry_line(line)
        except LineError as exc:
            self._fail(f"malformed entry: {exc}")
            return
        verifier.feed_raw(parsed.entry, parsed.raw if parsed.has_record else None)
        if self.saved_check is not None:
            self.saved_check.observe(parsed.entry)
        if self.progress.enabled:
            self.progress.update(verifier.report.entries)

    def finish(self) -> Result:
        verifier = self.verifier or self._start()
        made = self.header.get("exported_at")
        if isinstance(made, int) and not isinstance(made, bool):
            verifier.made_at = made
        report = verifier.finish()
        report.failures.extend(self.extra)
        lines = [self._check_header(report), self._check_signature(report, verifier)]
        lines.append(self.pins.line(verifier))
        if self.saved_check is not None:
            self.saved_check.finish(self.checkpoints, report)
            report.failures.extend(self.saved_check.failures)
            lines.append(_saved_line(self.saved_check))
        else:
            lines.append(
                "anchors:     none given; this export vouches for itself. Pass --checkpoints "
                "FILE (saved with --save) to prove it against a copy Claros cannot change"
            )
        return Result(
            what=f"export {self.name}",
            workspace=str(self.header["workspace"]),
            report=report,
            records=f"{report.records_compared:,} compared (every record, offline)",
            lines=[line for line in lines if line],
            checkpoints=self.checkpoints,
            keys=_trusted_keys(verifier, self.keys, self.pins),
        )

    def _check_header(self, report: VerifyReport) -> str:
        h = self.header
        last, first = h.get("last_seq"), h.get("first_seq")
        if isinstance(last, int) and last > (report.last_seq or 0):
            problem = (
                f"tail cut off: the header says the log ends at seq {last}, the export ends "
                f"at seq {report.last_seq or 0}"
            )
            report.failures.append(Failure(last, None, problem))
        if isinstance(first, int) and report.first_seq is not None and first < report.first_seq:
            problem = (
                f"missing entries: the header says the log starts at seq {first}, the export "
                f"at seq {report.first_seq}"
            )
            report.failures.append(Failure(report.first_seq, None, problem))
        return f"exported:    {_when(h.get('exported_at'))}"

    def _check_signature(self, report: VerifyReport, verifier: ChainVerifier) -> str:
        def fail(problem: str) -> None:
            report.failures.append(Failure(None, "signature", problem))

        sig = self.signature
        if sig is None:
            fail("the export is not signed: its last line is no signature (cut off?)")
            return ""
        expected = self.signed_digest.hex()
        claimed = str(sig.get("sha256"))
        if claimed != expected:
            fail(
                f"export edited: sha256 of its lines is {expected}, the signature line says "
                f"{claimed}"
            )
        try:
            # Checked over what the line claims: an edit is named once, above; a signature
            # that does not hold even for its own digest is named as well.
            signed = bytes.fromhex(claimed)
        except ValueError:
            signed = self.signed_digest
        key_id = str(sig.get("key_id"))
        known = [*self.keys, *(self.pins.keys or [])]
        key = next((k for k in known if k.key_id == key_id and _genuine(k)), None)
        if key is None:
            fail(f"export signed by unknown key {key_id}")
        elif not verify_signature(key, signed, str(sig.get("signature"))):
            fail(f"bad export signature (key {key_id})")
        elif not verifier.trusted(key_id):
            fail(
                f"export signed by key {key_id}, which is not pinned (pinned: "
                f"{', '.join(verifier.pinned_ids or []) or 'none'}) and no checkpoint signed "
                "by a pinned key introduced it"
            )
        return f"signature:   the export as a whole, by {key_id} (Ed25519 over its sha256)"


def _when(ms: Any) -> str:
    """A time in ms since 1970 as UTC text; what the header holds when it is not one."""
    if not isinstance(ms, int) or isinstance(ms, bool):
        return "?"
    try:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"? ({str(ms)[:30]} is not a time in ms)"


def _saved_line(check: SavedCheck) -> str:
    return (
        f"anchors:     {check.matched} of {len(check.saved.checkpoints)} saved checkpoints "
        f"({check.saved.path}) still match"
    )


def _trusted_keys(
    verifier: ChainVerifier, listed: Iterable[PublicKey], pins: Pins
) -> list[PublicKey]:
    """The keys to save: those the log lists that this verify trusted, and the pins."""
    out = {k.key_id: k for k in listed if _genuine(k) and verifier.trusted(k.key_id)}
    for key in pins.keys or []:
        out.setdefault(key.key_id, key)
    return sorted(out.values(), key=lambda k: (k.created_at, k.key_id))


def verify_export(
    path: str,
    saved: Saved | None,
    pins: Pins,
    progress: Progress,
    *,
    keep: bool = True,
    workers: int | None = None,
) -> Result:
    """``keep=False``: the result holds no checkpoints (nothing is saved from it).
    ``workers``: processes that check the entries of a large export (default: one per
    CPU this process may use; 1: this process alone)."""
    name = Path(path).name if path != "-" else "(stdin)"
    try:
        handle: IO[bytes] = sys.stdin.buffer if path == "-" else Path(path).open("rb")
    except OSError as exc:
        raise VerifyError(f"cannot read {path}: {exc.strerror or exc}") from exc
    count = default_workers() if workers is None else workers
    reader = _ExportReader(name, saved, pins, progress, keep, count)
    parallel = ParallelEntries(reader.workers) if count > 1 else None
    try:
        reader.read(ChunkedLines(handle.read, max_line=MAX_LINE), parallel, handle)
    except OSError as exc:
        raise VerifyError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except LineTooLong as exc:
        raise VerifyError(
            f"{path} is not an export Claros wrote: {exc} (an export's lines are at most "
            f"{MAX_LINE >> 20} MB; a record is far smaller)"
        ) from None
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
        progress.close()
        reader.workers.close()
    result = reader.finish()
    if saved is not None and saved.workspace != result.workspace:
        raise VerifyError(
            f"{saved.path} holds checkpoints of workspace {saved.workspace}, "
            f"the export is of {result.workspace}"
        )
    return result


# --- the ledger, online -----------------------------------------------------------------
SAME_PAGE = "Claros answered the same page twice ({} did not advance)"


def _online_pages(client: Any, progress: Progress) -> Iterator[bytes]:
    since = 0
    while True:
        response = client.request(
            "GET", "/v1/ledger/entries", params={"since": since, "limit": PAGE}
        )
        lines = response.content.splitlines()
        if not lines:
            return
        yield from lines
        try:
            after = int(response.headers["x-claros-next"])
        except (KeyError, ValueError) as exc:
            raise VerifyError("Claros answered a page without x-claros-next") from exc
        if after <= since:  # asking again would get the same page, for ever
            raise VerifyError(SAME_PAGE.format("x-claros-next"))
        since = after


KEPT_LINE = b'{"type":"kept"'


def _feed_kept(verifier: ChainVerifier, line: bytes) -> None:
    try:
        verifier.feed_kept(*kept_from_json(parse_typed_line(line)))
    except (LineError, KeyError, TypeError, ValueError) as exc:
        verifier.report.failures.append(Failure(None, None, f"malformed kept record: {exc}"))


def _objects(client: Any, body: Any, field: str, path: str) -> list[dict[str, Any]]:
    """``body[field]``, a list of JSON objects; the error for an answer unlike Claros's."""
    items = body.get(field, []) if isinstance(body, dict) else None
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise client.unlike(f"GET {path} gave no list of {field}", body)
    return items


T = TypeVar("T")


def _shaped(
    client: Any, parse: Callable[[dict[str, Any]], T], item: dict[str, Any], what: str
) -> T:
    """``parse(item)``; for an item not in its shape, the error for an answer unlike
    Claros's, naming ``what`` (the request, and what it gave)."""
    try:
        return parse(item)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise client.unlike(f"{what} not in its shape ({type(exc).__name__}: {exc})") from exc


def _checkpoints_of(client: Any) -> list[Checkpoint]:
    out: list[Checkpoint] = []
    since = 0
    path = "/v1/ledger/checkpoints"
    while True:
        body = client.json("GET", path, params={"since": since, "limit": PAGE})
        out += [
            _shaped(client, Checkpoint.from_json, c, f"GET {path} gave a checkpoint")
            for c in _objects(client, body, "checkpoints", path)
        ]
        if body.get("next") is None:
            return out
        after = body["next"]
        if not isinstance(after, int) or isinstance(after, bool):
            raise client.unlike(f"GET {path} gave a next that is not a seq", body)
        if after <= since:
            raise VerifyError(SAME_PAGE.format("the checkpoints' next"))
        since = after


def ask_for_checkpoint(client: Any) -> str:
    """Ask Claros to sign a checkpoint at the head now (admin keys may), so that what is
    saved covers the whole log; what happened, in words."""
    from claros_guard.client import ApiError

    try:
        cp = client.json("POST", "/v1/ledger/checkpoints")
    except ApiError as exc:
        if exc.status in (401, 403):
            return "this key may not ask for a checkpoint (an admin key may)"
        if exc.status == 409:
            return "the ledger is empty: there is nothing to sign yet"
        raise
    seq = cp.get("seq") if isinstance(cp, dict) else None
    return f"asked for a checkpoint at the head: seq {seq}"


# The kinds of key Claros gives every record to (claros.api.evidence.RECORD_READERS).
RECORD_READERS = frozenset({"admin", "audit"})
# How many entries given without their record are named one by one; the rest are counted.
NOT_GIVEN_NAMED = 20


def key_reads_records(client: Any) -> bool | None:
    """Whether Claros gives this key every record (``GET /v1/me``: an admin or audit
    key); None when the server does not say (an older one)."""
    from claros_guard.client import ApiError

    try:
        me = client.json("GET", "/v1/me")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    kind = me.get("kind") if isinstance(me, dict) else None
    if not isinstance(kind, str):
        raise client.unlike("GET /v1/me named no kind of key", me)
    return kind in RECORD_READERS


class NotGiven:
    """Entries a page gave without their record (``event`` left out), counted, the first
    few kept: for a key that reads records, each is a record nobody compared."""

    def __init__(self) -> None:
        self.count = 0
        self.first: list[Entry] = []

    def add(self, entry: Entry) -> None:
        self.count += 1
        if len(self.first) < NOT_GIVEN_NAMED:
            self.first.append(entry)

    def failures(self) -> list[Failure]:
        out = [
            Failure(
                e.seq,
                e.kind,
                f"record {e.ref_id} was not given: the server left it out of its line, so "
                "it was not compared (this key reads records)",
            )
            for e in self.first
        ]
        if self.count > len(self.first):
            out.append(
                Failure(
                    None,
                    None,
                    f"{self.count - len(self.first):,} more records were not given, so not "
                    "compared",
                )
            )
        return out


class _Given(NamedTuple):
    """What the pages gave: entries with their record, entries without one (and of
    those, the ones whose record only a reader of records is given)."""

    with_records: int
    without: int
    not_given: NotGiven


def _feed_pages(
    client: Any, verifier: ChainVerifier, check: SavedCheck | None, progress: Progress
) -> _Given:
    """Every line of ``GET /v1/ledger/entries``, page by page, into ``verifier``."""
    with_records = without = 0
    not_given = NotGiven()
    try:
        for line in _online_pages(client, progress):
            if line.startswith(KEPT_LINE):
                _feed_kept(verifier, line)
                continue
            try:
                parsed = parse_entry_line(line)
            except LineError as exc:
                verifier.report.failures.append(Failure(None, None, f"malformed entry: {exc}"))
                continue
            if parsed.has_record:
                verifier.feed_raw(parsed.entry, parsed.raw)
                # Every key reads prune and public key records; only readers the others.
                if parsed.entry.kind in READ_KINDS:
                    without += 1
                else:
                    with_records += 1
            else:
                verifier.feed(parsed.entry)
                without += 1
                if parsed.entry.kind not in READ_KINDS:
                    not_given.add(parsed.entry)
            if check is not None:
                check.observe(parsed.entry)
            progress.update(verifier.report.entries)
    finally:
        progress.close()
    return _Given(with_records, without, not_given)


def verify_online(
    client: Any, saved: Saved | None, pins: Pins, progress: Progress, *, ask: bool = False
) -> Result:
    asked = ask_for_checkpoint(client) if ask else None
    # What the key is, from Claros: an admin or audit key is given every record, so a
    # page that leaves one out hides it (the pages alone cannot tell an agent key's).
    reader = key_reads_records(client)
    keys_body = client.json("GET", "/v1/ledger/pubkey")
    key_list = _objects(client, keys_body, "keys", "/v1/ledger/pubkey")
    if not isinstance(keys_body.get("workspace"), str):
        raise client.unlike("GET /v1/ledger/pubkey named no workspace", keys_body)
    workspace = str(keys_body["workspace"])
    if saved is not None and saved.workspace != workspace:
        raise VerifyError(
            f"{saved.path} holds checkpoints of workspace {saved.workspace}, "
            f"this key's workspace is {workspace}"
        )
    keys = [
        _shaped(client, PublicKey.from_json, k, "GET /v1/ledger/pubkey gave a key")
        for k in key_list
    ]  # fmt: skip
    checkpoints = _checkpoints_of(client)
    progress.total = max((cp.seq for cp in checkpoints), default=0) or None
    verifier = ChainVerifier(workspace, checkpoints, keys, compare_records=True, pinned=pins.keys)
    check = SavedCheck(saved, keys, "the server") if saved is not None else None
    given = _feed_pages(client, verifier, check, progress)
    # A key Claros says reads records, or one given any record, was to be given all:
    # every entry without its record is one that was not compared, and says so.
    reads_records = bool(reader) or given.with_records > 0 or not given.without
    verifier.check_kept = reads_records  # a key that reads no records gets no kept lines
    report = verifier.finish()
    if reads_records:
        report.failures.extend(given.not_given.failures())
    by_seq = {cp.seq: cp for cp in checkpoints}
    lines = [pins.line(verifier)]
    if check is not None:
        check.finish(by_seq, report)
        report.failures.extend(check.failures)
        lines.append(_saved_line(check))
    if not reads_records:
        records = (
            "not compared: this key does not read records, so the chain and "
            "signatures only (use an audit key to compare every record)"
        )
    else:
        records = f"{report.records_compared:,} compared (this key reads records)"
    return Result(
        f"the ledger at {client.http.base_url}",
        workspace,
        report,
        records,
        lines,
        by_seq,
        _trusted_keys(verifier, keys, pins),
        asked,
    )


# --- the command ------------------------------------------------------------------------
# `claros verify --help`: for the person running it, so plain text and no module names.
DESCRIPTION = """\
Re-check a workspace's ledger on your own machine.

    claros verify [--url U] [--key K] [--save FILE] [--checkpoints FILE] [--keys FILE]
                  [--progress]
    claros verify --export FILE [--checkpoints FILE] [--keys FILE] [--save FILE] [--progress]
                  [--workers N]

Online, it downloads the ledger (GET /v1/ledger/entries, page by page), the signed
checkpoints and the public keys, and checks everything here with the very code the server
uses. With an audit or admin key every record is compared with its entry; with an agent
or service key, the chain and signatures only. Offline, --export checks an evidence
export (GET /api/evidence/export): every record, every link, every signature and the
export's own signature, with no key and no access to Claros. A large export's entries
are checked by several processes, one per CPU (--workers N sets how many; --workers 1
checks it in this process alone); what is found is the same.

--save FILE keeps the checkpoints that were just verified (and the public keys). Put that
file where Claros cannot change it. Later, --checkpoints FILE proves the log was not
rewritten since: each saved checkpoint must still be in the log and match it, and the
saved keys are pinned: every checkpoint (and an export's own signature) must be signed by
one of them, or by a key that a checkpoint signed with one of them introduced (a key
rotation). --keys FILE (GET /v1/ledger/pubkey) pins keys explicitly.

Exit 0 when everything holds; 1 on any failure (each printed as "FAIL: seq N (kind): what
differs"); 2 on usage or I/O errors.
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """``claros verify``, for the ``claros`` command's subparsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "verify",
        help="re-check the ledger (or an evidence export) on this machine",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help="the Claros server (default $CLAROS_URL)")
    parser.add_argument("--key", help="an audit, admin or agent key (default $CLAROS_KEY)")
    parser.add_argument("--export", metavar="FILE", help="verify this evidence export offline")
    parser.add_argument(
        "--checkpoints",
        metavar="FILE",
        help="checkpoints saved earlier: prove the log was not rewritten since",
    )
    parser.add_argument(
        "--keys",
        metavar="FILE",
        help="trusted public keys (GET /v1/ledger/pubkey): pin them, as --checkpoints does",
    )
    parser.add_argument(
        "--save",
        metavar="FILE",
        help="keep the checkpoints just verified and their keys (when all holds); an admin "
        "key first asks for a checkpoint at the head",
    )
    parser.add_argument(
        "--workers",
        type=_workers,
        metavar="N",
        help="processes that check a large export's entries (default: one per CPU; 1: "
        "this process alone)",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show a progress bar even when stderr is not a terminal",
    )
    parser.set_defaults(run=run)
    return parser


def _workers(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (1 or more)")
    return n


def _verify(args: argparse.Namespace, progress: Progress) -> Result:
    saved = load_saved(args.checkpoints) if args.checkpoints else None
    pins = Pins.of(saved, args.keys)
    if args.export:
        if args.url or args.key:
            raise VerifyError("--export verifies a file offline: leave out --url and --key")
        return verify_export(
            args.export, saved, pins, progress, keep=bool(args.save), workers=args.workers
        )
    from claros_guard.client import ApiError, Client, ClientError

    try:
        # A generous timeout for big pages; connecting takes at most 10 s of it.
        with Client(args.url, args.key, timeout=120) as client:
            try:
                return verify_online(client, saved, pins, progress, ask=bool(args.save))
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                raise client.unlike(f"{type(exc).__name__}: {exc}") from exc
    except ClientError as exc:
        raise VerifyError(str(exc)) from exc
    except ApiError as exc:
        raise VerifyError(f"Claros refused: {exc.status}: {exc.message}") from exc


def run(args: argparse.Namespace) -> int:
    progress = Progress(bool(args.progress) or sys.stderr.isatty())
    try:
        if args.save:
            from claros_guard.files import FileProblem, check_replaceable

            try:  # before the work: --save must name a file it may replace
                check_replaceable(args.save)
            except FileProblem as exc:
                raise VerifyError(f"--save: {exc}") from None
        result = _verify(args, progress)
        result.print(sys.stdout)
        if args.save:
            if not result.ok:
                print(
                    f"claros verify: not saved to {args.save}: verification failed", file=sys.stderr
                )
            else:
                _save(args.save, result)
    except VerifyError as exc:
        print(f"claros verify: {exc}", file=sys.stderr)
        return 2
    return 0 if result.ok else 1


def _save(path: str, result: Result) -> None:
    """Keep the verified checkpoints and keys; say what they do not cover."""
    if result.asked:
        print(f"  {result.asked}")
    if not result.checkpoints:
        print(
            f"not saved to {path}: {result.what} has no signed checkpoint yet, so there is "
            "nothing to anchor (an admin key asks for one at the head)"
        )
        return
    n = save_checkpoints(
        path, result.workspace, result.checkpoints.values(), result.keys, result.what
    )
    print(
        f"saved {n} checkpoints to {path}: keep a copy where Claros cannot "
        "change it (a git repository, a write-once bucket, your SIEM)"
    )
    tail = result.report.unsigned_tail
    if tail:
        print(
            f"  not covered: {tail:,} entries after the last checkpoint (seq "
            f"{result.report.last_checkpoint_seq}) are in no saved checkpoint; save again "
            "once they are signed, or with an admin key, which asks for a checkpoint first"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="claros")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["verify", *(sys.argv[1:] if argv is None else argv)])
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
