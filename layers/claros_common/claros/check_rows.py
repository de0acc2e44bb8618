"""What a check row is, for the modules that read check rows without making checks (the
outcome function, the evidence pages, the timeline): the agent's description, the keys of
the call index and the timeline, and whether a row repeats an approved ask. Apart from
claros.checks so that reading a row does not import the rules, mappings and asks that
deciding a check needs (each function's cold start pays only for what it serves)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentInfo", "Strict", "Via", "approved_repeat", "call_index_key", "timeline_collection"]


class Strict(BaseModel):
    """A request part: unknown fields refused, strings bounded."""

    model_config = ConfigDict(extra="forbid", str_max_length=512, defer_build=True)


class Via(Strict):
    guard: str = Field(min_length=1, max_length=128)
    version: str | None = Field(None, max_length=64)


class AgentInfo(Strict):
    """What the agent says it is. ``on_behalf_of`` is honoured only from a service key."""

    name: str = Field(min_length=1, max_length=128)
    model: str | None = Field(None, max_length=128)
    version: str | None = Field(None, max_length=64)
    session: str | None = Field(None, max_length=256)
    call_id: str | None = Field(None, max_length=256)
    via: Via | None = None
    on_behalf_of: str | None = Field(None, max_length=256)


def call_index_key(key_id: str, call_id: str) -> str:
    return f"{key_id}:{call_id}"


def timeline_collection(person: str) -> str:
    """The docs of a person's timeline: one per check made for them, keyed by check id."""
    return f"timeline:{person}"


def approved_repeat(row: Mapping[str, Any]) -> bool:
    """Whether a check row (or its timeline summary) is the repeat of an approved ask.

    The guard repeats an approved call with ``approval``; that row completes the write
    whose ask was checked (and counted) already, so counters of writes, results and
    near-misses skip it. Its outcome is still reported against it. Timeline docs written
    before they held ``approval`` tell a repeat apart another way: repeats then kept the
    ask's severity on an allow, which no other row has."""
    if row.get("approval"):
        return True
    return row.get("result") == "allow" and row.get("severity") is not None
