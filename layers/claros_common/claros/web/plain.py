"""Validation problems in plain words, for people reading a page.

The API answers a bad body with the validation library's wording (``details``: field and
problem), which a script can act on. A person filling a form gets one sentence they can act
on instead: a form names its fields' rules in its own words (``FieldWords``), and anything
else (a rule or mapping typed as text) is described from the error's type, never from the
library's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

__all__ = ["FieldWords", "plain_problem", "where"]

# Per form: field name -> the sentence shown when that field is wrong.
FieldWords = Mapping[str, str]


def where(loc: tuple[int | str, ...]) -> str:
    """``('tools', 0)`` -> ``tools[0]``; ``('fetch', 'tool')`` -> ``fetch.tool``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "the text"


# Error types by prefix -> what the value must be.
_SHAPES = (
    ("string", "must be text"),
    ("int", "must be a whole number"),
    ("float", "must be a number"),
    ("decimal", "must be a number"),
    ("bool", "must be true or false"),
    ("list", "must be a list"),
    ("tuple", "must be a list"),
    ("dict", "must be a set of fields (key: value)"),
    ("model", "must be a set of fields (key: value)"),
    ("greater_than", "is too small"),
    ("less_than", "is too large"),
)


def _length(field: str, kind: str, ctx: Mapping[str, Any]) -> str:
    unit = "characters" if kind.startswith("string") else "items"
    if kind.endswith("too_long"):
        return f"{field} is too long: at most {ctx.get('max_length')} {unit}"
    limit = ctx.get("min_length")
    if limit in (1, None):
        return f"{field} must not be empty"
    return f"{field} is too short: at least {limit} {unit}"


def _sentence(error: Mapping[str, Any]) -> str:
    field = where(tuple(error.get("loc") or ()))
    kind = str(error.get("type") or "")
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    if kind == "missing":
        return f"{field} is missing: add it"
    if kind == "extra_forbidden":
        return f"{field} is not a field this accepts: remove it or check its spelling"
    if kind == "value_error":
        # Our own validators' messages (claros.rules.model, claros.mapping.model), written
        # for people; the library prefixes them with "Value error, ".
        text = str(ctx.get("error") or error.get("msg") or "")
        return f"{field}: {text.removeprefix('Value error, ')}"
    if kind == "literal_error":
        return f"{field} must be one of {ctx.get('expected', 'the listed values')}"
    if kind == "string_pattern_mismatch":
        return f"{field} holds characters a name may not have (letters, digits, _ . - only)"
    if kind.endswith(("too_long", "too_short")):
        return _length(field, kind, ctx)
    for prefix, must in _SHAPES:
        if kind.startswith(prefix):
            return f"{field} {must}"
    return f"{field} is not valid"


def plain_problem(exc: ValidationError, words: FieldWords | None = None) -> str:
    """One sentence for the first problem: the form's own words for its field when it has
    them, else a description of the problem in plain words."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "Check the form and send it again."
    first = errors[0]
    loc = tuple(first.get("loc") or ())
    if words and loc and str(loc[0]) in words:
        return words[str(loc[0])]
    text = _sentence(first)
    more = len(errors) - 1
    if more:
        text += f" (and {more} more problem{'s' if more > 1 else ''})"
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
