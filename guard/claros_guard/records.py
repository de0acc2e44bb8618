"""Records and rows out of a read tool's result (an MCP ``CallToolResult`` as JSON).

The value a result carries:

* its ``structuredContent``, when present;
* otherwise its ``text`` content blocks, each parsed as JSON: one block gives that value,
  several blocks give the list of their values. A text block that is not JSON is an error.

A **record** (fetch, lookup) is that value when it is a JSON object; ``{"result": ...}``
(how the MCP SDK wraps a return type that is not an object) gives what it wraps, and a
list of exactly one object gives that object. Anything else (plain text, a number, a
list, null: ``{"result": "Order 7: 20 EUR"}`` included) is a failed read, never an empty
record: the write is blocked, or forwarded unchecked with ``--fail-open``.

**Rows** (query lookup) are that value when it is a list; in an object, the first of
``result``, ``items``, ``rows``, ``results``, ``records``, ``data`` that is a list, or else
the only member that is a list. Anything else is an error.

A result with ``isError: true`` is a failed read, whatever it holds. A fetch's record that
is empty (``{}``, a read that found nothing) is a failed read too (``needs``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from claros_guard.errors import ReadFailedError

__all__ = ["ROW_KEYS", "error_text", "record_of", "rows_of", "value_of"]

ROW_KEYS = ("result", "items", "rows", "results", "records", "data")


def error_text(result: Mapping[str, Any], limit: int = 300) -> str:
    texts = [
        str(block.get("text", ""))
        for block in result.get("content") or []
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    text = " ".join(t.strip() for t in texts if t.strip()) or "no message"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_of(result: Mapping[str, Any], tool: str) -> Any:
    if result.get("isError"):
        raise ReadFailedError(f"{tool} failed: {error_text(result)}")
    structured = result.get("structuredContent")
    if structured is not None:
        return structured
    texts = [
        block.get("text")
        for block in result.get("content") or []
        if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    if not texts:
        raise ReadFailedError(f"{tool} returned neither structuredContent nor text content")
    values = []
    for text in texts:
        try:
            values.append(json.loads(str(text)))
        except ValueError as exc:
            raise ReadFailedError(
                f"{tool} returned text that is not JSON ({str(text)[:60]!r}); the guard reads "
                "records from structuredContent or JSON text"
            ) from exc
    return values[0] if len(values) == 1 else values


def record_of(result: Mapping[str, Any], tool: str) -> dict[str, Any]:
    value = value_of(result, tool)
    if isinstance(value, dict) and set(value) == {"result"}:
        # The SDK's wrapping of a return that is not an object: what it wraps is the
        # answer. A sentence or a number wrapped so is not a record: merged as one, its
        # facts would be missing and the write would be checked on facts never read.
        value = value["result"]
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        value = value[0]
    if not isinstance(value, dict):
        raise ReadFailedError(
            f"{tool} did not return a record (a JSON object) but {_describe(value)}; an "
            "answer that is not a record is a failed read"
        )
    return value


def _describe(value: Any) -> str:
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:59] + "…"
        return f"plain text ({shown!r})"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"[:80]


def rows_of(result: Mapping[str, Any], tool: str) -> list[Any]:
    value = value_of(result, tool)
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ROW_KEYS:
            if isinstance(value.get(key), list):
                return list(value[key])
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return list(lists[0])
    raise ReadFailedError(f"{tool} did not return rows (a JSON list, or an object holding one)")
