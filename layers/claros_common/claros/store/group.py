"""Group commit: concurrent appends of one lane (a workspace's chain, or a database file)
share one transaction instead of queueing for it one by one.

Every append joins its lane's queue. When no other thread of this process is committing
for the lane, the newcomer becomes the lane's leader: it takes the queue's head run (the
oldest appends, as many as ``fits`` lets into one transaction, its own always first) and
hands them to ``commit``, which writes them in one transaction and says, append by
append, what became of it (its result, or the error it alone caused). Meanwhile later
appends queue up; when the leader is done it promotes the oldest of them to lead the next
transaction and returns. So at most one transaction per lane is in flight in a process,
and under load each one carries many appends.

A follower waits at most ``wait_s`` to be taken into a transaction; past that it leaves
the queue (nothing of it was written) and raises ``busy()``. Once taken, it waits for the
transaction's answer: ``commit`` is bounded by its own retry budget.

The lane is per process: other processes (other Lambda environments) still race for the
chain head, and ``commit`` keeps its retries for that.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")

# How long a follower waits for an answer once its append is in a transaction. The
# transaction's own retries end well before this; it only stops a thread from hanging on
# a leader that died in a way Python could not report (it never should).
_TAKEN_WAIT_S = 300.0


@dataclass(eq=False)
class _Pending(Generic[T, R]):
    item: T
    wake: threading.Event = field(default_factory=threading.Event)
    taken: bool = False
    promoted: bool = False
    done: bool = False
    result: R | None = None
    error: BaseException | None = None


@dataclass(eq=False)
class _Lane(Generic[T, R]):
    lock: threading.Lock = field(default_factory=threading.Lock)
    queue: deque[_Pending[T, R]] = field(default_factory=deque)
    leading: bool = False


class GroupCommit(Generic[T, R]):
    """Group commit over ``commit(batch) -> [result or exception, one per item]``."""

    def __init__(
        self,
        commit: Callable[[list[T]], Sequence[R | BaseException]],
        fits: Callable[[list[T], T], bool],
        *,
        busy: Callable[[], BaseException],
        wait_s: float = 10.0,
    ) -> None:
        self._commit = commit
        self._fits = fits
        self._busy = busy
        self.wait_s = wait_s
        self._lanes: dict[str, _Lane[T, R]] = {}
        self._lanes_lock = threading.Lock()
        # How many transactions and items went through, for the benches and the tests.
        self.transactions = 0
        self.items = 0

    def _lane(self, key: str) -> _Lane[T, R]:
        with self._lanes_lock:
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane()
            return lane

    def queued(self, key: str) -> int:
        """How many appends wait in ``key``'s queue (not yet in a transaction)."""
        lane = self._lane(key)
        with lane.lock:
            return len(lane.queue)

    def submit(self, key: str, item: T) -> R:
        lane = self._lane(key)
        me: _Pending[T, R] = _Pending(item)
        with lane.lock:
            lane.queue.append(me)
            if not lane.leading:
                lane.leading = me.promoted = True
        if not me.promoted and not me.wake.wait(self.wait_s):
            with lane.lock:
                if not me.taken and not me.promoted:
                    lane.queue.remove(me)  # never written: safe to give up
                    raise self._busy()
        if me.promoted and not me.done:
            self._lead(lane)
        elif not me.done and not me.wake.wait(_TAKEN_WAIT_S):
            raise self._busy()  # pragma: no cover - a leader always answers (finally)
        if me.error is not None:
            raise me.error
        return me.result  # type: ignore[return-value]

    def _lead(self, lane: _Lane[T, R]) -> None:
        """Commit one transaction (the queue's head run, this thread's append first), then
        promote the next queued append to lead, or end the lane's leadership."""
        with lane.lock:
            batch: list[_Pending[T, R]] = []
            items: list[T] = []
            for pending in list(lane.queue):
                if not batch or self._fits(items, pending.item):
                    batch.append(pending)
                    items.append(pending.item)
            for pending in batch:
                lane.queue.remove(pending)
                pending.taken = True
        try:
            answers: Sequence[R | BaseException] = self._commit(items)
            if len(answers) != len(batch):  # pragma: no cover - a bug in commit
                raise RuntimeError("group commit: one answer per append expected")
        except BaseException as exc:  # every append of the batch shares the failure
            answers = [exc] * len(batch)
        self.transactions += 1
        self.items += len(batch)
        with lane.lock:
            for pending, answer in zip(batch, answers, strict=True):
                if isinstance(answer, BaseException):
                    pending.error = answer
                else:
                    pending.result = answer
                pending.done = True
                pending.wake.set()
            if lane.queue:
                nxt = lane.queue[0]
                nxt.promoted = True
                nxt.wake.set()
            else:
                lane.leading = False
