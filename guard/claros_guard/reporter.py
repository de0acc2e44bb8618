"""Reports (outcomes, writes let through unchecked) go to Claros in the background, after
the checks.

An agent's call is on its path; a report is not. A report costs Claros about as much CPU
as a check, and the guard a request's worth: sent while a call is in flight, it competes
for the machine with that call's check, the wrapped server and the guard itself. So
reports go out once no call of the agent has been in flight (``busy``) for ``idle``
seconds, or once a report has waited ``max_delay`` seconds (an agent that never pauses
still has its outcomes recorded within seconds). What is queued then goes together (up to
``coalesce``): each report its own request, pipelined in one write on the kept connection
(``HttpClarosApi.send_reports``), so that an agent that never pauses has its reports sent
as one short run every so often, not one round trip between each two calls.

Nothing of this runs on a call's path either: a call starting or ending and a report
being queued only note the time, and arm a timer of the event loop for the moment the
reporter has something to do (the quiet time after a call, a new report's deadline); the
reporter never wakes in the middle of a call, nor ahead of the answer it follows.

What Claros cannot take now (unreachable, slow, 5xx) goes to the spool on disk
(``claros_guard.spool``) at once, with everything queued behind it: a guard stopped or
killed during an outage must not lose it. The spool is sent at start (reports an earlier
guard or hook left there) and every ``retry_every`` seconds while it holds anything, paced
like the reports. At exit, what is still queued after ``drain`` goes to the spool too.
What Claros refuses (a 4xx) is logged and dropped; a 409, "already recorded", is not a
refusal, and a 409 ``idempotency_in_progress`` (the report's first send still running, or
cut off by a crash) is "retry later", like a 503. Without a usable spool, reports are kept
in memory (up to ``backlog``) and tried again every ``retry_every`` seconds, as long as the
guard runs.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
import anyio.abc

from claros_guard.api import Report
from claros_guard.errors import ClarosUnavailableError, GuardError
from claros_guard.spool import ReportSender, Spool, deliver_many, flush

__all__ = ["Reporter"]

log = logging.getLogger("claros_guard.reporter")


@dataclass
class _Queued:
    report: Report
    since: float
    not_before: float = 0.0


class Reporter:
    def __init__(
        self,
        api: ReportSender,
        spool: Spool | None = None,
        *,
        backlog: int = 1000,
        retry_every: float = 5.0,
        idle: float = 0.02,
        max_delay: float = 2.0,
        batch: int = 500,
        coalesce: int = 32,
    ) -> None:
        self.api = api
        self.spool = spool
        self.retry_every = retry_every
        self.idle = idle
        self.max_delay = max_delay
        self.batch = batch
        self.coalesce = max(1, coalesce)
        self._queue: deque[_Queued] = deque()
        self._backlog = backlog
        self._wake = anyio.Event()
        self._empty = anyio.Event()
        self._empty.set()
        self._stopped = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._busy = 0
        self._quiet_since = 0.0
        self._quiet: asyncio.TimerHandle | None = None  # the wake once calls have paused
        self._deadline: asyncio.TimerHandle | None = None  # the wake when the head is due
        self._timers: set[asyncio.TimerHandle] = set()
        self._flushing = False
        self._draining = False
        self._next_flush = 0.0  # at start: reports an earlier guard or hook left
        self._down_until = 0.0  # Claros failed a moment ago: spool without trying
        self._outage = False
        self.sent = 0

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Marks an agent's call in flight (its check, the forward, its answer): reports
        wait until calls have paused for ``idle`` seconds (at most ``max_delay``)."""
        self._busy += 1
        if self._quiet is not None:  # calls go on: the wake armed when they paused is moot
            self._cancel(self._quiet)
            self._quiet = None
        try:
            yield
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._quiet_since = anyio.current_time()
                if self._queue or self._flushing:
                    self._quiet = self._wake_at(self._quiet_since + self.idle)

    def submit(self, report: Report) -> None:
        now = anyio.current_time()
        self._queue.append(_Queued(report, now))
        self._empty = anyio.Event() if self._empty.is_set() else self._empty
        if len(self._queue) > self._backlog:
            self._wake.set()  # the oldest go to the spool now
        elif len(self._queue) == 1:
            # A new head: the reporter learns its deadline when it is due, and its quiet
            # time when calls pause (``busy``); waking it now would run it ahead of the
            # answer to the call this report follows.
            if self._deadline is not None:  # an earlier head's, sent by now
                self._cancel(self._deadline)
            self._deadline = self._wake_at(now + self.max_delay)
            if self._busy == 0 and self._quiet is None:
                self._quiet = self._wake_at(max(now, self._quiet_since + self.idle))

    def _wake_at(self, when: float) -> asyncio.TimerHandle:
        """Wake the reporter at ``when`` (the event loop's clock, ``anyio.current_time``)."""

        def wake() -> None:
            self._timers.discard(handle)
            if handle is self._quiet:
                self._quiet = None
            if handle is self._deadline:
                self._deadline = None
            self._wake.set()

        handle = asyncio.get_running_loop().call_at(when, wake)
        self._timers.add(handle)
        return handle

    def _cancel(self, handle: asyncio.TimerHandle) -> None:
        handle.cancel()
        self._timers.discard(handle)

    def _wait_for(self, item: _Queued) -> float:
        """Seconds until the report may go (0: now)."""
        now = anyio.current_time()
        if self._draining:
            return 0.0
        floor = item.not_before - now
        due = item.since + self.max_delay - now
        if self._busy == 0:
            due = min(due, self._quiet_since + self.idle - now)
        return max(0.0, floor, due)

    async def _sleep(self, seconds: float) -> None:
        """Until ``seconds`` pass or something wakes the reporter."""
        self._wake = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._wake.wait()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            with anyio.CancelScope() as self._scope:
                task_status.started()
                await self._loop()
        finally:
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()
            self._quiet = self._deadline = None
            self._stopped.set()

    async def _loop(self) -> None:
        while True:
            if len(self._queue) > self._backlog:
                await self._overflow()
            if self._queue:
                wait = self._wait_for(self._queue[0])
                if wait > 0:
                    await self._sleep(wait)
                else:
                    await self._send_head()
                continue
            self._empty.set()
            if self.spool is None or self._draining:
                await self._sleep(math.inf)
                continue
            wait = self._next_flush - anyio.current_time()
            if wait > 0:
                await self._sleep(wait)
                continue
            await self._flush()

    async def _send_head(self) -> None:
        """The head is due: it goes, with what is queued behind it (up to ``coalesce``)."""
        if self.spool is not None and anyio.current_time() < self._down_until:
            await self._keep("Claros was unreachable moments ago")
            return
        items = [self._queue[i] for i in range(min(self.coalesce, len(self._queue)))]
        results = await deliver_many(self.api, [i.report for i in items])
        # Taken off the queue only now: a send cut short at exit leaves them for the spool.
        for item, result in zip(items, results, strict=True):
            if isinstance(result, ClarosUnavailableError):
                await self._keep(str(result))  # this one and everything behind it
                return
            if self._queue and self._queue[0] is item:
                self._queue.popleft()
            if result is True:
                self.sent += 1
                self._back_up()

    def _back_up(self) -> None:
        if self._outage:
            log.info("Claros is reachable again")
            self._outage = False

    def _down(self, reason: str, kept: str) -> None:
        """One warning when an outage starts; the rest of it at info level."""
        level = logging.INFO if self._outage else logging.WARNING
        log.log(level, "Claros is unreachable (%s): %s", reason, kept)
        self._outage = True

    async def _keep(self, reason: str) -> None:
        """Claros cannot take reports now: the whole queue goes to the spool (or, without
        one, waits in memory)."""
        items = list(self._queue)
        self._queue.clear()
        now = anyio.current_time()
        self._down_until = self._next_flush = now + self.retry_every
        if self.spool is not None and await self._spool([i.report for i in items]):
            kept = f"{len(items)} reports kept in {self.spool.path}"
            self._down(reason, f"{kept}, sent again every {self.retry_every:g}s")
            return
        if self._draining:
            log.warning("could not send %d reports before stopping: %s", len(items), reason)
            return
        self._down(reason, f"keeping {len(items)} reports in memory")
        for item in items:
            item.not_before = now + self.retry_every
        self._queue.extend(items)

    async def _spool(self, reports: list[Report]) -> bool:
        """Whether the reports are in the spool now (kept, or dropped by a full spool and
        logged there)."""
        if self.spool is None:
            return False
        spool = self.spool
        try:
            with anyio.CancelScope(shield=True):  # half spooled at exit is worse than late
                await anyio.to_thread.run_sync(spool.append, reports)
        except (OSError, GuardError) as exc:
            log.error("cannot write the report spool %s: %s", spool.path, exc)
            return False
        return True

    async def _overflow(self) -> None:
        """More reports waiting than ``backlog``: the oldest go to the spool (or, without
        one, are dropped, and said so)."""
        excess = [self._queue.popleft() for _ in range(len(self._queue) - self._backlog)]
        if await self._spool([i.report for i in excess]):
            return
        for item in excess:
            log.warning("too many reports waiting; dropped the %s", item.report.what)

    async def _pace(self) -> None:
        """Before each report from the spool: as long as a queued report would wait."""
        start = anyio.current_time()
        while not self._draining:
            now = anyio.current_time()
            due = start + self.max_delay - now
            if self._busy == 0:
                due = min(due, self._quiet_since + self.idle - now)
            if due <= 0:
                return
            await self._sleep(due)

    async def _flush(self) -> None:
        spool = self.spool
        assert spool is not None
        self._next_flush = anyio.current_time() + self.retry_every
        self._flushing = True  # ``busy`` wakes the pacing when calls pause
        try:
            if not await anyio.to_thread.run_sync(spool.has_work):
                return
            done = await flush(spool, self.api, limit=self.batch, pace=self._pace)
        except (OSError, GuardError) as exc:
            log.error("cannot send the report spool %s: %s", spool.path, exc)
            return
        finally:
            self._flushing = False
        self.sent += done.sent
        if done.sent:
            log.info("sent %d reports from the spool %s", done.sent, spool.path)
            self._back_up()
        if done.unavailable is not None:
            self._down_until = self._next_flush
            self._down(done.unavailable, f"the reports stay in {spool.path}")
        elif done.more:
            self._next_flush = anyio.current_time()  # the next batch at once

    async def drain(self, timeout: float) -> None:
        """Send what is waiting now, one more try each (bounded by ``timeout``); what is
        left then goes to the spool."""
        self._draining = True
        self._wake.set()
        with anyio.move_on_after(timeout):
            await self._empty.wait()
        if self._scope is not None:
            self._scope.cancel()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(1.0):  # the run task lets go of the queue
                await self._stopped.wait()
            left = [i.report for i in self._queue]
            self._queue.clear()
            if left and not await self._spool(left):
                log.warning("could not send %d reports before stopping", len(left))
