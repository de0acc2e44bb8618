"""The decision: which rules apply to a call, which match, and what Claros answers.

Pure: rule states and facts in, a Decision out. The strongest response among the matching
enforced rules wins (stop > ask > nudge > allow). A ``when`` that cannot be decided (a fact
it needs is missing, null or of the wrong type, or a division by zero) answers by the rule's
``on_unknown``: ``fire`` (the default: the rule's own response), ``ask`` or ``allow``; its
entry in ``rules[]`` names the ``unknown`` fields and the ``on_unknown`` that answered
(and ``answered: "ask"`` when that is not the rule's response), except a ``when`` left
unknown by a word spelled like the one it is compared with but not as it
(claros.rules.expr.folded): that rule holds, whatever its ``on_unknown``. Shadow rules are
evaluated and recorded with what they would have answered, but never change the result.
Rules without ``when`` go to the judge (:mod:`claros.rules.judge`), with the call's
context; its verdict, note and model land in the rule's entry. With no judge, or when it
gives no verdict (a timeout, an answer it could not read), the rule is listed as not
judged and answers by its ``on_unknown``, like a ``when`` that cannot be decided.

The judged rules of one check are judged together (at most ``JUDGE_PARALLEL`` at once, on
the check's own threads), within one budget for the whole check (``JUDGE_BUDGET_S``, under
the guard's 10 s wait for a check): a rule the judge has not answered by then is not
judged, and so is one whose judge raised. One after another, each bounded only by its own
timeout, three judged rules kept a check past the guard's timeout, which blocked the write
as an outage, or forwarded it unchecked with ``--fail-open``
(tests/security/test_slow_judge_outlasts_the_guard.py). A call that cannot be put to the
judge because of the call itself (:class:`~claros.rules.judge.UnjudgeableCallError`) is
held to the rule: it never answers by ``on_unknown: allow`` (it fires instead).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from claros.rules.expr import Scope, parse_when
from claros.rules.judge import Judge, UnjudgeableCallError, Verdict
from claros.rules.ruleset import RuleSet
from claros.rules.terms import RESPONSES, strength

if TYPE_CHECKING:
    from claros.rules.ruleset import Step

__all__ = ["JUDGE_BUDGET_S", "JUDGE_PARALLEL", "Decision", "RuleSet", "applies", "decide"]

log = logging.getLogger("claros.judge")

# All the judge calls of one check together, in seconds (docs/rules.md, "The judge"): the
# guard waits 10 s for a check (claros_guard.api.DEFAULT_TIMEOUT), and the check has reads
# and its ledger write to do besides.
JUDGE_BUDGET_S = 6.0
# Judge calls of one check running at once (each check has its own threads).
JUDGE_PARALLEL = 16
# A judged rule's verdict, or None and why not, and whether the rule is held to its response
# (the call itself could not be put to the judge: claros.rules.judge.UnjudgeableCallError).
_Judged = tuple[Verdict | None, str, bool]


def applies(rule: Mapping[str, Any], app: str, tool: str) -> bool:
    written = rule["rule"]
    return bool(written["app"] == app and tool in written["tools"])


class Decision:
    """What the rules decided for a call. A plain class, not a dataclass: the check
    function defines it at its cold start (~1 ms of CPU as a dataclass)."""

    def __init__(self) -> None:
        self.result = "allow"
        # One entry per rule that applies to the call's app and tool, in id order.
        self.rules: list[dict[str, Any]] = []
        # The enforced rules that matched with the winning response (they speak for it): a
        # rule whose `when` was unknown speaks with what its on_unknown answered.
        self.deciding: list[Mapping[str, Any]] = []
        self.shadow_result: str | None = None
        self.not_judged: list[str] = []

    def __repr__(self) -> str:
        return f"Decision(result={self.result!r}, rules={self.rules!r})"

    @property
    def allowed(self) -> bool:
        return self.result in ("allow", "nudge")

    def messages(self) -> list[dict[str, str]]:
        return [
            {
                "rule_id": str(r["id"]),
                "message": str(r["rule"].get("message") or r["rule"]["title"]),
            }
            for r in self.deciding
        ]


_PLANS = 64  # call shapes kept per rule set (a workspace's apps and tools)


def _plan(rules: Sequence[Mapping[str, Any]], app: str, tool: str) -> tuple[Step, ...]:
    plans = rules.plans if type(rules) is RuleSet else None
    if plans is not None:
        found = plans.get((app, tool))
        if found is not None:
            return found
    steps = []
    for rule in _applying(rules, app, tool):
        written = rule["rule"]
        response = written["response"]
        mode = written.get("mode", "enforce")
        when = written.get("when")
        fixed = {
            "id": rule["id"], "version": rule["version"], "hash": rule["hash"],
            "confirm": rule["confirm"], "response": response, "mode": mode,
        }  # fmt: skip
        steps.append((rule, written, response, mode, parse_when(when) if when else None, fixed))
    plan = tuple(steps)
    if plans is not None:
        if len(plans) >= _PLANS:
            plans.clear()
        plans[(app, tool)] = plan  # two threads may both build it: the same plan, either kept
    return plan


def decide(
    rules: Sequence[Mapping[str, Any]],
    app: str,
    tool: str,
    facts: Mapping[str, Any],
    *,
    context: Mapping[str, Any] | None = None,
    judge: Judge | None = None,
    arguments: Mapping[str, Any] | None = None,
) -> Decision:
    decision = Decision()
    entries = decision.rules
    best = 0
    shadow_best = -1
    matched_enforced: list[tuple[Mapping[str, Any], int]] = []
    scope = Scope(facts)
    matches = scope.matches
    steps = _plan(rules, app, tool)
    verdicts: dict[int, _Judged] = {}
    if judge is not None:
        judged = {i: step[1] for i, step in enumerate(steps) if step[4] is None}
        if judged:
            verdicts = _judge_all(judge, judged, facts, context or {}, arguments)
    for i, (rule, written, response, mode, when, fixed) in enumerate(steps):
        entry = dict(fixed)  # a check's own entry: the fixed part is shared, never changed
        if when is not None:
            hit, unknown = matches(when)
            if hit is None:
                if scope.spelled:
                    hit, response = _spelled(entry, written, unknown, scope.numeral)
                else:
                    hit, response = _on_unknown(entry, written, unknown)
            entry["matched"] = hit
        else:
            judged_as = verdicts.get(i, (None, "no judge is configured", False))
            hit, response = _judged_entry(entry, written, judged_as)
            if not entry["judged"]:
                decision.not_judged.append(str(rule["id"]))
        entries.append(entry)
        if not hit:
            continue
        level = strength(response)
        if mode == "shadow":
            shadow_best = max(shadow_best, level)
            continue
        matched_enforced.append((rule, level))
        best = max(best, level)
    decision.result = RESPONSES[best]
    if shadow_best >= 0:
        decision.shadow_result = RESPONSES[shadow_best]
    if best:
        decision.deciding = [r for r, level in matched_enforced if level == best]
    return decision


def _judge_one(
    judge: Judge,
    written: Mapping[str, Any],
    facts: Mapping[str, Any],
    context: Mapping[str, Any],
    arguments: Mapping[str, Any] | None,
) -> _Judged:
    try:
        verdict = judge.judge(written, facts, context, arguments=arguments)
    except UnjudgeableCallError as exc:
        return None, f"the call cannot be put to the judge ({exc}), so the rule holds", True
    except Exception as exc:  # a judge that breaks decides nothing; the rule fails closed
        log.exception("rule %s not judged: the judge raised", written.get("id"))
        return None, f"the judge failed ({type(exc).__name__})", False
    if verdict is None:
        return None, "the judge gave no verdict", False
    return verdict, "", False


def _judge_all(
    judge: Judge,
    judged: Mapping[int, Mapping[str, Any]],
    facts: Mapping[str, Any],
    context: Mapping[str, Any],
    arguments: Mapping[str, Any] | None,
) -> dict[int, _Judged]:
    """Each judged rule's verdict (by its place in the plan), or why there is none:
    judged together, within ``JUDGE_BUDGET_S`` for them all, on threads of this check's own
    (never a pool other checks share: another agent's slow calls would leave this check's
    rules unstarted, and so unjudged, for its whole budget)."""
    from concurrent.futures import ThreadPoolExecutor, wait

    budget = JUDGE_BUDGET_S
    pool = ThreadPoolExecutor(min(JUDGE_PARALLEL, len(judged)), thread_name_prefix="claros-judge")
    try:
        futures = {
            i: pool.submit(_judge_one, judge, w, facts, context, arguments)
            for i, w in judged.items()
        }
        wait(futures.values(), timeout=budget)
    finally:
        # Calls still running end on their own timeouts; their answers are not waited for.
        pool.shutdown(wait=False, cancel_futures=True)
    out: dict[int, _Judged] = {}
    for key, future in futures.items():
        if future.done() and not future.cancelled():
            out[key] = future.result()
        else:
            out[key] = (None, f"the judge gave no verdict within {budget:g} s", False)
    return out


def _judged_entry(
    entry: dict[str, Any], written: Mapping[str, Any], judged_as: _Judged
) -> tuple[bool, str]:
    """A judged rule's entry, from its verdict or why it has none; returns (matched,
    response). Unknown never silently means allow: a rule not judged answers by its
    on_unknown, as a `when` that cannot be decided does, but a call the judge cannot be
    asked about (the agent's doing) is held to the rule, whatever its on_unknown."""
    verdict, why, held = judged_as
    if verdict is not None:
        entry.update(judged=True, note=verdict.note, matched=verdict.matched)
        if verdict.model:
            entry["judge"] = verdict.model
        return verdict.matched, str(written["response"])
    entry.update(judged=False, note=f"not judged: {why}")
    if held and written.get("on_unknown") == "allow":
        # on_unknown: allow is for a judge that cannot answer; a call the agent made
        # unjudgeable fires the rule (ask, the other on_unknown, already sends it to a
        # person).
        entry.update(unknown=[], on_unknown="fire", matched=True)
        return True, str(written["response"])
    hit, response = _on_unknown(entry, written, ())
    entry["matched"] = hit
    return hit, response


def _spelled(
    entry: dict[str, Any], written: Mapping[str, Any], unknown: tuple[str, ...], numeral: bool
) -> tuple[bool, str]:
    """A ``when`` left unknown by a word that differs from the one it is compared with only
    in spelling (``"acme"``, ``"ACME "``, ``"ＡＣＭＥ"`` against ``"ACME"``:
    claros.rules.expr.folded): the rule holds, with its own response, whatever its
    ``on_unknown``. The agent wrote the spelling; an app may well read it as the word the
    rule names (a deny list), or as another (an allow list), and either way ``on_unknown:
    allow`` or ``ask`` would answer less than the rule says. So with a number the agent wrote
    in a way the one parser does not read (``numeral``: ``"400."``, ``"4_00"``, ``"inf"``),
    which an app's lenient reader takes for a number."""
    fields = ", ".join(unknown) or "a value"
    note = (
        f"not decided: {fields} is written as a number Claros does not read (such as 400., "
        "4_00, 1,000 or inf), which the app may read as one, so the rule holds"
        if numeral
        else f"not decided: {fields} is spelled like a word the rule compares it with, but "
        "not as it (case, spaces, accents, width or invisible characters), so the rule holds"
    )
    entry.update(unknown=list(unknown), on_unknown="fire", matched=True, note=note)
    return True, str(written["response"])


def _on_unknown(
    entry: dict[str, Any], written: Mapping[str, Any], unknown: tuple[str, ...]
) -> tuple[bool, str]:
    """A ``when`` that could not be decided answers by the rule's ``on_unknown``: fire (the
    rule's own response, the default), ask, or allow. Never silently allow: the row says
    which fields were unknown and what on_unknown did. Returns (matched, response)."""
    on_unknown = str(written.get("on_unknown") or "fire")
    entry["unknown"] = list(unknown)
    entry["on_unknown"] = on_unknown
    if on_unknown == "allow":
        return False, str(written["response"])
    if on_unknown == "ask":
        entry["answered"] = "ask"
        return True, "ask"
    return True, str(written["response"])


_ID = operator.itemgetter("id")


def _applying(rules: Sequence[Mapping[str, Any]], app: str, tool: str) -> list[Mapping[str, Any]]:
    """The rules that apply to the call (:func:`applies`), in order of ``str(id)``."""
    found = [r for r in rules if (w := r["rule"])["app"] == app and tool in w["tools"]]
    if set(map(type, map(_ID, found))) <= {str}:
        found.sort(key=_ID)  # the same order as str(id), without a call per rule
    else:
        found.sort(key=lambda r: str(r["id"]))
    return found
