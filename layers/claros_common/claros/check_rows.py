"""What a check row is, for the modules that read check rows without making checks (the
outcome function, the evidence pages, the timeline): the keys of the call index and the
timeline, and whether a row repeats an approved ask. Apart from claros.checks so that
reading a row does not import the rules, mappings and asks that deciding a check needs,
and from the agent's description (claros.agent_info, pydantic models) so that reading one
does not import pydantic (each function's cold start pays only for what it serves)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

__all__ = ["approved_repeat", "call_index_key", "timeline_collection"]

# The longest doc key in UTF-8 bytes that every store keeps (a DynamoDB sort key holds at
# most 1,024 bytes, the doc's partition and collection apart).
MAX_KEY_BYTES = 1024


def call_index_key(key_id: str, call_id: str) -> str:
    """The call index's doc key of ``call_id`` made with key ``key_id``: ``<key id>:<call
    id>``, or, for a call id too long for a sort key (``call_id`` may be 256 characters of
    up to 4 UTF-8 bytes each), ``<key id>#<sha256 of the call id>`` (no raw key has a "#"
    after its 16 hex digits, so the two never meet). A key of at most 256 characters
    fits whatever its characters, and is not measured (a check's usual case)."""
    raw = f"{key_id}:{call_id}"
    if len(raw) <= MAX_KEY_BYTES // 4:
        return raw
    data = raw.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_KEY_BYTES:
        return raw
    return f"{key_id}#{hashlib.sha256(call_id.encode('utf-8', 'surrogatepass')).hexdigest()}"


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
