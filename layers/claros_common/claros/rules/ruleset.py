"""The set of active rules that ``claros.rules.service.active_rules`` shares between
checks. Its own module so that what reads rules without deciding (the evidence, export and
prune functions, through claros.rules.service) does not import the expression language."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from claros.rules.expr import Expr

    # One rule as decide runs it: (rule, written, response, mode, parsed when or None,
    # the entry's fixed fields).
    Step = tuple[Mapping[str, Any], Mapping[str, Any], str, str, Expr | None, dict[str, Any]]

__all__ = ["RuleSet"]


class RuleSet(list[Mapping[str, Any]]):
    """A workspace's active rules (never changed once made), with what ``decide`` works
    out once per call shape (app, tool) rather than per check: the rules that apply, in
    order, their parsed ``when`` and the fixed part of their ``rules[]`` entry."""

    __slots__ = ("plans",)

    def __init__(self, rules: Iterable[Mapping[str, Any]] = ()) -> None:
        super().__init__(rules)
        self.plans: dict[tuple[str, str], tuple[Step, ...]] = {}
