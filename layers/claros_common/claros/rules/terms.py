"""A rule's responses, their order and severity, and a rule's hash: what deciding a check
needs from rules, apart from claros.rules.model so that the check function does not build
the RuleSpec and Confirm models (only writing a rule validates one; a check reads rules as
the store holds them)."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from claros.canonical import canonical_bytes

__all__ = ["ON_UNKNOWN", "RESPONSES", "SEVERITY", "OnUnknown", "Response", "rule_hash", "strength"]

Response = Literal["allow", "nudge", "ask", "stop"]
OnUnknown = Literal["fire", "ask", "allow"]
ON_UNKNOWN: tuple[OnUnknown, ...] = ("fire", "ask", "allow")
RESPONSES: tuple[Response, ...] = ("allow", "nudge", "ask", "stop")  # weakest first
SEVERITY = {"stop": "high", "ask": "medium", "nudge": "low"}
_STRENGTH: dict[str, int] = {name: i for i, name in enumerate(RESPONSES)}


def strength(response: str) -> int:
    return _STRENGTH[response]


def rule_hash(written: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(written)).hexdigest()
