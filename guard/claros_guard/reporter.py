"""Reports (outcomes, writes let through unchecked) go to Claros in the background, after
the checks.

A check is on the agent's path; a report is not. So reports go out one at a time, once no
check has been in flight for ``idle`` seconds, or once a report has waited ``max_delay``
seconds (an agent that never pauses still has its outcomes recorded within seconds). What
Claros cannot take now (unreachable) is kept, up to ``backlog`` reports, and tried again
every ``retry_every`` seconds; what Claros refuses (a 4xx) is logged and dropped.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
import anyio.abc

from claros_guard.errors import ClarosUnavailableError, GuardError

__all__ = ["Reporter"]

log = logging.getLogger("claros_guard.reporter")

Job = Callable[[], Awaitable[None]]


@dataclass
class _Report:
    what: str
    job: Job
    since: float
    not_before: float = 0.0


class Reporter:
    def __init__(
        self,
        *,
        backlog: int = 1000,
        retry_every: float = 5.0,
        idle: float = 0.02,
        max_delay: float = 2.0,
    ) -> None:
        self.retry_every = retry_every
        self.idle = idle
        self.max_delay = max_delay
        self._queue: deque[_Report] = deque()
        self._backlog = backlog
        self._wake = anyio.Event()
        self._empty = anyio.Event()
        self._empty.set()
        self._checks = 0
        self._quiet_since = 0.0
        self._draining = False
        self.sent = 0

    @contextmanager
    def checking(self) -> Iterator[None]:
        """Marks a check in flight: reports wait for it (at most ``max_delay``)."""
        self._checks += 1
        try:
            yield
        finally:
            self._checks -= 1
            if self._checks == 0:
                self._quiet_since = anyio.current_time()
                self._wake.set()

    def submit(self, what: str, job: Job) -> None:
        if len(self._queue) >= self._backlog:
            dropped = self._queue.popleft()
            log.warning("too many reports waiting; dropped the %s", dropped.what)
        self._queue.append(_Report(what, job, anyio.current_time()))
        self._empty = anyio.Event() if self._empty.is_set() else self._empty
        self._wake.set()

    def _wait_for(self, report: _Report) -> float:
        """Seconds until the report may go (0: now)."""
        now = anyio.current_time()
        if self._draining:
            return 0.0
        floor = report.not_before - now
        due = report.since + self.max_delay - now
        if self._checks == 0:
            due = min(due, self._quiet_since + self.idle - now)
        return max(0.0, floor, due)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        while True:
            if not self._queue:
                self._empty.set()
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            wait = self._wait_for(self._queue[0])
            if wait > 0:
                self._wake = anyio.Event()
                with anyio.move_on_after(wait):
                    await self._wake.wait()
                continue
            await self._send(self._queue.popleft())

    async def _send(self, report: _Report) -> None:
        try:
            await report.job()
            self.sent += 1
        except ClarosUnavailableError as exc:
            if self._draining:
                log.warning("could not send the %s before stopping: %s", report.what, exc)
                return
            log.warning("keeping the %s for later: %s", report.what, exc)
            report.not_before = anyio.current_time() + self.retry_every
            self._queue.append(report)
        except GuardError as exc:
            log.warning("Claros did not take the %s: %s", report.what, exc)

    async def drain(self, timeout: float) -> None:
        """Send what is waiting now, one more try each (bounded by ``timeout``)."""
        self._draining = True
        self._wake.set()
        with anyio.move_on_after(timeout):
            await self._empty.wait()
