"""Answering what a check needs: run the reads Claros asks for and shape the answers.

* ``fetch``: the record the call targets, read fresh each time.
* ``lookup``: master data; one read per distinct value, cached for 60 s (here, and again
  in the guard that runs the read: ``LookupCache``, so one-shot hook processes share it).
  60 s from the read, not from when this guard got it: the guard that ran the read says
  how long its answer stays fresh (``fresh_for``, in the result's ``_meta``), and this
  cache keeps it no longer, so the two caches never add up to more than 60 s.
* ``query``: rows filtered by ``where`` and reduced (``count``, ``first``, ``last``,
  ``min``, ``max``) right here; only the value goes back to Claros, never the rows.

The reads of one round run concurrently. Which app runs a read, and whether the tool is a
read at all, is the ``Reader``'s business (the local server or another app's guard); it
is told the need's kind so that the guard answering it can cache lookups.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio

from claros_guard.errors import GuardError, ReadFailedError
from claros_guard.queries import filter_rows, reduce_rows
from claros_guard.records import error_report, record_of, rows_of

__all__ = [
    "FRESH_FOR",
    "LOOKUP_TTL",
    "LookupCache",
    "NeedResolver",
    "Reader",
    "canonical_arguments",
    "fresh_for",
    "with_fresh_for",
]

LOOKUP_TTL = 60.0
# Where a lookup's result says how many seconds it stays fresh (its ``_meta``).
FRESH_FOR = "claros/fresh_for"
_CACHE_MAX = 2000
_OPS = frozenset({"count", "first", "last", "min", "max"})


class Reader(Protocol):
    async def read(
        self, app: str | None, tool: str, arguments: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        """Run a read tool (of this guard's app when ``app`` is None) for a need of
        ``kind`` and return its ``CallToolResult`` as JSON. Raises ``ReadFailedError`` (or
        a subclass)."""
        ...


def with_fresh_for(result: Mapping[str, Any], seconds: float) -> dict[str, Any]:
    """``result`` saying it stays fresh ``seconds`` more (a lookup's, for whoever caches it)."""
    meta = result.get("_meta")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    meta[FRESH_FOR] = max(0.0, seconds)
    return {**result, "_meta": meta}


def fresh_for(result: Mapping[str, Any], ttl: float) -> float:
    """How long a lookup's result may be kept: what it says, never more than ``ttl``."""
    meta = result.get("_meta")
    said = meta.get(FRESH_FOR) if isinstance(meta, Mapping) else None
    if isinstance(said, bool) or not isinstance(said, int | float) or said != said:
        return ttl
    return max(0.0, min(float(said), ttl))


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """One text per set of arguments, whatever their order: the cache key's part."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)


class LookupCache:
    """Values kept ``ttl`` seconds, at most ``limit`` of them (expired ones go first; when
    all are fresh, all go: a burst of distinct values must not grow memory without end)."""

    def __init__(
        self,
        *,
        ttl: float = LOOKUP_TTL,
        limit: int = _CACHE_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.limit = limit
        self.clock = clock
        self._items: dict[tuple[str, ...], tuple[float, Any]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple[str, ...]) -> Any | None:
        hit = self.entry(key)
        return None if hit is None else hit[0]

    def entry(self, key: tuple[str, ...]) -> tuple[Any, float] | None:
        """The value kept and the seconds it stays fresh, or None."""
        hit = self._items.get(key)
        if hit is None:
            return None
        left = hit[0] - self.clock()
        if left <= 0:
            del self._items[key]
            return None
        return hit[1], left

    def put(self, key: tuple[str, ...], value: Any, ttl: float | None = None) -> None:
        """Keep ``value`` ``ttl`` seconds (this cache's own ttl when None, never more)."""
        now = self.clock()
        if len(self._items) >= self.limit:
            self._items = {k: v for k, v in self._items.items() if v[0] > now}
            if len(self._items) >= self.limit:
                self._items.clear()
        keep = self.ttl if ttl is None else min(ttl, self.ttl)
        if keep > 0:
            self._items[key] = (now + keep, value)


def _shape(need: Mapping[str, Any]) -> tuple[str, str, str, dict[str, Any]]:
    key, kind, tool, arguments = (need.get(k) for k in ("key", "kind", "tool", "arguments"))
    if not isinstance(key, str) or not isinstance(tool, str) or not isinstance(kind, str):
        raise ReadFailedError(f"Claros asked for a read the guard does not understand: {need!r}")
    if kind not in ("fetch", "lookup", "query"):
        raise ReadFailedError(
            f"Claros asked for a {kind!r} read; the guard knows fetch, lookup and query"
        )
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ReadFailedError(f"{key}: the arguments of {tool} are not an object")
    if kind == "query" and need.get("op") not in _OPS:
        raise ReadFailedError(f"{key}: unknown reduction {need.get('op')!r}")
    return key, kind, tool, arguments


class NeedResolver:
    def __init__(
        self,
        reader: Reader,
        *,
        ttl: float = LOOKUP_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self._cache = LookupCache(ttl=ttl, clock=clock)
        self.reads = 0  # reads actually run (for tests and logs)

    async def resolve(self, needs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``{key: record or value}`` for every need, or the first failure (in need order)
        that blocks even with ``--fail-open``, else the first failure."""
        shaped = [_shape(n) for n in needs]
        answers: dict[str, Any] = {}
        failures: dict[int, GuardError] = {}

        async def one(i: int, need: Mapping[str, Any]) -> None:
            key, kind, tool, arguments = shaped[i]
            try:
                answers[key] = await self._answer(need, kind, tool, arguments)
            except GuardError as exc:
                failures[i] = exc
            except Exception as exc:  # a reader bug must still block, with a reason
                failures[i] = ReadFailedError(f"{tool} failed: {exc}")

        if len(needs) == 1:  # the usual fetch: no task group to set up and join
            await one(0, needs[0])
        else:
            async with anyio.create_task_group() as tg:
                for i, need in enumerate(needs):
                    tg.start_soon(one, i, need)
        if failures:
            # A need naming a write next to a read that timed out must not be forwarded
            # by --fail-open because the timeout happened to come first.
            hard = [i for i in sorted(failures) if not failures[i].blocks_unless_fail_open]
            raise failures[hard[0] if hard else min(failures)]
        return answers

    async def _answer(
        self, need: Mapping[str, Any], kind: str, tool: str, arguments: dict[str, Any]
    ) -> Any:
        app = need.get("app")
        app = app if isinstance(app, str) and app else None
        if kind == "lookup":
            return await self._lookup(app, tool, arguments)
        result = await self._read(app, tool, arguments, kind)
        if kind == "fetch":
            record = record_of(result, tool)
            if not record:
                # Found nothing: taken as the record, every fact would be the agent's own.
                raise ReadFailedError(
                    f"{tool} returned an empty record ({{}}): the record the call names was "
                    "not found"
                )
            report = error_report(record)
            if report is not None:
                # As empty as {}: every fact would be the agent's own (tests/security/
                # test_not_found_body_lets_the_agent_state_the_facts.py).
                raise ReadFailedError(
                    f"{tool} returned a body that reports an error, not a record ({report}): "
                    "the record the call names was not read"
                )
            return record
        where = need.get("where") or {}
        if not isinstance(where, dict):
            raise ReadFailedError(f"{tool}: where is not an object")
        rows = filter_rows(rows_of(result, tool), where)
        try:
            return reduce_rows(rows, str(need["op"]), need.get("field"))
        except ValueError as exc:
            raise ReadFailedError(f"{tool}: {exc}") from exc

    async def _read(
        self, app: str | None, tool: str, arguments: dict[str, Any], kind: str
    ) -> dict[str, Any]:
        self.reads += 1
        return await self.reader.read(app, tool, arguments, kind=kind)

    async def _lookup(self, app: str | None, tool: str, arguments: dict[str, Any]) -> Any:
        cache_key = (app or "", tool, canonical_arguments(arguments))
        hit = self._cache.get(cache_key)
        if hit is not None:
            return hit
        result = await self._read(app, tool, arguments, "lookup")
        record = record_of(result, tool)
        # The guard that ran the read may have kept it a while: 60 s from the read.
        self._cache.put(cache_key, record, fresh_for(result, self._cache.ttl))
        return record
