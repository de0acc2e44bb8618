"""A window's counts from the hourly aggregates (``claros.aggregates``), never a scan of
the whole window.

The whole days inside [start, end) come from the day aggregates the store keeps. The
window's end edge, from the last midnight to ``end``, is that day's aggregate when nothing
of the day is stamped after ``end`` (else its hours' and its last partial hour's). The
start edge, from ``start`` to the first midnight, is read forward (its hours' aggregates
and its partial hour's records) or as an aggregate less what lies before ``start``
(``claros.evidence.window_less``), whichever reads less. Records are folded the same way
the aggregates are, and any hour or day holding entries a prune removed since is read
from the ledger, so the sum is exactly what feeding every record of the window to the
counters gives. ``scan_counters`` is that reference, kept for the tests that compare the
two.
"""

from __future__ import annotations

import bisect
import functools
from collections import Counter, deque
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, NamedTuple, TypeVar

import orjson

from claros import jsonutil
from claros.aggregates import DAY_MS, FLAGGED_ITEMS, HOUR_MS, SPANS, fold, upgrade, wait_bin
from claros.coverage import CoverageCounter
from claros.evidence.activity import CLOCK_SKEW_MS, Versions, first_seq_at, records_between
from claros.evidence.oversight import OversightCounter
from claros.evidence.report import ActivityCounter
from claros.evidence.span_cache import cached
from claros.evidence.window_less import DECIMALS, UNSUBTRACTED, Less, keep, minus, settled
from claros.store.base import Store

__all__ = ["Counters", "merge", "scan_counters", "window_bucket", "window_counters"]

T = TypeVar("T")


def merge(
    into: dict[str, Any],
    other: Mapping[str, Any],
    *,
    decimals: bool = False,
    only: frozenset[str] | None = None,
    gather: bool = False,
) -> None:
    """Add bucket ``other`` into ``into``: counts add, sums add exactly, samples gather
    (``trim`` keeps the latest by seq), guard lists unite, the waits' exact ms join by
    bin. ``only``: the top-level parts wanted (the others are left out). ``gather`` (a
    window's sum): the waits' ms are not joined but gathered as each bucket's part, a
    list, untouched until a median or the too-fast count splits its bin or two
    (``_answers``); ``other`` may be such a sum."""
    for key, value in other.items():
        if only is not None and key not in only:
            continue
        if key == "ov_ms":
            _merge_ms(into, value, gather)
        elif key == "ov_n":
            _add_bins(into.setdefault(key, {}), value)
        elif key == "seq_min":
            into[key] = min(into.get(key, value), value)
        elif key == "seq_max":
            into[key] = max(into.get(key, value), value)
        elif isinstance(value, dict):
            merge(into.setdefault(key, {}), value, decimals=decimals or key in DECIMALS)
        elif isinstance(value, list):
            if key == "guards":
                into[key] = sorted(set(into.get(key, [])) | set(value))
            else:
                into.setdefault(key, []).extend(value)
        elif decimals:
            into[key] = str(Decimal(into.get(key, "0")) + Decimal(str(value)))
        else:
            into[key] = into.get(key, 0) + value


def _add_bins(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """``ov_n`` (person -> decision -> bin -> answers) added, without merge's general
    checks: a window adds a few dozen bins per person and decision from each day."""
    for person, decisions in other.items():
        mine = into.setdefault(person, {})
        for decision, counts in decisions.items():
            kept = mine.get(decision)
            if kept is None:
                mine[decision] = dict(counts)  # a copy: what is kept stays as it was
                continue
            get = kept.get
            for b, n in counts.items():
                kept[b] = get(b, 0) + n


def _merge_ms(into: dict[str, Any], value: Any, gather: bool) -> None:
    if not gather:
        _join_ms(into.setdefault("ov_ms", {}), value)
        return
    gathered = into.setdefault("ov_ms", [])
    if isinstance(value, list):
        gathered.extend(value)  # another window's sum: its parts
    else:
        gathered.append(value)


def _join_ms(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """``ov_ms`` (person -> decision -> bin -> "ms,ms") of two buckets as one bucket's."""
    for person, decisions in other.items():
        mine = into.setdefault(person, {})
        for decision, texts in decisions.items():
            kept = mine.setdefault(decision, {})
            for b, text in texts.items():
                kept[b] = f"{kept[b]},{text}" if b in kept else text


def trim(bucket: dict[str, Any]) -> dict[str, Any]:
    """Each gathered list of samples cut to the latest few by seq, as one bucket keeps."""
    for key, value in bucket.items():
        if key.startswith("s_"):
            value.sort(key=lambda item: int(item["seq"]))
            del value[: -keep(key)]
    for node in (bucket.get("flagged") or {}).values():
        items = node.get("items") or []
        items.sort(key=lambda item: int(item["seq"]))
        del items[:-FLAGGED_ITEMS]
    return bucket


def _scan_into(bucket: dict[str, Any], store: Store, workspace: str, start: int, end: int) -> None:
    for entry, record in records_between(store, workspace, start, end):
        fold(bucket, entry.seq, entry.kind, record)


def _first_seq(store: Store, workspace: str) -> int:
    first = next(iter(store.entries(workspace, limit=1)), None)
    return first.seq if first is not None else 1


# The parts each reader needs (the rest of a bucket is not merged).
EVIDENCE_PARTS = frozenset(
    {"checks", "repeats", "severity", "amounts", "decisions", "authorities", "verdicts",
     "obo", "cov", "s_stops", "s_approvals", "s_near", "s_with_rules", "s_overrides",
     "ov_decided", "ov_through", "ov_wrong", "ov_missed", "ov_n", "ov_ms"}
)  # fmt: skip
HOME_PARTS = frozenset({"people", "people_near", "keys", "flagged", "checks", "severity",
                        "sev_amounts"})  # fmt: skip


def _range_sum(
    store: Store,
    workspace: str,
    span: str,
    first: int,
    last: int,
    only: frozenset[str] | None,
    pruned_through: int,
) -> tuple[dict[str, Any], list[tuple[int, int]]]:
    """The sum of the ``span`` buckets numbered [first, last) and the (from, until) ranges
    to read from the ledger instead (buckets holding entries a prune removed since)."""
    size = SPANS[span]
    total: dict[str, Any] = {}
    reads: list[tuple[int, int]] = []
    for n, bucket in store.aggregate_buckets(workspace, first, last, span=span):
        if pruned_through and int(bucket.get("seq_min", 0)) <= pruned_through:
            # Entries a prune removed are counted in it and gone from the ledger: what
            # is left of that hour or day is read again.
            reads.append((n * size, (n + 1) * size))
            continue
        merge(total, upgrade(bucket), only=only, gather=True)  # a row of before the bins too
    return _kept_waits(trim(total)), reads


MINUTE_MS = 60_000
BLOCK_MS = 5 * MINUTE_MS  # an edge hour's minutes are folded from a block's start
# What reading one aggregate row costs, in minutes of records read instead (at a million
# entries a row is ~12-17 KB, ~0.3 ms to parse and add; a minute holds ~6 records,
# ~0.2 ms): how a window's start edge picks the side it reads (``_Look.start_into``).
ROW_MINUTES = 2


def window_bucket(
    store: Store, workspace: str, start: int, end: int, *, only: frozenset[str] | None = None
) -> dict[str, Any]:
    """Everything the aggregates count over the entries stamped in [start, end) (``only``:
    those parts). The whole days in between are added up (their sum kept per ledger head,
    ``claros.evidence.span_cache``); the end edge, from the last midnight to ``end``, is
    its day's row when nothing of that day is stamped after ``end``; the start edge, up
    to the first midnight, is read whichever way reads less (``_Look.start_into``)."""
    total: dict[str, Any] = {}
    head = store.head(workspace)
    if head is None:
        return total
    # Read before any sum: the sums and the edges' minutes are kept per ledger head.
    look = _Look(store, workspace, only, _first_seq(store, workspace) - 1, head.seq)
    first_day, last_day = -(-start // DAY_MS), end // DAY_MS
    if first_day >= last_day:
        look.hours_into(total, start, end)
        return trim(total)
    look.span_into(total, "day", first_day, last_day)
    midnight = last_day * DAY_MS
    if midnight < end and not look.head_into(total, "day", midnight, end):
        look.hours_into(total, midnight, end)
    look.start_into(total, start, first_day * DAY_MS)  # last: it checks against the rest
    return trim(total)


def _stamped_in(store: Store, workspace: str, lo: int, hi: int, through: int) -> bool:
    """Whether an entry at a seq up to ``through`` is stamped in [lo, hi): the ledger's
    rows only, from ``CLOCK_SKEW_MS`` before ``lo`` (as ``records_between`` reads)."""
    since = first_seq_at(store, workspace, lo - CLOCK_SKEW_MS) - 1
    for entry in store.entries(workspace, since=since):
        if entry.seq > through or entry.ts >= hi + CLOCK_SKEW_MS:
            return False
        if lo <= entry.ts < hi:
            return True
    return False


def _minutes(store: Store, workspace: str, start: int, end: int) -> dict[int, dict[str, Any]]:
    """The bucket of each minute of [start, end) (whole minutes), folded from the ledger."""
    out: dict[int, dict[str, Any]] = {}
    for entry, record in records_between(store, workspace, start, end):
        fold(out.setdefault(entry.ts // MINUTE_MS, {}), entry.seq, entry.kind, record)
    return out


def _plan(start: int, day_end: int) -> tuple[bool, bool]:
    """How to read [start, day_end), a window's start edge: (its whole hours as the day's
    row less the hours before them, its partial hour as the hour's row less the minutes
    before ``start``), each side whichever reads fewer rows and minutes (of records, as
    ``read_into`` folds them: to or from a five-minute block's edge); ties read forward
    (the rows and the records of the edge itself, no subtraction)."""
    day, hour = day_end - DAY_MS, start // HOUR_MS * HOUR_MS
    partial = hour < start
    after = hour + HOUR_MS if partial else hour
    ahead = -(-start // BLOCK_MS) * BLOCK_MS  # the minutes before the start, folded to it
    minutes = {
        False: (after - max(hour, start // BLOCK_MS * BLOCK_MS)) / MINUTE_MS,
        True: (min(after, ahead) - hour) / MINUTE_MS,
    }
    options = []
    for whole_back in (False, True):
        for part_back in (False, True) if partial else (False,):
            cut = hour if part_back else after  # where the rows read forward begin
            rows = 1 + (cut - day) // HOUR_MS if whole_back else (day_end - cut) // HOUR_MS
            options.append((rows * ROW_MINUTES + minutes[part_back], whole_back, part_back))
    _, whole_back, part_back = min(options)
    return whole_back, part_back


class _Look:
    """One look at a window: the store, the parts wanted and what every kept sum is keyed
    on (the log's start, after a prune; the chain head read before anything else)."""

    __slots__ = ("head", "only", "pruned_through", "store", "workspace")

    def __init__(
        self,
        store: Store,
        workspace: str,
        only: frozenset[str] | None,
        pruned_through: int,
        head: int,
    ) -> None:
        self.store, self.workspace, self.only = store, workspace, only
        self.pruned_through, self.head = pruned_through, head

    def _cached(self, key: tuple[Any, ...], lo: int, hi: int, compute: Callable[[], T]) -> T:
        return cached(self.store, self.workspace, key, lo, hi, compute, head=self.head)

    def span_sum(self, span: str, first: int, last: int) -> tuple[dict[str, Any], list[Any]]:
        """The sum of the ``span`` rows numbered [first, last), kept per ledger head, and
        the (from, until) ranges to read from the ledger instead (rows holding entries a
        prune removed since). Not to be changed: merge it."""
        size = SPANS[span]
        return self._cached(
            ("window", span, first, last, self.only, self.pruned_through),
            first * size,
            last * size,
            functools.partial(
                _range_sum,
                self.store,
                self.workspace,
                span,
                first,
                last,
                self.only,
                self.pruned_through,
            ),
        )

    def span_into(self, total: dict[str, Any], span: str, first: int, last: int) -> None:
        if first >= last:
            return
        part, again = self.span_sum(span, first, last)
        merge(total, part, gather=True)  # copies: what is kept stays as it was
        for a, b in again:
            self.read_into(total, a, b)

    def hours_into(self, total: dict[str, Any], start: int, end: int) -> None:
        """[start, end) as its whole hours' rows and its partial hours read from the
        ledger (an end hour as its row when ``head_into`` may)."""
        first, last = -(-start // HOUR_MS), end // HOUR_MS
        if start >= end:
            return
        if first >= last:
            if start % HOUR_MS or not self.head_into(total, "hour", start, end):
                self.read_into(total, start, end)
            return
        self.span_into(total, "hour", first, last)
        self.read_into(total, start, first * HOUR_MS)
        if last * HOUR_MS < end and not self.head_into(total, "hour", last * HOUR_MS, end):
            self.read_into(total, last * HOUR_MS, end)

    def head_into(self, total: dict[str, Any], span: str, start: int, end: int) -> bool:
        """[start, end), the first part of an hour or a day (a window's end edge: the
        current hour or day up to now), from that hour's or day's aggregate when no
        entry in it is stamped at or after ``end``, as none is unless a writer's clock
        runs ahead: the row is then exactly that part, one row read instead of the rows
        and records of it (at a million entries the current hour holds hundreds of
        records, the current day up to 23 hour rows). False (nothing added): read it
        otherwise."""
        size = SPANS[span]
        n = start // size
        # Kept per ledger head, as the sums: no entry appended since is stamped in that
        # hour or day (in a busy workspace each append is, and it is read again), so the
        # row is the same and none of its entries is stamped after a later ``end``.
        row, checked = self._cached(
            ("head", span, n, self.pruned_through),
            n * size,
            (n + 1) * size,
            functools.partial(self._head, span, n, end),
        )
        if checked > end:  # kept for a later end: an entry may be stamped in between
            row, checked = self._head(span, n, end)
        if row is None:
            return False
        merge(total, row, only=self.only, gather=True)  # copies: what is kept stays so
        return True

    def _head(self, span: str, n: int, end: int) -> tuple[dict[str, Any] | None, int]:
        """Row ``n`` of ``span`` when it is exactly its entries stamped before ``end``
        (None: it is not, or there is none), and ``end``."""
        size = SPANS[span]
        rows = self.store.aggregate_buckets(self.workspace, n, n + 1, span=span)
        if not rows:
            return None, end  # no entry in it yet (the ledger's read finds none, or one since)
        bucket = upgrade(rows[0][1])
        if self.pruned_through and int(bucket.get("seq_min", 0)) <= self.pruned_through:
            return None, end  # it counts entries a prune removed since
        if _stamped_in(self.store, self.workspace, end, (n + 1) * size, int(bucket["seq_max"])):
            return None, end
        return bucket, end

    def start_into(self, total: dict[str, Any], start: int, day_end: int) -> None:
        """[start, day_end), a window's start edge up to the first midnight, into
        ``total``, which holds the rest of the window. Read forward (its hours' rows to
        midnight and its partial hour's records), or, when that reads less, as a row
        less what lies before (``claros.evidence.window_less``): the day's row less its
        hours before the start's, the start's hour's row less its minutes before the
        start's next minute, or both (what is left of that minute is read forward). The
        doubts a subtraction leaves are settled against the rest of the window; an
        unsettled one reads the edge forward."""
        if start >= day_end:
            return
        whole_back, part_back = _plan(start, day_end)
        only = self.only
        if (not whole_back and not part_back) or only is None or only & UNSUBTRACTED:
            self.hours_into(total, start, day_end)
            return
        hour = start // HOUR_MS * HOUR_MS
        after = hour + HOUR_MS if hour < start else hour
        # Read forward, a part of the rest: the partial hour, or what is left of the
        # start's minute (the minutes before it are subtracted).
        cut = -(-start // MINUTE_MS) * MINUTE_MS if part_back else after
        self.read_into(total, start, cut)
        # [cut, day_end) as a row less what lies before it, kept per ledger head (a
        # window's start moves on a minute at a time): what a look after the first adds.
        edge = self._cached(
            ("less", whole_back, cut, day_end, only, self.pruned_through),
            day_end - DAY_MS if whole_back else cut // HOUR_MS * HOUR_MS,
            day_end,
            functools.partial(self._less, cut, day_end, whole_back),
        )
        if edge is not None and settled(edge[1], total):
            merge(total, edge[0], gather=True)  # copies: what is kept stays as it was
            return
        self.span_into(total, "hour", after // HOUR_MS, day_end // HOUR_MS)
        self.read_into(total, cut, after)

    def _less(
        self, cut: int, day_end: int, whole_back: bool
    ) -> tuple[dict[str, Any], list[Any]] | None:
        """[cut, day_end) as a row less what lies before ``cut`` (a whole minute): the
        day's row less its hours and minutes before ``cut`` (``whole_back``), or the hour
        rows from ``cut``'s hour less its minutes before ``cut``; and the doubts left.
        None: a row counts entries a prune removed since, or it does not subtract.
        A window with a whole day in it starts a day or more before its end (now, for a
        page): no append is stamped in what lies before its start (writers' clocks are
        off by at most CLOCK_SKEW_MS), so the rows and the records, read a moment apart,
        hold the same entries."""
        day, hour = day_end - DAY_MS, cut // HOUR_MS * HOUR_MS
        if whole_back:
            row, again = self.span_sum("day", day // DAY_MS, day // DAY_MS + 1)
        else:
            row, again = self.span_sum("hour", hour // HOUR_MS, day_end // HOUR_MS)
        before: dict[str, Any] = {}
        if whole_back and hour > day:
            hours, more = self.span_sum("hour", day // HOUR_MS, hour // HOUR_MS)
            merge(before, hours, gather=True)
            again = again + more
        if again:
            return None
        if hour < cut:
            # The minutes before ``cut``, folded from the hour's start to the end of its
            # five-minute block (kept: the window's start, moving on, finds them).
            block_end = min(hour + HOUR_MS, -(-cut // BLOCK_MS) * BLOCK_MS)
            self.read_into(before, hour, cut, fold=(hour, block_end))
        return minus(row, before)

    def read_into(
        self,
        total: dict[str, Any],
        start: int,
        end: int,
        *,
        fold: tuple[int, int] | None = None,
    ) -> None:
        """The entries stamped in [start, end), read from the ledger, into ``total``.
        Inside one hour (a window's edge), its whole minutes come from minute buckets kept
        per ledger head (the minutes before ``end``'s, in the past), and only the minutes
        cut at either end are read each time: at a million entries an hour holds hundreds.

        The minutes are folded over ``fold``, by default from the start of ``start``'s
        five-minute block (not the hour's) to ``end``'s minute: a first look reads what
        the window needs and a few minutes more, and the window's start, moving on, finds
        them kept for five minutes. Their sum over the window's whole minutes is kept too:
        a minute bucket holds its samples, and adding up some fifty of them on every look
        was what grew with the ledger."""
        if start >= end:
            return
        store, workspace, only = self.store, self.workspace, self.only
        first, last = -(-start // MINUTE_MS), end // MINUTE_MS
        hour = start // HOUR_MS
        if first >= last or (end - 1) // HOUR_MS != hour:
            part: dict[str, Any] = {}
            _scan_into(part, store, workspace, start, end)
            merge(total, part, only=only, gather=True)
            return
        until = last * MINUTE_MS
        since, to = fold or (max(hour * HOUR_MS, (start // BLOCK_MS) * BLOCK_MS), until)

        def minutes() -> dict[int, dict[str, Any]]:
            return self._cached(
                ("minutes", since, to, self.pruned_through),
                since,
                to,
                functools.partial(_minutes, store, workspace, since, to),
            )

        def summed() -> dict[str, Any]:
            out: dict[str, Any] = {}
            kept = minutes()
            for minute in range(first, last):
                if minute in kept:
                    merge(out, kept[minute], only=only, gather=True)
            return _kept_waits(trim(out))

        whole = self._cached(
            ("minutes-sum", first, last, only, self.pruned_through),
            first * MINUTE_MS,
            until,
            summed,
        )
        merge(total, whole, gather=True)  # copies: what is kept stays as it was
        for a, b in ((start, first * MINUTE_MS), (until, end)):
            if a < b:
                part = {}
                _scan_into(part, store, workspace, a, b)
                merge(total, part, only=only, gather=True)


# A NamedTuple, not a dataclass: cheaper to define at cold start (claros.store.base).
class Counters(NamedTuple):
    """The counters the evidence reports read, filled for one window."""

    activity: ActivityCounter
    coverage: CoverageCounter
    oversight: OversightCounter
    bucket: Mapping[str, Any]  # the window's sum, for samples and Home


def _activity(b: Mapping[str, Any]) -> ActivityCounter:
    counter = ActivityCounter()
    counter.checks = Counter(b.get("checks") or {})
    counter.repeats = int(b.get("repeats", 0))
    counter.severity = Counter(b.get("severity") or {})
    counter.amounts = {c: Decimal(v) for c, v in (b.get("amounts") or {}).items()}
    # The latest near-misses are the monthly report's (it reads its month); not kept here.
    counter.near = deque(maxlen=counter.near.maxlen)
    counter.decisions = Counter(b.get("decisions") or {})
    counter.authorities = Counter(b.get("authorities") or {})
    counter.verdicts = Counter(b.get("verdicts") or {})
    return counter


def _coverage(b: Mapping[str, Any]) -> CoverageCounter:
    counter = CoverageCounter()
    for name, slot in (b.get("cov") or {}).items():
        counter._agents[name] = {  # noqa: SLF001 - filled from the aggregate, read as usual
            "agent": name,
            "checked": int(slot.get("checked", 0)),
            "unchecked": int(slot.get("unchecked", 0)),
            "outcomes": int(slot.get("outcomes", 0)),
            "ran_after_stop": int(slot.get("ran_after_stop", 0)),
            "guards": set(slot.get("guards") or []),
        }
    return counter


def _oversight(
    b: Mapping[str, Any], versions: Versions, start: int, end: int, fast_seconds: int
) -> OversightCounter:
    counter = OversightCounter(versions, start=start, end=end, fast_seconds=fast_seconds)
    for key, n in (b.get("ov_decided") or {}).items():
        result, sig = jsonutil.loads(key)
        refs = [{**ref, "matched": True} for ref in jsonutil.loads(sig)]
        for owner in counter._owners(refs, result):  # noqa: SLF001
            counter.stops_and_asks[owner] += n
    for key, n in (b.get("ov_through") or {}).items():
        app, tool = jsonutil.loads(key)
        counter.through[(app, tool)] += n
    for key, n in (b.get("ov_wrong") or {}).items():
        result, sig = jsonutil.loads(key)
        refs = [{**ref, "matched": True} for ref in jsonutil.loads(sig)]
        for owner in counter._owners(refs, result):  # noqa: SLF001
            counter.wrong_stops[owner] += n
    for rule_id, n in (b.get("ov_missed") or {}).items():
        for owner in counter.owners_of.get(rule_id, ()):
            counter.missed[owner] += n
    _answers(counter, b.get("ov_n") or {}, b.get("ov_ms") or [])
    return counter


def _answers(counter: OversightCounter, bins: Mapping[str, Any], texts: Any) -> None:
    """OversightCounter._answer, for every (person, decision, ms waited): the counts from
    the waits counted by bin, the too-fast count and the median from the exact ms of the
    bin or two holding the threshold or the rank (``counter.medians``); no other wait is
    split from its text. ``texts``: the window's ``ov_ms`` as ``merge(gather=True)``
    gives it (or one bucket's)."""
    parts: list[Mapping[str, Any]] = [texts] if isinstance(texts, Mapping) else list(texts)
    fast_ms = counter.fast_ms
    fast_bin = wait_bin(fast_ms)
    for person, decisions in bins.items():
        by_bin: Counter[int] = Counter()
        for decision, counts in decisions.items():
            for b, n in counts.items():
                by_bin[int(b)] += n
                if decision != "approve":
                    continue
                counter.approvals[person] += n
                if int(b) < fast_bin:
                    counter.too_fast[person] += n
        if "approve" in decisions and str(fast_bin) in decisions["approve"]:
            below = _waits(parts, person, fast_bin, ("approve",))
            counter.too_fast[person] += bisect.bisect_left(below, fast_ms)
        n = sum(by_bin.values())
        if not n:
            continue
        if n % 2:
            middle = _at_rank(parts, person, by_bin, n // 2) / 1000
        else:
            low, high = (_at_rank(parts, person, by_bin, r) for r in (n // 2 - 1, n // 2))
            middle = (low / 1000 + high / 1000) / 2
        counter.medians[person] = (middle, n)


class KeptWaits:
    """The answer times of a kept sum (``claros.evidence.span_cache``): each bucket's
    ``ov_ms`` as read, and the bins a look split of them, sorted, kept with it: the next
    look finds its median's bin split already and adds the edges' few."""

    __slots__ = ("_split", "parts")

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts
        self._split: dict[tuple[str, int, tuple[str, ...] | None], list[int]] = {}

    def split(self, person: str, b: int, decisions: tuple[str, ...] | None) -> list[int]:
        key = (person, b, decisions)
        got = self._split.get(key)
        if got is None:  # two threads may both split it: the same list, either kept
            got = self._split[key] = _waits(self.parts, person, b, decisions)
        return got

    def __eq__(self, other: object) -> bool:  # the tests compare a kept sum with a fresh one
        return isinstance(other, KeptWaits) and self.parts == other.parts

    __hash__ = None  # type: ignore[assignment]


def _kept_waits(bucket: dict[str, Any]) -> dict[str, Any]:
    """A sum about to be kept, its gathered answer times held as one ``KeptWaits``."""
    if bucket.get("ov_ms"):
        bucket["ov_ms"] = [KeptWaits(bucket["ov_ms"])]
    return bucket


def _waits(
    parts: list[Any], person: str, b: int, decisions: tuple[str, ...] | None = None
) -> list[int]:
    """The exact waits (ms) of ``person``'s answers in bin ``b`` (of ``decisions``, or
    all), sorted, from each bucket's ``ov_ms`` gathered (a kept sum's split once), less
    those of the parts to take away (``Less``: a row's answers before a window's start)."""
    out: list[int] = []
    less: list[int] = []
    key = str(b)
    for part in parts:
        if isinstance(part, KeptWaits):
            out.extend(part.split(person, b, decisions))
            continue
        if isinstance(part, Less):
            less.extend(_waits(part.parts, person, b, decisions))
            continue
        for decision, by_bin in (part.get(person) or {}).items():
            if decisions is not None and decision not in decisions:
                continue
            text = by_bin.get(key)
            if text:
                out.extend(_ints(text))
    out.sort()  # sorted runs and a few more: one pass finds and merges them
    for ms in less:  # each once (the row holds every one of them, ``minus``): a few
        at = bisect.bisect_left(out, ms)
        if at < len(out) and out[at] == ms:
            del out[at]
    return out


def _ints(text: str) -> list[int]:
    """The waits of one bin's text, "4000,4210,..." (``claros.aggregates.add_wait`` writes
    each as ``str(int)``), read as a JSON array by orjson: a busy bin of a 90-day window
    holds thousands, ~10x faster than ``int()`` on each. orjson reads an integer beyond
    64 bits as a float, the largest or smallest of them: such a text is read by
    ``int()``, as is one orjson refuses."""
    try:
        got: list[int] = orjson.loads(f"[{text}]")
    except orjson.JSONDecodeError:
        got = []
    if not got or type(max(got)) is not int or type(min(got)) is not int:
        return list(map(int, text.split(",")))
    return got


def _at_rank(
    parts: list[Mapping[str, Any]], person: str, by_bin: Mapping[int, int], rank: int
) -> int:
    """The wait at ``rank`` (0 first) of all of ``person``'s answers, in ms."""
    below = 0
    for b in sorted(by_bin):
        n = by_bin[b]
        if rank < below + n:
            return _waits(parts, person, b)[rank - below]
        below += n
    raise ValueError(f"no answer at rank {rank}")  # the counts say there is


def window_counters(
    store: Store, workspace: str, versions: Versions, *, start: int, end: int, fast_seconds: int
) -> Counters:
    """The counters over the entries stamped in [start, end), from the aggregates."""
    b = window_bucket(store, workspace, start, end, only=EVIDENCE_PARTS)
    return Counters(
        _activity(b), _coverage(b), _oversight(b, versions, start, end, fast_seconds), b
    )


def scan_counters(
    store: Store, workspace: str, versions: Versions, *, start: int, end: int, fast_seconds: int
) -> Counters:
    """The same counters fed every record of the window (the reference the tests compare
    the aggregates with; no page calls it)."""
    activity, coverage = ActivityCounter(), CoverageCounter()
    oversight = OversightCounter(versions, start=start, end=end, fast_seconds=fast_seconds)
    bucket: dict[str, Any] = {}
    for entry, rec in records_between(store, workspace, start, end):
        activity.add(entry.seq, entry.kind, rec)
        coverage.add(entry.kind, rec)
        oversight.add(entry.kind, rec)
        fold(bucket, entry.seq, entry.kind, rec)
    return Counters(activity, coverage, oversight, trim(bucket))
