"""Hourly aggregates of the ledger, kept with each append (issue 13: pages that stay fast).

Every append folds its records into the aggregate of the hour its entry is stamped in
(``entry.ts // HOUR_MS``), in the same transaction as the entries (both stores call
``fold`` inside ``append_many``). Evidence and Home then add up the hours of a window
(``claros.evidence.windowed``) instead of reading every record of it, and read records only
for the two partial hours at the window's edges, so a page costs the same at 10k entries
as at 1M.

A bucket is plain JSON (counts, exact decimal sums, the last few samples), so it merges by
adding: whatever the counters of ``claros.evidence`` (activity, samples, coverage,
oversight) would count over a window is the sum of its hours. Only what those counters read
is kept; anything they derive from rule versions (who owns the rule that decided a check)
is worked out when the window is read, from the check's rule references kept here as
they were written.

The record folded is the one the ledger keeps, read back from its canonical JSON, so the
aggregate sees exactly the values a scan of the ledger would.

A sample that copies a check's rule references (``s_with_rules``: the latest checks with
rules, ``s_stops``: the latest stops) is kept as a reference to its record, ``{"seq": n}``,
and built from the record when a reader needs it (``sample_of``; claros.evidence.aiuc1).
Copied, those references were nearly all of a busy hour's bucket (~14 KB with 20 rules, in
its hour's and its day's row, rewritten on every append); the record they come from is in
the ledger already and never changes, so building the sample from it when read gives
exactly what the copy held. Rows written before keep full samples; ``upgrade`` turns them
into references as they are read or appended to.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from claros.check_rows import approved_repeat

__all__ = [
    "DAY_MS", "FLAGGED_ITEMS", "HOUR_MS", "RECORD_SAMPLES", "SAMPLES", "SPANS", "add_wait",
    "fold", "is_reference", "sample_of", "upgrade", "wait_bin",
]  # fmt: skip

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
# Each record is folded into its hour's and its day's (UTC) aggregate: a window adds up its
# whole days, then the whole hours at its edges, then reads the minutes left over.
SPANS = {"hour": HOUR_MS, "day": DAY_MS}
# How many of the latest items a bucket keeps of each sort (what the readers show at most).
SAMPLES = 3  # claros.evidence.aiuc1.SAMPLES
FLAGGED_ITEMS = 5  # Home: what each agent was stopped, asked or nudged on

_APPROVAL = ("ask_id", "check_id", "decision", "authority", "decided_by", "opened_at",
             "decided_at")  # fmt: skip
_OVERRIDE = ("override_id", "check_id", "verdict", "rule_id", "by", "at")
_FLAGGED = ("stop", "ask", "nudge")
# The samples a bucket keeps as references to their check's record ({"seq": n}).
RECORD_SAMPLES = ("s_stops", "s_with_rules")


def _inc(node: dict[str, Any], key: str, n: int = 1) -> None:
    node[key] = node.get(key, 0) + n


def _sub(node: dict[str, Any], key: str) -> dict[str, Any]:
    child = node.get(key)
    if child is None:
        child = node[key] = {}
    return child


def _tail(node: dict[str, Any], key: str, item: Any, keep: int) -> None:
    items = node.setdefault(key, [])
    items.append(item)
    del items[:-keep]


def _add_guard(node: dict[str, Any], guard: Any) -> None:
    if guard:
        guards = node.setdefault("guards", [])
        if str(guard) not in guards:
            guards.append(str(guard))
            guards.sort()


def _decimal_add(node: dict[str, Any], key: str, amount: Any) -> None:
    """An exact decimal sum (as ActivityCounter adds: amounts that are no number skipped)."""
    try:
        value = Decimal(str(amount))
        total = Decimal(node.get(key, "0")) + value
    except ArithmeticError:
        return
    node[key] = str(total)


def refs_signature(refs: Any) -> str:
    """What ``claros.evidence.activity.deciding_rules`` reads of a check's rule references:
    the matched ones, with the keys it looks at as written (a key absent stays absent)."""
    out = []
    for ref in refs or ():
        if not isinstance(ref, Mapping) or ref.get("matched") is not True:
            continue
        out.append(
            {k: ref[k] for k in ("id", "version", "answered", "response", "mode") if k in ref}
        )
    return json.dumps(out, sort_keys=True, default=str)


def fold(bucket: dict[str, Any], seq: int, kind: str, rec: Mapping[str, Any]) -> None:
    """Count one record (as the ledger keeps it) into its hour's bucket."""
    upgrade(bucket)  # a row written before the waits were kept by bin, or samples by seq
    bucket["seq_min"] = min(int(bucket.get("seq_min", seq)), seq)
    bucket["seq_max"] = max(int(bucket.get("seq_max", seq)), seq)
    _inc(bucket, "entries")
    if kind == "check":
        _check(bucket, seq, rec)
    elif kind == "unchecked":
        agent = rec.get("agent") or {}
        name = str(agent.get("name", "unknown"))
        slot = _sub(_sub(bucket, "cov"), name)
        _inc(slot, "unchecked")
        _add_guard(slot, (agent.get("via") or {}).get("guard"))
        # Home: the person is the key's owner, looked up when read (a few keys).
        mine = _sub(
            _sub(_sub(bucket, "keys"), str(rec.get("key_id"))), str(agent.get("name") or "unknown")
        )
        _inc(mine, "unchecked")
        _add_guard(mine, (agent.get("via") or {}).get("guard"))
    elif kind == "outcome":
        slot = _sub(_sub(bucket, "cov"), str(rec.get("agent") or "unknown"))
        _inc(slot, "outcomes")
        stop = rec.get("check_result") == "stop"
        if stop:
            _inc(slot, "ran_after_stop")
        mine = _sub(
            _sub(_sub(bucket, "keys"), str(rec.get("key_id"))), str(rec.get("agent") or "unknown")
        )
        _inc(mine, "outcomes")
        if stop:
            _inc(mine, "ran_after_stop")
    elif kind == "approval":
        _inc(_sub(bucket, "decisions"), str(rec.get("decision")))
        _inc(_sub(bucket, "authorities"), str(rec.get("authority")))
        _tail(bucket, "s_approvals", {"seq": seq, **{k: rec.get(k) for k in _APPROVAL}}, SAMPLES)
        _answer(bucket, rec)
    elif kind == "override":
        verdict = rec.get("verdict")
        _inc(_sub(bucket, "verdicts"), str(verdict))
        _tail(bucket, "s_overrides", {"seq": seq, **{k: rec.get(k) for k in _OVERRIDE}}, SAMPLES)
        if verdict == "wrong_stop":
            key = json.dumps([rec.get("check_result"), refs_signature(rec.get("check_rules"))])
            _inc(_sub(bucket, "ov_wrong"), key)
        elif verdict == "missed":
            _inc(_sub(bucket, "ov_missed"), str(rec.get("rule_id")))


def _answer(bucket: dict[str, Any], rec: Mapping[str, Any]) -> None:
    """OversightCounter._answer's inputs: who decided, how, after how many ms."""
    person = rec.get("decided_by")
    if not person or rec.get("decision") not in ("approve", "deny"):
        return
    try:
        waited = int(rec["decided_at"]) - int(rec["opened_at"])
    except (KeyError, TypeError, ValueError):
        return
    add_wait(bucket, str(person), str(rec["decision"]), waited)


def wait_bin(ms: int) -> int:
    """The bin of a wait (ms): two per power of two (negative waits, a clock behind, all
    in -1; 0 to 3 ms each their own). Bins rise with the wait, so a rank or a threshold
    falls in one bin, and a busy quarter's waits fall in a few dozen bins however many
    there are."""
    if ms < 4:
        return max(ms, -1)
    n = ms.bit_length()
    return 2 * n + ((ms >> (n - 2)) & 1)


def add_wait(bucket: dict[str, Any], person: str, decision: str, waited: int) -> None:
    """One answer's wait (ms) into the bucket's two parts: its count under its bin
    (``ov_n``: what the approvals, the too-fast count and the median's rank need, bounded
    by the bins, however many answers) and the exact ms under that bin (``ov_ms``: text,
    which JSON reads as one string; a window splits only the bin or two holding its median
    or the too-fast threshold, so they stay exact). Every wait is kept: nothing rounded."""
    b = str(wait_bin(waited))
    _inc(_sub(_sub(bucket, "ov_n"), person).setdefault(decision, {}), b)
    ms = _sub(_sub(bucket, "ov_ms"), person).setdefault(decision, {})
    ms[b] = f"{ms[b]},{waited}" if b in ms else str(waited)


def upgrade(bucket: dict[str, Any]) -> dict[str, Any]:
    """A bucket written before the waits were kept by bin (``ov_waits``: every wait in a
    list), in today's form: the same waits, so every count and the median are as before;
    and one written before the record samples were kept by seq: each such sample as its
    reference (the reader builds it again from the record, as it was built then).
    Readers call it on every bucket read; an append into such a bucket converts it."""
    old = bucket.pop("ov_waits", None)
    for person, decisions in (old or {}).items():
        for decision, waits in decisions.items():
            for waited in waits:
                add_wait(bucket, str(person), str(decision), int(waited))
    for key in RECORD_SAMPLES:
        for item in bucket.get(key) or ():
            if len(item) != 1:  # not a reference (is_reference): a full sample of before
                bucket[key] = [{"seq": int(item["seq"])} for item in bucket[key]]
                break
    return bucket


def is_reference(sample: Mapping[str, Any]) -> bool:
    """Whether a sample of ``RECORD_SAMPLES`` is its record's reference (``{"seq": n}``)."""
    return len(sample) == 1


def sample_of(key: str, seq: int, rec: Mapping[str, Any]) -> dict[str, Any]:
    """The sample ``key`` (one of ``RECORD_SAMPLES``) of the check record ``rec`` at
    ``seq``, as a bucket kept it before it kept references (and a scan builds it)."""
    sample = _brief(seq, rec)
    if key == "s_stops":
        sample["rules"] = rec.get("rules")
    else:
        sample["rules"] = [
            {k: r.get(k) for k in ("id", "version", "hash", "confirm", "matched")}
            for r in rec.get("rules") or ()
        ]
    return sample


def _brief(seq: int, rec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "seq": seq,
        **{k: rec.get(k) for k in ("check_id", "ts", "app", "tool", "result")},
        "agent": rec.get("agent"),
        "on_behalf_of": rec.get("on_behalf_of"),
    }


def _check(bucket: dict[str, Any], seq: int, rec: Mapping[str, Any]) -> None:
    agent: Mapping[str, Any] = rec.get("agent") or {}
    guard = (agent.get("via") or {}).get("guard")
    cov = _sub(_sub(bucket, "cov"), str(agent.get("name", "unknown")))
    person = rec.get("on_behalf_of")
    home_name = str(agent.get("name") or "unknown")
    people = _sub(_sub(bucket, "people"), str(person) if person else "")
    mine = _sub(people, home_name)
    _add_guard(cov, guard)
    _add_guard(mine, guard)
    if approved_repeat(rec):
        _inc(bucket, "repeats")
        return
    _inc(cov, "checked")
    result = str(rec.get("result"))
    _inc(_sub(bucket, "checks"), result)
    _inc(_sub(mine, "counts"), result)
    _inc(_sub(bucket, "obo"), str(rec.get("obo_source") or "none"))
    if result == "stop":
        _tail(bucket, "s_stops", {"seq": seq}, SAMPLES)  # sample_of builds it when read
    severity = rec.get("severity")
    if severity:
        _near(bucket, seq, rec, _brief(seq, rec))
        _near_of(_sub(_sub(bucket, "people_near"), str(person) if person else ""), rec)
    if rec.get("rules"):
        _tail(bucket, "s_with_rules", {"seq": seq}, SAMPLES)  # as s_stops
    if result in ("stop", "ask"):
        _inc(_sub(bucket, "ov_decided"), json.dumps([result, refs_signature(rec.get("rules"))]))
    elif result in ("allow", "nudge"):
        _inc(_sub(bucket, "ov_through"), _through_key(str(rec.get("app")), str(rec.get("tool"))))
    if result in _FLAGGED:
        item = {
            "seq": seq,
            **{k: rec.get(k) for k in ("check_id", "ts", "app", "tool", "result", "severity")},
            "amount": str(rec["amount"]) if rec.get("amount") is not None else None,
            "currency": rec.get("currency"),
            "rules": [str(r.get("id")) for r in rec.get("rules") or [] if r.get("matched")],
        }
        # A member's flagged checks come from their timeline; the workspace's from here.
        _tail(_sub(_sub(bucket, "flagged"), home_name), "items", item, FLAGGED_ITEMS)
    _inc(_sub(_sub(bucket, "agents"), home_name), result)


@functools.lru_cache(maxsize=1024)
def _through_key(app: str, tool: str) -> str:
    """``ov_through``'s key of an app and tool (written once per pair, not per check)."""
    return json.dumps([app, tool])


def _near(
    bucket: dict[str, Any], seq: int, rec: Mapping[str, Any], brief: Mapping[str, Any]
) -> None:
    severity = str(rec["severity"])
    _inc(_sub(bucket, "severity"), severity)
    amount = rec.get("amount")
    currency = str(rec.get("currency") or "unknown")
    if amount is not None:
        _decimal_add(_sub(bucket, "amounts"), currency, amount)
        _decimal_add(_sub(_sub(bucket, "sev_amounts"), severity), currency, amount)
    near = {k: rec.get(k) for k in ("severity", "amount", "currency")}
    _tail(bucket, "s_near", {**brief, **near}, SAMPLES)


def _near_of(node: dict[str, Any], rec: Mapping[str, Any]) -> None:
    """Near-misses by severity, with amounts by currency, of one person's agents (Home)."""
    severity = str(rec["severity"])
    _inc(_sub(node, "severity"), severity)
    if rec.get("amount") is not None:
        currency = str(rec.get("currency") or "unknown")
        _decimal_add(_sub(_sub(node, "sev_amounts"), severity), currency, rec["amount"])


if __name__ == "__main__":  # python -m claros.aggregates rebuild --workspace WS
    from claros.rebuild import main

    raise SystemExit(main())
