"""The judge: what decides rules written without ``when``.

A rule without ``when`` ("is this refund reasonable for this customer?") cannot be
decided by the expression language; it goes to a judge, which sees the rule, the call's
facts (and, apart, the arguments as the agent wrote them: what the agent says is not
what the app says) and the context the mapping gathered for it (lookup ``context`` fields
as ``item_code.item_name``, query results under ``as``). Context goes only here: it is never
a fact, so no ``when`` can read it.

The judge is pluggable. None is configured by default, and then such rules are listed as
not judged in the check row, never silently allowed or stopped. A judge that cannot
decide one rule answers None for it, with the same effect: the rule answers by its
``on_unknown``. A judge that cannot be asked because of the call itself (its facts too
large to send, text that is not valid Unicode) raises :class:`UnjudgeableCallError`: the
agent writes the call, so it must not be able to choose to leave a rule undecided: the rule
never answers by ``on_unknown: allow`` then, but fires
(tests/security/test_padded_call_slips_past_the_judge.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

__all__ = ["Judge", "UnjudgeableCallError", "Verdict"]


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class Verdict(NamedTuple):
    # Whether the rule's response applies to this call (as a matching ``when`` would).
    matched: bool
    # Why, in a sentence: kept in the check row so the decision can be reviewed.
    note: str
    # Which judge gave it (a Bedrock model id, or the keyword judge's name).
    model: str = ""


class UnjudgeableCallError(Exception):
    """The call cannot be put to the judge as it is; the message says why (it goes into
    the rule's entry as the note)."""


class Judge(Protocol):
    def judge(
        self,
        rule: Mapping[str, Any],
        facts: Mapping[str, Any],
        context: Mapping[str, Any],
        *,
        arguments: Mapping[str, Any] | None = None,
    ) -> Verdict | None:
        """``rule`` is the rule as written; ``arguments`` the call's arguments as the agent
        wrote them (``facts`` merges them with what the app gave), so that a judge can tell
        the agent's word from the app's. None leaves the rule not judged (its on_unknown
        answers); UnjudgeableCallError holds the call to the rule."""
        ...
