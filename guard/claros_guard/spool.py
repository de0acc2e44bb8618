"""Reports Claros could not take yet, kept on disk until it can.

Coverage is checked writes ÷ (checked writes + writes the guard saw run unchecked), so an
unchecked write whose report is lost makes coverage look better than it was. A report
(an outcome, a write let through unchecked) that cannot reach Claros is therefore
appended to a spool, and sent again later by whichever guard or hook of the same Claros
key runs next.

Where: the state directory, ``$CLAROS_STATE_DIR``, else ``$XDG_STATE_HOME/claros``, else
``~/.local/state/claros`` (made mode 0700, and refused when another user owns it). Not the
peer directory: that one is ``$XDG_RUNTIME_DIR`` or ``/tmp``, emptied at logout or reboot,
and an outage can outlast both. Per Claros key, named by ``tag`` = HMAC-SHA256 keyed by
sha256(key) of ``claros-spool/1`` (never the key, nor the peers' secret):

* ``reports-<tag>.jsonl`` (0600): one report a line, ``{"v": 1, "route", "key", "what",
  "at", "body"}``: the route, the ``Idempotency-Key`` and the body the report was first
  sent with, so a resend is the same request and Claros records it once (a 409 on a
  resend, "already recorded", counts as delivered; the 409 ``idempotency_in_progress``,
  the first send still running or cut off by a crash, does not: the report stays).
* ``reports-<tag>.lock``: ``flock``-ed by every process that reads or writes the spool, for
  the file work only (never across a request to Claros); it also holds the number of
  reports dropped while the spool was full.
* ``reports-<tag>.flush``: ``flock``-ed, without waiting, by the one process sending the
  spool; the others leave the sending to it.
* ``calls-<tag>/``: writes a ``hook pre`` let through unchecked, waiting for their ``hook
  post`` to report them with how they ended (``Spool.hold``, ``Spool.claim``). One whose
  post never came is reported after ``HOLD_SECONDS`` without a status ("not known").

Appending is one ``write`` per line on an ``O_APPEND`` file under the lock, then ``fsync``.
Removing sent lines rewrites the file (a temporary file, ``fsync``, a rename) under the
lock; lines appended meanwhile are kept. A line that is not a report is skipped, said in
a log line, and removed.

Bounded: ``MAX_LINES`` lines and ``MAX_BYTES`` bytes. When full, the spool keeps what it
holds (the oldest reports, each a write that ran) and drops the new report, counting it;
the next process to send the spool says how many were dropped. Each dropped unchecked
report is a write Claros never hears of, so coverage over the outage is overstated by up
to that many.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio

from claros_guard.api import Report
from claros_guard.errors import ClarosRefusedError, ClarosUnavailableError, GuardError
from claros_guard.peers import ensure_private_dir

__all__ = [
    "HOLD_SECONDS",
    "MAX_BYTES",
    "MAX_LINES",
    "Flushed",
    "ReportSender",
    "Spool",
    "deliver",
    "flush",
    "state_dir",
]

log = logging.getLogger("claros_guard.spool")

VERSION = 1
MAX_LINES = 10_000
MAX_BYTES = 32 * 1024 * 1024
HOLD_SECONDS = 15 * 60  # a hook post comes within this of its pre for all but the longest tools
LOCK_WAIT = 5.0  # the lock is held for file work only: this long means a stuck process
_WHAT = "reports Claros could not take yet"
_SETTING = "CLAROS_STATE_DIR"
_ROUTE = re.compile(r"^/v1/(?:unchecked|outcomes|check/[^/?#]+/outcome)$")
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC


def state_dir() -> Path:
    override = os.environ.get("CLAROS_STATE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "claros"


def spool_tag(key: str) -> str:
    secret = hashlib.sha256(key.encode()).digest()
    return hmac.new(secret, b"claros-spool/1", "sha256").hexdigest()[:32]


def encode(report: Report, at: int | None = None) -> bytes:
    line = {
        "v": VERSION,
        "route": report.route,
        "key": report.key,
        "what": report.what,
        "at": at if at is not None else int(time.time() * 1000),
        "body": report.body,
    }
    # ASCII only: a line is exactly the bytes up to "\n", whatever the body holds.
    return json.dumps(line, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def decode(raw: bytes) -> Report:
    """The report on a line; ValueError saying why it is not one."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError("not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    route, key, body, what = data.get("route"), data.get("key"), data.get("body"), data.get("what")
    if not isinstance(route, str) or not _ROUTE.match(route):
        raise ValueError("no route Claros takes reports on")
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError("no usable Idempotency-Key")
    if not isinstance(body, dict):
        raise ValueError("no body")
    return Report(route, body, key, what if isinstance(what, str) and what else "report")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lock(fd: int, wait: float) -> bool:
    """flock the file, waiting at most ``wait`` seconds; whether it is ours."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
        time.sleep(0.005)


def _read_int(fd: int) -> int:
    try:
        return max(0, int(os.pread(fd, 32, 0).decode("ascii").strip() or 0))
    except (ValueError, UnicodeDecodeError):
        return 0


def _write_int(fd: int, value: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(value).encode(), 0)


class Spool:
    def __init__(
        self,
        directory: Path,
        key: str,
        *,
        max_lines: int = MAX_LINES,
        max_bytes: int = MAX_BYTES,
        hold: float = HOLD_SECONDS,
    ) -> None:
        tag = spool_tag(key)
        self.directory = directory
        self.path = directory / f"reports-{tag}.jsonl"
        self.calls = directory / f"calls-{tag}"
        self._lock_path = directory / f"reports-{tag}.lock"
        self._flush_path = directory / f"reports-{tag}.flush"
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.hold_seconds = hold

    # -- locks ---------------------------------------------------------------------------------

    def _private(self, path: Path) -> Path:
        return ensure_private_dir(path, _WHAT, _SETTING)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[int | None]:
        """The lock file's descriptor, locked; None when another process held the lock
        for ``LOCK_WAIT`` seconds (the caller decides whether to go on without it)."""
        self._private(self.directory)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | _OPEN, 0o600)
        try:
            if not _lock(fd, LOCK_WAIT):
                log.warning("the report spool %s stayed locked for %gs", self.path, LOCK_WAIT)
                yield None
                return
            try:
                yield fd
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def sending(self) -> Iterator[bool]:
        """Whether this process is the one sending the spool now (another one is at it
        otherwise): two never send the same line at once."""
        self._private(self.directory)
        fd = os.open(self._flush_path, os.O_RDWR | os.O_CREAT | _OPEN, 0o600)
        try:
            yield _lock(fd, 0.0)
        finally:
            os.close(fd)  # closing lets go of the lock

    # -- appending -----------------------------------------------------------------------------

    def append(self, reports: Sequence[Report]) -> int:
        """Keep the reports; returns how many were kept (the others were dropped, the
        spool being full, and logged)."""
        if not reports:
            return 0
        with self._locked() as lock:
            # Without the lock (a stuck process holds it), appending is still better than
            # losing the report: O_APPEND keeps the line whole.
            return self._append(lock, reports)

    def _append(self, lock: int | None, reports: Sequence[Report]) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _OPEN, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask made of it
            size = os.fstat(fd).st_size
            lines = self._count(fd, size)
            # A line left without its end (a disk that filled up) must not swallow ours.
            newline = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
            dropped: list[Report] = []
            for report in reports:
                data = (b"\n" if newline else b"") + encode(report)
                if lines >= self.max_lines or size + len(data) > self.max_bytes:
                    dropped.append(report)
                    continue
                _write_all(fd, data)
                newline = False
                size += len(data)
                lines += 1
            os.fsync(fd)
        finally:
            os.close(fd)
        if dropped:
            self._dropped(lock, dropped)
        return len(reports) - len(dropped)

    @staticmethod
    def _count(fd: int, size: int) -> int:
        count, offset = 0, 0
        while offset < size:
            chunk = os.pread(fd, 1 << 20, offset)
            if not chunk:
                break
            count += chunk.count(b"\n")
            offset += len(chunk)
        return count

    def _dropped(self, lock: int | None, dropped: list[Report]) -> None:
        total = len(dropped)
        if lock is not None:
            total += _read_int(lock)
            _write_int(lock, total)
        log.warning(
            "the report spool %s is full (%d lines, %d bytes at most): dropped %d (%s); "
            "Claros will never hear of them (%d dropped since it was last sent)",
            self.path,
            self.max_lines,
            self.max_bytes,
            len(dropped),
            ", ".join(r.what for r in dropped[:3]) + (", ..." if len(dropped) > 3 else ""),
            total,
        )

    # -- a hook's unchecked writes, waiting for their post -------------------------------------

    def _call_path(self, call_id: str) -> Path:
        name = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return self.calls / f"{name}.json"

    def hold(self, call_id: str, report: Report) -> Path:
        """Keep an unchecked write until its ``hook post`` says how it ended."""
        self._private(self.directory)
        self._private(self.calls)
        path = self._call_path(call_id)
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(encode(report))
                fh.flush()
                os.fsync(fh.fileno())
            temp.replace(path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return path

    def claim(self, call_id: str) -> Report | None:
        """The write ``hold`` kept for this call, taken (None when there is none)."""
        path = self._call_path(call_id)
        if not path.exists():  # the common case: no lock, nothing to do
            return None
        with self._locked():
            # Under the lock: a flush turning a late one into a report takes it, or we do.
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                return None
            path.unlink(missing_ok=True)
        try:
            return decode(raw.strip())
        except ValueError as exc:
            log.warning("skipped %s: %s", path, exc)
            return None

    def _stale_calls(self) -> list[Path]:
        cutoff = time.time() - self.hold_seconds
        try:
            entries = list(os.scandir(self.calls))
        except (FileNotFoundError, NotADirectoryError):
            return []
        stale = []
        for entry in entries:
            if entry.name.startswith(".") or not entry.name.endswith(".json"):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    stale.append(Path(entry.path))
        return stale

    def _release_stale_calls(self, lock: int | None) -> None:
        """Writes whose post never came (Claude Code stopped, the hook timed out): reported
        without a status, which Claros records as not known."""
        late: list[Report] = []
        for path in self._stale_calls():
            try:
                late.append(
                    decode(path.read_bytes().strip()).with_outcome(
                        None, "allowed unchecked by the hook; how it ended was never reported"
                    )
                )
            except ValueError as exc:
                log.warning("skipped %s: %s", path, exc)
            except OSError:
                continue
            path.unlink(missing_ok=True)
        if late:
            self._append(lock, late)

    # -- sending -------------------------------------------------------------------------------

    def has_work(self) -> bool:
        """Whether there is anything to send (a cheap look: no directory is made)."""
        try:
            if self.path.stat().st_size > 0:
                return True
        except OSError:
            pass
        return bool(self._stale_calls())

    def take(self, limit: int) -> tuple[list[Report], list[bytes]]:
        """Up to ``limit`` reports from the start of the spool, and the lines met on the
        way that are not reports (logged here; ``settle`` removes them)."""
        with self._locked() as lock:
            if lock is None:
                return [], []
            self._release_stale_calls(lock)
            dropped = _read_int(lock)
            if dropped:
                _write_int(lock, 0)
            reports, bad = self._read(limit)
        if dropped:
            log.warning(
                "%d reports were dropped while the report spool %s was full: Claros never "
                "heard of them, so coverage over that time counts up to %d fewer unchecked "
                "writes than ran",
                dropped,
                self.path,
                dropped,
            )
        return reports, bad

    def _read(self, limit: int) -> tuple[list[Report], list[bytes]]:
        reports: list[Report] = []
        bad: list[bytes] = []
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return reports, bad
        with fh:
            for number, raw in enumerate(fh, 1):
                line = raw.rstrip(b"\n")
                if not line.strip():
                    bad.append(line)  # an empty line: nothing to say, only to remove
                    continue
                try:
                    reports.append(decode(line))
                except ValueError as exc:
                    log.warning(
                        "skipped line %d of %s: %s (%d bytes); it is removed",
                        number,
                        self.path,
                        exc,
                        len(line),
                    )
                    bad.append(line)
                    continue
                if len(reports) >= limit:
                    break
        return reports, bad

    def settle(self, done: Collection[tuple[str, str]], bad: Collection[bytes]) -> None:
        """Remove the reports Claros took (or refused for good) and the lines that are not
        reports; what was appended meanwhile stays."""
        if not done and not bad:
            return
        remove = set(bad)
        with self._locked() as lock:
            if lock is None:
                return  # they are sent again next time, and Claros keeps them once
            try:
                lines = self.path.read_bytes().split(b"\n")  # as _read splits them
            except FileNotFoundError:
                return
            if lines and not lines[-1]:
                lines.pop()  # the end of the last line, not a line
            kept = [line for line in lines if not self._settled(line, done, remove)]
            if len(kept) == len(lines):
                return
            if not kept:
                self.path.unlink(missing_ok=True)
                return
            self._replace(b"".join(line + b"\n" for line in kept))

    @staticmethod
    def _settled(line: bytes, done: Collection[tuple[str, str]], remove: set[bytes]) -> bool:
        if line in remove:
            return True
        try:
            return decode(line).ident in done
        except ValueError:
            return False  # a line that came after the ones read: looked at next time

    def _replace(self, data: bytes) -> None:
        temp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            temp.replace(self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)


class ReportSender(Protocol):
    async def send_report(self, report: Report) -> None: ...


async def deliver(api: ReportSender, report: Report) -> bool:
    """Send a report: True when Claros has it (now or before), False when it refused it
    for good (logged; sending it again would change nothing). ClarosUnavailableError when
    it could not be sent: keep it."""
    try:
        await api.send_report(report)
    except ClarosRefusedError as exc:
        # 409: the outcome of that check is recorded already; 422: Claros holds a report
        # under this Idempotency-Key. Either way Claros has it. (A request still in
        # progress under the key is a ClarosUnavailableError, raised below: kept.)
        if exc.status in (409, 422):
            log.debug("Claros had the %s already: %s", report.what, exc)
            return True
        log.warning("Claros did not take the %s: %s", report.what, exc)
        return False
    except ClarosUnavailableError:
        raise
    except GuardError as exc:
        log.warning("Claros did not take the %s: %s", report.what, exc)
        return False
    return True


async def deliver_many(api: ReportSender, reports: Sequence[Report]) -> list[bool | Exception]:
    """``deliver`` for several reports at once, pipelined where the sender can
    (``send_reports``): per report True or False as ``deliver`` says, or the
    ClarosUnavailableError that kept it from Claros (keep it)."""
    send_many = getattr(api, "send_reports", None)
    if send_many is None:  # one at a time, none after the first Claros cannot take
        out: list[bool | Exception] = []
        for report in reports:
            try:
                out.append(await deliver(api, report))
            except ClarosUnavailableError as exc:
                return out + [exc] * (len(reports) - len(out))
        return out
    results = await send_many(reports)
    return [_taken(report, exc) for report, exc in zip(reports, results, strict=True)]


def _taken(report: Report, exc: Exception | None) -> bool | Exception:
    """What ``deliver`` makes of the failure ``exc`` (None: sent)."""
    if exc is None:
        return True
    if isinstance(exc, ClarosUnavailableError):
        return exc
    if isinstance(exc, ClarosRefusedError) and exc.status in (409, 422):
        log.debug("Claros had the %s already: %s", report.what, exc)
        return True
    log.warning("Claros did not take the %s: %s", report.what, exc)
    return False


@dataclass
class Flushed:
    sent: int = 0  # Claros has them
    refused: int = 0  # Claros refused them for good: removed, logged
    unavailable: str | None = None  # why the rest stays in the spool
    busy: bool = False  # another process is sending the spool
    more: bool = False  # a full batch went: there may be more


async def flush(
    spool: Spool,
    api: ReportSender,
    *,
    limit: int,
    pace: Callable[[], Awaitable[None]] | None = None,
) -> Flushed:
    """Send up to ``limit`` reports from the spool, one at a time (``pace`` before each),
    stopping at the first Claros cannot take; remove what it took. Cancelling it (a time
    budget) still removes what was sent."""
    done = Flushed()
    with spool.sending() as mine:
        if not mine:
            done.busy = True
            return done
        reports, bad = await anyio.to_thread.run_sync(spool.take, limit)
        settled: set[tuple[str, str]] = set()
        try:
            for report in reports:
                if pace is not None:
                    await pace()
                try:
                    took = await deliver(api, report)
                except ClarosUnavailableError as exc:
                    done.unavailable = str(exc)
                    break
                settled.add(report.ident)
                if took:
                    done.sent += 1
                else:
                    done.refused += 1
            else:
                done.more = len(reports) >= limit
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(spool.settle, settled, bad)
    return done
