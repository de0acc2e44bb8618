"""A rule as written, its versions and confirm records.

A rule's ``hash`` is the sha256 of its canonical JSON as written (after validation:
defaults filled in, owners lowercased), so the same rule always has the same hash and a
check row can name exactly the text it ran under.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from claros.empty import new_list
from claros.names import EMAIL, NAME, RULE_ID
from claros.rules.expr import ExprError, parse_when
from claros.rules.terms import (
    ON_UNKNOWN,
    RESPONSES,
    SEVERITY,
    OnUnknown,
    Response,
    rule_hash,
    strength,
)

__all__ = [
    "ON_UNKNOWN",
    "RESPONSES",
    "SEVERITY",
    "Confirm",
    "RuleSpec",
    "rule_hash",
    "strength",
]

MadeBy = Literal["expert", "override", "precedents", "manual"]


class RuleSpec(BaseModel):
    """A rule as an admin writes it (DESIGN.md "Rules and mappings")."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, defer_build=True)

    id: str = Field(pattern=RULE_ID)
    workflow_id: str = Field(pattern=RULE_ID)
    app: str = Field(pattern=NAME)
    tools: list[str] = Field(min_length=1, max_length=100)
    title: str = Field(min_length=1, max_length=200)
    when: str | None = Field(None, max_length=2000)
    response: Response
    owners: list[str] = Field(default_factory=new_list, max_length=20)
    message: str | None = Field(None, max_length=1000)
    # shadow: evaluated and recorded (what it would have answered), never changes a result.
    mode: Literal["enforce", "shadow"] = "enforce"
    # What the rule answers when its `when` cannot be decided because a fact it needs is
    # missing, null or of the wrong type: fire (its own response), ask, or allow. Unset is
    # fire, and is left out of the rule as written: rules written before on_unknown existed
    # keep their hash, and mean exactly that.
    on_unknown: OnUnknown | None = None

    @field_validator("tools")
    @classmethod
    def _tools(cls, tools: list[str]) -> list[str]:
        for tool in tools:
            if not re.match(NAME, tool):
                raise ValueError(f"tool name {tool!r} is not valid")
        if len(set(tools)) != len(tools):
            raise ValueError("tools are listed twice")
        return tools

    @field_validator("owners")
    @classmethod
    def _owners(cls, owners: list[str]) -> list[str]:
        out = []
        for owner in owners:
            if not re.match(EMAIL, owner):
                raise ValueError(f"owner {owner!r} is not an email address")
            out.append(owner.lower())
        return out

    @field_validator("when")
    @classmethod
    def _when(cls, when: str | None) -> str | None:
        if when is None or not when.strip():
            return None
        try:
            parse_when(when)
        except ExprError as exc:
            raise ValueError(f"when: {exc}") from exc
        return when

    @field_validator("on_unknown")
    @classmethod
    def _on_unknown(cls, on_unknown: OnUnknown | None) -> OnUnknown | None:
        return None if on_unknown == "fire" else on_unknown

    def written(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class Confirm(BaseModel):
    """Who stands behind a rule version: what made it, who confirmed it, when."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    made_by: MadeBy
    confirmed_by: str
    confirmed_at: int
