"""Which fields of the agent's answer to a write's question no rule reads by name.

The answer to a question a checked write asks (``elicitation/create``) is checked laid
over the call's arguments (``session.AgentSession._checked_answer``). A field named as an
argument, or as one the tool's input schema lists, takes that argument's place, where the
rules read it. Any other field is a name of the question's own (``refund_amount`` beside
the argument ``amount``): a rule with a ``when`` reads the argument, and the server may
use the answer's value instead. A yes or no (``confirm: true``) carries no value a write
could use in place of an argument, so it is never one of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["unread_fields"]


def unread_fields(
    content: Mapping[str, Any], arguments: Mapping[str, Any], input_schema: Any
) -> list[str]:
    """The answer's fields that are neither an argument of the call nor one the tool's
    input schema lists, and hold something other than true or false."""
    known = set(arguments) | _schema_arguments(input_schema)
    return [
        name for name, value in content.items() if name not in known and not isinstance(value, bool)
    ]


def _schema_arguments(schema: Any) -> set[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return {str(name) for name in properties} if isinstance(properties, Mapping) else set()
