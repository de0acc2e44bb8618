"""Reading the record a call targets ahead, before Claros asks for it.

A tool whose mapping has a fetch costs two checks per write: the first answers "need"
with the read, the guard runs it, the second check decides. Claros's need for a fetch also
carries the mapping's arguments as written (``template``, e.g. ``{"id": "$order"}``); this
guard keeps it per app and tool, and on the next call of that tool runs the read first and
sends one check with ``fetched`` and ``fetched_with`` (the read it ran). Claros uses the
record only when that is exactly the read its mapping asks for now; otherwise it sets
everything read aside and answers as to a first check (``fetch_stale``), so a mapping
edited meanwhile costs one round more, never a decision on the wrong record.

Kept out of the way of correctness: a template this guard cannot fill in exactly as
Claros would (a built-in such as ``$today``: the dates of two clocks may differ) is not
kept, nor one whose filling-in disagrees with the need Claros sent; a read ahead that
fails is dropped and the check goes as before (Claros then asks, and that read blocks as
always).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from claros.paths import get_path

__all__ = ["BUILTINS", "ReadAhead", "fill_in"]

# Claros's built-in values (docs/rules.md): the server's date, not this machine's.
BUILTINS = frozenset({"$now", "$today", "$month_start", "$quarter_start", "$year_start"})
_KEEP = 1000  # tools whose fetch is kept; past it, all are forgotten and learnt again


class _Unfillable(Exception):
    """A template names a value only Claros knows (a built-in), or one that names no
    record: missing, null, blank text or an object (Claros refuses such a check rather
    than read with it: claros.mapping.facts._missing; so the read is not run either)."""


def _fill(value: Any, arguments: Mapping[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, arguments) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, arguments) for v in value]
    if isinstance(value, str) and value.startswith("$"):  # as Claros's is_substitution
        if value in BUILTINS or value == "$":
            raise _Unfillable(value)
        named = get_path(arguments, value[1:])
        if (
            named is None
            or isinstance(named, Mapping)
            or (isinstance(named, str) and not named.strip())
        ):
            raise _Unfillable(value)
        return named
    return value


def fill_in(template: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The read's arguments for a call, as Claros fills them in; None when it names a
    value only Claros knows."""
    try:
        filled = _fill(dict(template), arguments)
    except _Unfillable:
        return None
    return filled if isinstance(filled, dict) else None


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


class ReadAhead:
    """Fetch templates learnt from Claros's needs, by (app, tool) of the write."""

    def __init__(self, limit: int = _KEEP) -> None:
        self.limit = limit
        self._known: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._known)

    def read_for(self, app: str, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """The fetch to run ahead for this call (``{"tool", "arguments"}``), or None."""
        known = self._known.get((app, tool))
        if known is None:
            return None
        filled = fill_in(known[1], arguments)
        if filled is None:
            return None
        return {"tool": known[0], "arguments": filled}

    def forget(self, app: str, tool: str) -> None:
        self._known.pop((app, tool), None)

    def learn(self, app: str, tool: str, arguments: Mapping[str, Any], needs: Any) -> None:
        """Keep the template of a fetch need, if this guard fills it in as Claros did."""
        if not isinstance(needs, list):
            return
        for need in needs:
            if not isinstance(need, Mapping) or need.get("kind") != "fetch":
                continue
            read, template = need.get("tool"), need.get("template")
            if not isinstance(read, str) or not isinstance(template, dict):
                self.forget(app, tool)  # a Claros that sends no template: nothing to keep
                return
            filled = fill_in(template, arguments)
            if filled is None or not _same(filled, need.get("arguments") or {}):
                self.forget(app, tool)
                return
            if len(self._known) >= self.limit and (app, tool) not in self._known:
                self._known.clear()
            self._known[(app, tool)] = (read, dict(template))
            return
