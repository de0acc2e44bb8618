"""``claros verify --export``'s entries checked by several processes.

Each entry line states its own fields, its ``prev_hash`` and its record, so its two
hashes (the record against ``payload_sha256``, the entry's hash from its fields) can be
recomputed anywhere; only the links between lines, seq contiguity and the export's own
sha256 need the lines in order. So the parent reads the rest of the file once, in
order, into a few buffers of shared memory (``SLOT`` bytes, cut at a line's end), hashes
each for the export's signature, and hands it to a worker process, which runs
``ChainVerifier.feed_written_run`` (the serial fast path itself: line for line the same
checks) over it and answers what it found, in order: *runs* of lines it took (where the
run starts, its first seq and prev_hash, how many lines, the checkpoints met, its last
entry) and every other *line* whole (a prune, key or rule entry, another layout,
anything that failed). Workers and parent see the very same bytes: a buffer is filled
again only once its answer was taken. With a buffer go the signed checkpoints its runs
can reach (the seqs from its first line's, fewer than one per 192 bytes): a run stops
where those end, and what lies beyond is the parent's.

The parent (``ParallelEntries.take``) goes through the answers in file order with its
one chain: a run is taken only if its first line follows the parent's last entry (seq
and link), as ``feed_written_run`` would have required; a line goes through the serial
reader's own code for one line. Anything else (a run that does not follow, a run after
the signature line, a buffer with too many other lines, a worker that failed) sends the
rest of that buffer through the serial reader: every failure is found and worded by the
serial code, so both paths print exactly the same (tests/guard/test_verify_parallel.py).

The workers (``Workers``: forked by hand, a pipe each, no pool and no threads) start as
soon as the header is read, when the export is large; they check the checkpoints'
signatures first (``SignatureChecks``): each put off with the key it would have been
checked with at its line, sent a batch at a time while the parent reads on, settled in
line order; then the entries.

Used only where it pays: an export of at least ``MIN_BYTES``, with two or more workers
(``--workers``, default the CPUs this process may run on) and ``fork``.

Pure code but for the worker processes; never imports boto3.
"""

from __future__ import annotations

import gc
import json
import mmap
import os
import re
import select
import signal
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from claros.checkpoint_table import Span
from claros.chunked import ChunkedLines
from claros.ledger import (
    ChainVerifier,
    Entry,
    PublicKey,
    _written_pattern,
    slim_checkpoints,
    verify_signature,
)

if TYPE_CHECKING:
    from claros_guard.verify import _ExportReader

__all__ = [
    "AHEAD",
    "MIN_BYTES",
    "SLOT",
    "ParallelEntries",
    "SignatureChecks",
    "Workers",
    "default_workers",
]

# A buffer: ~1,400 lines of 1.4 KB; big enough that its answer costs nothing per line,
# small enough that the workers stay busy to the end and the memory stays small (there
# are ``2 * workers + 2`` of them).
SLOT = 2 << 20
# Below this much left to read (~22,000 realistic entries, known from the header's
# count), starting the workers costs more than it saves.
MIN_BYTES = 32 << 20
# A buffer whose other lines hold more than this is checked by the parent instead (a
# file of garbage is not sent between processes whole).
OTHER_BYTES = 1 << 20
ANSWER_WAIT = 120.0  # seconds
# Tasks sent to a busy worker ahead of its need (it starts on the next one the moment it
# answers, rather than waiting for this process to take its answer and send another),
# and the largest such a task may be (pickled): far less than a pipe holds.
AHEAD = 1
AHEAD_BYTES = 32 << 10


def default_workers() -> int:
    """The CPUs this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# --- in a worker --------------------------------------------------------------------------
# What a worker answers: NamedTuples, not frozen dataclasses, which cost ~3 ms each to
# define, at every start of ``claros verify``, before any line is read.
class Run(NamedTuple):
    start: int  # where its first line starts in the buffer
    first_seq: int
    first_link: bytes  # its first line's prev_hash, as written
    lines: int
    verified: int  # checkpoints met
    last_cp: int | None
    last: Entry


class Line(NamedTuple):
    start: int
    line: bytes


Item = Run | Line


class _NoDigest:
    """The parent hashes the export; a worker does not."""

    def update(self, data: Any) -> None:
        pass


# Set in the parent before the workers are forked (they inherit it): the buffers, and
# what the workers check against.
_state: dict[str, Any] = {}


def _one_read(data: bytes) -> Any:
    """A ``read`` that gives ``data`` once, then the end."""
    parts = [data]

    def read(_: int) -> bytes:
        return parts.pop() if parts else b""

    return read


def scan(
    slot: int, length: int, lo: int, hi: int, cps: Span, leave: frozenset[int]
) -> list[Item] | None:
    """What buffer ``slot`` holds in its first ``length`` bytes (whole lines), in order;
    None: too many other lines. A run takes only seqs in ``[lo, hi)``: ``cps`` holds the
    signed checkpoints there (the parent's, not all: a few per buffer), ``leave`` the
    seqs there that go to the parent."""
    # As in the serial run: it makes no cycles, only short-lived tuples that would set
    # off a collection every few hundred lines. This process is ours alone.
    gc.disable()
    match = _state["match"]
    table = slim_checkpoints(_state["workspace"])
    table.put_span(cps, 0, "")
    # A run goes up one seq at a time from its first line, which is in [lo, hi): a
    # checkpoint at hi that no line's hash equals ends it there.
    table.put(hi, "", 0, "")
    verifier = ChainVerifier(_state["workspace"], compare_records=True, checked=table)
    rep = verifier.report
    # Read where it lies, in the shared memory (the parent fills it again only once this
    # answered): no copy of it in this process.
    source = ChunkedLines.whole(_state["slots"][slot], length)
    items: list[Item] = []
    other = 0
    digest = _NoDigest()
    while source.fill():
        buf, here = source.buf, source.pos  # where in the buffer
        pos = here
        stop = buf.find(b"\n", pos, source.end) + 1
        m = match(buf, pos, stop) if stop else None
        if m is not None:
            seq, link = int(m.group(1)), m.group(6)
            if not lo <= seq < hi:  # its checkpoints were not given: the parent's
                m = None
        if m is not None:
            try:
                verifier.start_run(seq, link.decode())
            except UnicodeDecodeError:
                m = None
        if m is not None:
            entries, verified = rep.entries, rep.checkpoints_verified
            rep.last_checkpoint_seq = None
            taken = verifier.feed_written_run(source, digest, leave)
            if taken:
                last = verifier.prev
                assert last is not None and rep.entries - entries == taken
                met = rep.checkpoints_verified - verified
                items.append(Run(here, seq, link, taken, met, rep.last_checkpoint_seq, last))
                continue
        line = source.next_line()
        assert line is not None
        other += len(line)
        if other > OTHER_BYTES:
            return None
        items.append(Line(here, line))
    return items


# --- the worker processes -----------------------------------------------------------------
class _Answer:
    """What one task answers, once ``get`` has it."""

    __slots__ = ("done", "failed", "pool", "value")

    def __init__(self, pool: Workers) -> None:
        self.pool = pool
        self.done = False
        self.failed = False
        self.value: Any = None

    def fail(self, why: str) -> None:
        self.done, self.failed, self.value = True, True, why

    def get(self, timeout: float) -> Any:
        """The task's result; an exception if it failed, its worker died or every busy
        worker was silent for ``timeout`` seconds (a worker killed, out of memory)."""
        while not self.done:
            self.pool.pump(timeout)
        if self.failed:
            raise RuntimeError(f"a worker failed: {self.value}")
        return self.value


class _Conn:
    """One end of a worker's two pipes (one each way): pickled objects, each after its
    length. What ``multiprocessing``'s ``Pipe`` does; importing that costs ~15 ms of CPU
    before the first fork, on the way to the first buffer."""

    __slots__ = ("_in", "_out")

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._in, self._out = read_fd, write_fd

    def fileno(self) -> int:
        """What to wait on for what comes in."""
        return self._in

    def send_bytes(self, data: bytes) -> None:
        view = memoryview(len(data).to_bytes(8, "little") + data)
        while view:
            view = view[os.write(self._out, view) :]

    def send(self, value: Any) -> None:
        import pickle

        self.send_bytes(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))

    def _read(self, n: int) -> bytearray:
        data = bytearray(n)
        with memoryview(data) as view:
            while n:
                got = os.readv(self._in, [view[len(data) - n :]])
                if not got:
                    raise EOFError("the other end closed its pipe")
                n -= got
        return data

    def recv(self) -> Any:
        """The next object; EOFError once the other end is gone."""
        import pickle

        return pickle.loads(self._read(int.from_bytes(self._read(8), "little")))

    def close(self) -> None:
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass
        self._in = self._out = -1


def _pipes() -> tuple[_Conn, _Conn]:
    """The parent's and the worker's ends of two new pipes."""
    to_worker, to_parent = os.pipe(), os.pipe()
    return _Conn(to_parent[0], to_worker[1]), _Conn(to_worker[0], to_parent[1])


class _Worker:
    """One forked process and the pipe to it. It works on one task at a time; the next
    may wait in its pipe (``Workers``), so it starts on it the moment it answers."""

    def __init__(self, pid: int, conn: _Conn) -> None:
        self.pid = pid
        self.conn = conn
        self.tasks: deque[_Answer] = deque()  # sent, not answered yet, in order
        self.dead = False

    def send(self, task: bytes, answer: _Answer) -> None:
        """``task``: (function name, arguments), pickled."""
        try:
            self.conn.send_bytes(task)
        except (OSError, ValueError) as exc:
            self.stop()
            answer.fail(repr(exc))
            return
        self.tasks.append(answer)

    def receive(self) -> None:
        """Its oldest task's answer (it is ready), or its tasks failed and it is stopped."""
        answer = self.tasks.popleft() if self.tasks else None
        try:
            ok, value = self.conn.recv()
        except Exception as exc:  # dead, or an answer that does not load
            self.stop()
            if answer is not None:
                answer.fail(repr(exc))
            return
        if answer is not None:
            answer.done, answer.failed, answer.value = True, not ok, value

    def stop(self) -> None:
        if not self.dead:
            self.dead = True
            self.conn.close()
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        while self.tasks:
            self.tasks.popleft().fail("its worker stopped")


def _serve(conn: _Conn) -> None:
    """A worker's life: each task (the name of a function here, its arguments) answered
    in turn, until the parent closes the pipe. Never returns."""
    code = 1
    try:
        gc.disable()  # this process is ours alone, and makes no cycles
        while True:
            try:
                name, args = conn.recv()
            except EOFError:
                break
            try:
                # Looked up here, at each task: what this module holds now.
                answer = (True, globals()[name](*args))
            except Exception as exc:
                answer = (False, repr(exc))
            conn.send(answer)
        code = 0
    finally:
        os._exit(code)  # nothing of the parent's (atexit, buffers) runs twice


class Workers:
    """The worker processes, forked once (``start``), as soon as the header shows a large
    export, and shared by the checkpoints' signatures and then the entries; with the
    buffers they read, mapped before the fork. Each talks over its own pipe (no threads
    here, ~0.2 ms a task, where a multiprocessing pool took ~0.9). ``close`` ends them
    (on every way out)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[_Worker] = []
        self.queue: deque[tuple[bytes, _Answer]] = deque()  # pickled tasks, to send
        self.slots: list[mmap.mmap] = []
        self._failed = count < 2 or not hasattr(os, "fork")
        self._released = False

    def start(self, workspace: str) -> bool:
        """Whether the workers run (started now if need be)."""
        if not self.procs and not self._failed:
            # One a worker works on, one waiting for it, one being read into and one
            # whose answer this process takes.
            slots = [mmap.mmap(-1, SLOT) for _ in range(self.count * (AHEAD + 1) + 2)]
            _state.update(slots=slots, workspace=workspace, match=_written_pattern(workspace).match)
            self.slots = slots
            # The workers check the checkpoints' signatures and this process the export's
            # own: PyNaCl is imported once, here, and shared, rather than by each worker at
            # its first batch (while this one waits for it) and by this one after its last
            # buffer (~10-15 ms of CPU each, and a first batch cost ~35 ms more than the
            # next).
            # And pickle, which the tasks and answers go through, once for all of them.
            import pickle  # noqa: F401

            import nacl.signing  # noqa: F401

            # What is in memory now is shared with the workers until one of them writes
            # to it: frozen, a collection never walks it (which would touch, and so
            # copy, every page of it in each worker).
            gc.freeze()
            try:
                for _ in range(self.count):
                    self.procs.append(_fork([w.conn for w in self.procs]))
            except OSError:
                self._failed = True  # no worker processes here: the serial path, untouched
                self.close()
                return False
            finally:
                gc.unfreeze()
        return bool(self.procs) and not self._released

    def apply(self, name: str, args: tuple[Any, ...]) -> _Answer:
        """Function ``name`` of this module run on ``args`` by the next worker free: the
        tasks wait here, so a worker that is slow (its core busy with other work) holds
        at most ``AHEAD`` more, and the others take the rest."""
        import pickle  # here: only an export large enough for workers pays for it

        answer = _Answer(self)
        self.queue.append((pickle.dumps((name, args), pickle.HIGHEST_PROTOCOL), answer))
        self._dispatch()
        return answer

    def _dispatch(self) -> None:
        """The tasks waiting here to the workers: first to those with none, then one
        ahead to each busy one, so that it never waits for this process (which may be
        busy hashing a buffer) between two tasks. Only a small task goes ahead: it sits
        in the pipe while the worker may be sending a large answer, which this process
        reads only once its own send is done."""
        for ahead in range(AHEAD + 1):
            for worker in self.procs:
                if not self.queue:
                    return
                if worker.dead or len(worker.tasks) != ahead:
                    continue
                if ahead and len(self.queue[0][0]) > AHEAD_BYTES:
                    return  # it waits for a worker that has nothing to do
                task, answer = self.queue.popleft()
                worker.send(task, answer)
        if self.queue and all(w.dead for w in self.procs):
            while self.queue:
                self.queue.popleft()[1].fail("no worker left")

    def pump(self, timeout: float) -> None:
        """Takes the answers in (waiting up to ``timeout`` seconds for one) and hands the
        waiting tasks to the workers that are free; the busy workers silent so long are
        stopped (their tasks fail)."""
        busy = {w.conn.fileno(): w for w in self.procs if w.tasks and not w.dead}
        if not busy:
            self._dispatch()
            return
        poll = select.poll()
        for fd in busy:
            poll.register(fd, select.POLLIN)
        ready = poll.poll(int(timeout * 1000))  # an answer, or a pipe closed (POLLHUP)
        if not ready and timeout > 0:
            for worker in busy.values():
                worker.stop()
        for fd, _ in ready:
            busy[fd].receive()
        self._dispatch()

    def release(self) -> None:
        """No more tasks: each worker is told so (its pipe closed) and ends on its own;
        ``close`` waits for them."""
        self._failed = self._released = True
        for worker in self.procs:
            worker.conn.close()

    def close(self) -> None:
        self._failed = True  # not started again
        for worker in self.procs:  # all told to end before any is waited for
            worker.conn.close()
            try:
                os.kill(worker.pid, signal.SIGKILL)
            except OSError:
                pass
        for worker in self.procs:
            worker.stop()
        self.procs = []
        while self.queue:
            self.queue.popleft()[1].fail("closed")
        _state.clear()
        for slot in self.slots:
            slot.close()
        self.slots = []


def _fork(others: list[_Conn]) -> _Worker:
    here, there = _pipes()
    try:
        pid = os.fork()
    except OSError:
        here.close()
        there.close()
        raise
    if pid == 0:  # the worker: only its own end of its own pipe
        try:
            here.close()
            for conn in others:
                conn.close()
        finally:
            _serve(there)
    there.close()
    return _Worker(pid, here)


# --- checkpoint signatures ----------------------------------------------------------------
# How many checkpoints wait at most to be checked together (a batch; ~70 us each): the
# parent goes on reading while the workers check them, in tasks of SIGNATURE_TASK (~2 ms:
# they take them as they are free, so both end the last batch at about the same time,
# where halves of a batch left one idle ~10-30 ms while the parent waited for the other).
SIGNATURE_BATCH = 256
SIGNATURE_TASK = 32
# At most this many checkpoints go with a buffer (the rest of its seqs, in an export of
# very dense checkpoints, are the parent's): a task stays far smaller than a pipe holds,
# so a worker sending a large answer never waits on a parent that is sending a task.
TASK_CHECKPOINTS = 500


def _check_signatures(jobs: list[tuple[PublicKey, bytes, str]]) -> list[bool]:
    return [verify_signature(key, message, signature) for key, message, signature in jobs]


class SignatureChecks:
    """Checkpoint signatures checked by the workers, a batch at a time, while the parent
    reads on; in this process when the workers are not to be used (``workspace`` None:
    not a large export) or cannot start."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.workspace: str | None = None

    def submit(self, jobs: list[tuple[PublicKey, bytes, str]]) -> Callable[[], list[bool]]:
        """Starts checking ``jobs``; what it returns gives ``verify_signature`` of each, in
        order (waiting for the workers)."""
        started = bool(jobs and self.workspace and self.workers.start(self.workspace))
        parts: list[_Answer] = []
        if started:
            step = min(SIGNATURE_TASK, -(-len(jobs) // self.workers.count))
            parts = [
                self.workers.apply("_check_signatures", (jobs[i : i + step],))
                for i in range(0, len(jobs), step)
            ]
        if not parts:
            answers = _check_signatures(jobs)
            return lambda: answers

        def answer() -> list[bool]:
            try:
                return [ok for part in parts for ok in part.get(ANSWER_WAIT)]
            except Exception:  # a worker failed: checked here instead
                return _check_signatures(jobs)

        return answer


# --- in the parent ------------------------------------------------------------------------
# Every entry line holds three 64-digit hashes, so a buffer of n bytes holds fewer than
# n // MIN_ENTRY entry lines: the seqs its runs can reach, whose checkpoints it is given.
MIN_ENTRY = 192


class ParallelEntries:
    """Checks the rest of an export's entries with the ``workers`` (see above)."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.used = 0  # worker processes used, once ``take`` ran

    def pays(self, handle: IO[bytes], left: int) -> bool:
        """Whether to: two workers or more, ``fork``, and enough left to read (``left``:
        bytes still to read from ``handle`` beyond what was read)."""
        if self.workers.count < 2 or not hasattr(os, "fork"):
            return False
        try:
            st = os.fstat(handle.fileno())
            at = handle.tell()
        except (OSError, ValueError, AttributeError):
            return False
        import stat

        return stat.S_ISREG(st.st_mode) and st.st_size - at + left >= MIN_BYTES

    def take(self, reader: _ExportReader, source: ChunkedLines, handle: IO[bytes]) -> bool:
        """Check every line left (``source``'s, then ``handle``'s) to the end, feeding
        ``reader`` exactly as its serial loop would; False (nothing done) when it cannot
        start."""
        verifier = reader.verifier
        if verifier is None or verifier.prev is None:
            return False
        if not self.workers.start(verifier.report.workspace):
            return False
        self.used = self.workers.count
        leave = sorted(reader.saved_check.want) if reader.saved_check is not None else []
        _Feeder(reader, source, handle, self.workers, leave).run()
        return True


class _Feeder:
    """Fills the buffers in file order, hands each to a worker, stitches the answers."""

    def __init__(
        self,
        reader: _ExportReader,
        source: ChunkedLines,
        handle: IO[bytes],
        workers: Workers,
        leave: list[int],
    ) -> None:
        self.reader = reader
        self.leave = leave
        assert reader.verifier is not None
        self.verifier = reader.verifier
        workspace = json.encoder.encode_basestring(self.verifier.report.workspace).encode()
        self.first_seq = re.compile(
            rb'\{"workspace":' + re.escape(workspace) + rb',"seq":(0|[1-9][0-9]{0,18}),'
        ).match
        self.handle = handle
        self.slots = workers.slots
        self.workers = workers
        self.tail = bytes(source.buf[source.pos :])  # read already, not handed out
        self.eof = False
        self.max_line = source.max_line

    def _fill(self, slot: int) -> int:
        """Buffer ``slot`` filled with the next whole lines; their length (0: the end)."""
        buf = self.slots[slot]
        with memoryview(buf) as view:
            first, rest = self.tail[:SLOT], self.tail[SLOT:]
            n = len(first)
            view[:n] = first
            while n < SLOT and not self.eof:
                got = self.handle.readinto(view[n:])  # type: ignore[attr-defined]
                if not got:
                    self.eof = True
                    break
                n += got
            cut = n if self.eof and not rest else buf.rfind(b"\n", 0, n) + 1
            if cut == 0:  # one line longer than a buffer: the parent reads the rest itself
                raise _TooLong(bytes(view[:n]) + rest)
            self.tail = bytes(view[cut:n]) + rest
        return cut

    def _task(self, slot: int, n: int) -> tuple[Any, ...]:
        """``scan``'s arguments for buffer ``slot``: the seqs its runs may reach (from its
        first line's on) and the signed checkpoints and seqs to leave among them."""
        m = self.first_seq(self.slots[slot])
        lo = int(m.group(1)) if m is not None else 0
        hi = lo + n // MIN_ENTRY + 1 if m is not None else 0
        cps = self.verifier.checkpoints_between(lo, hi)
        if len(cps[0]) > TASK_CHECKPOINTS:
            hi = cps[0][TASK_CHECKPOINTS]
            cps = self.verifier.checkpoints_between(lo, hi)
        leave = frozenset(self.leave[bisect_left(self.leave, lo) : bisect_left(self.leave, hi)])
        return slot, n, lo, hi, cps, leave

    def run(self) -> None:
        free = list(range(len(self.slots)))
        inflight: deque[tuple[int, int, Any]] = deque()
        long_line: bytes | None = None
        while True:
            while free and long_line is None and not (self.eof and not self.tail):
                slot = free.pop()
                try:
                    n = self._fill(slot)
                except _TooLong as exc:
                    long_line = exc.data
                    free.append(slot)
                    break
                if not n:
                    free.append(slot)
                    break
                inflight.append((slot, n, self.workers.apply("scan", self._task(slot, n))))
            if not inflight:
                break
            slot, n, answer = inflight.popleft()
            try:
                # A worker killed (out of memory, a signal) never answers: after a wait
                # far beyond a buffer's ~20 ms, the parent checks the buffer itself.
                items = answer.get(ANSWER_WAIT)
            except Exception:  # a worker failed: the parent checks this buffer itself
                items = None
            self.workers.pump(0)  # a worker done meanwhile takes the next buffer now
            if (long_line is not None or (self.eof and not self.tail)) and all(
                a.done for _, _, a in inflight
            ):
                # Every answer is in: the workers end now, while this process takes the
                # last ones, rather than after.
                self.workers.release()
            with memoryview(self.slots[slot]) as whole:
                self._stitch(whole[:n], items)
            free.append(slot)
        if long_line is not None:
            # It holds the tail; a line past the bound raises LineTooLong (verify_export).
            rest = ChunkedLines(_Chain(long_line, self.handle.read), max_line=self.max_line)
            self.reader.serial_lines(rest)

    def _stitch(self, data: memoryview, items: list[Item] | None) -> None:
        reader = self.reader
        if items is None:
            reader.serial_lines(ChunkedLines(_one_read(bytes(data))))
            return
        for k, item in enumerate(items):
            if isinstance(item, Line):
                reader.one_line(item.line)
                continue
            upto = items[k + 1].start if k + 1 < len(items) else len(data)
            verifier = reader.verifier
            prev = verifier.prev if verifier is not None else None
            if (
                verifier is None
                or prev is None
                or reader.signature is not None
                or item.first_seq != prev.seq + 1
                or item.first_link != prev.hash.encode()
            ):
                # Not what the serial fast path would have taken: the serial reader, from
                # here to the end of the buffer, finds and words what is wrong.
                reader.serial_lines(ChunkedLines(_one_read(bytes(data[item.start :]))))
                return
            reader.digest.update(data[item.start : upto])
            verifier.take_run(item.lines, item.verified, item.last_cp, item.last)
            reader.line_no += item.lines
            reader.progress.update(verifier.report.entries)


class _TooLong(Exception):
    def __init__(self, data: bytes) -> None:
        self.data = data


class _Chain:
    """A ``read`` that gives ``first`` and then what ``read`` gives."""

    def __init__(self, first: bytes, read: Any) -> None:
        self.first = first
        self.read_more = read

    def __call__(self, n: int) -> bytes:
        if self.first:
            out, self.first = self.first, b""
            return out
        data: bytes = self.read_more(n)
        return data
