"""Field paths like ``order.lines[0].qty``: one reader for the server (mappings) and the
guard (query lookups), so both sides see the same value at the same path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["get_path"]


def get_path(source: Any, path: str) -> Any:
    """The value at ``path`` (dots for object fields, ``[n]`` for list items); None when it
    is not there."""
    current = source
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(current, list) or index >= len(current):
                return None
            current = current[index]
        elif isinstance(current, Mapping):
            current = current.get(part)
        else:
            return None
    return current
