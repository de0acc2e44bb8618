"""Strings holding half of a UTF-16 surrogate pair (``"\\ud800"`` alone).

JSON's grammar lets ``\\uD800``-``\\uDFFF`` stand alone, and Python (as JavaScript) reads it
so; but no UTF-8 text holds one: a message carrying it cannot be written on, and Claros
refuses it as not Unicode. The guard and the hooks refuse such a call with that reason,
before anything else fails on it. Only ``re``: the hooks load this on their fast path.
"""

from __future__ import annotations

import re

__all__ = ["ESCAPE", "holds_lone_surrogate", "may_hold_lone_surrogate"]

# The escape of a surrogate, in JSON text: a pair is joined into one character when read,
# so only a text holding this escape can hold a lone surrogate once read.
ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def may_hold_lone_surrogate(text: str | bytes) -> bool:
    """Whether JSON ``text`` holds a surrogate's escape (only then need it be walked)."""
    if isinstance(text, bytes):
        return _ESCAPE_BYTES.search(text) is not None
    return ESCAPE.search(text) is not None


_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def holds_lone_surrogate(value: object) -> bool:
    """Whether a string (or key) anywhere in the JSON ``value`` holds an unpaired
    surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
