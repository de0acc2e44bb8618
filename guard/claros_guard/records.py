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
the only member that is a list. Anything else is an error. An object that came as the one
text block of a result is not read so unless it is a wrapper: a tool without structured
output sends one block per row, so one block may be a single row, and the only list of a
row (a refund's ``lines``) is not the rows; such an object's only list counts only when
every other member says something of pages or errors (below), and otherwise the read
fails (tests/security/test_query_reads_one_row_as_the_rows.py). An object that says more rows
follow (it is a page of them) is an error too: beside the rows, or in a ``pagination``,
``paging``, ``page_info``, ``meta`` or ``links`` object there, a ``next_cursor`` /
``nextPageToken`` / ``next`` (and the like) that is not null or empty, a ``has_more`` /
``hasNextPage`` that is true, or a ``total_count`` / ``count`` above the number of rows
given (names compared without case, ``_`` or ``-``; not a plain ``total``, as often a sum
of money), and so is one holding a non-empty ``error`` or ``errors`` (GraphQL's
``{"data": null, "errors": [...]}``). A query reduces every row or none
(tests/security/test_query_counts_one_page_of_the_history.py).

A result with ``isError: true`` is a failed read, whatever it holds. A fetch's record that
is empty (``{}``, a read that found nothing) is a failed read too (``needs``), and so is
one that only reports an error (``error_report``: ``{"error": "no invoice inv-9"}``,
``{"detail": "Not found."}``, ``{"found": false}``), which many tools answer instead of a
tool error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from claros_guard.errors import ReadFailedError

__all__ = ["ROW_KEYS", "error_report", "error_text", "record_of", "rows_of", "value_of"]

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
    return _value_and_blocks(result, tool)[0]


def _value_and_blocks(result: Mapping[str, Any], tool: str) -> tuple[Any, int]:
    """The result's value, and how many text blocks it came from (0: structuredContent)."""
    if result.get("isError"):
        raise ReadFailedError(f"{tool} failed: {error_text(result)}")
    structured = result.get("structuredContent")
    if structured is not None:
        return structured, 0
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
    return (values[0] if len(values) == 1 else values), len(values)


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
    value, blocks = _value_and_blocks(result, tool)
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        failed = _reported_error(value)
        if failed is not None:
            raise ReadFailedError(
                f"{tool} returned an answer that reports an error ({failed}), not rows"
            )
        rows = next((value[k] for k in ROW_KEYS if isinstance(value.get(k), list)), None)
        if rows is None:
            lists = [k for k, v in value.items() if isinstance(v, list)]
            if len(lists) == 1 and blocks == 1 and not _only_about_pages(value, lists[0]):
                raise ReadFailedError(
                    f"{tool} returned one text block holding an object whose only list is "
                    f"{lists[0]!r}: one row (whose own list that is) or a wrapper of the rows; "
                    "a query counts no rows it cannot tell (answer with structuredContent, or "
                    f"name the rows {', '.join(ROW_KEYS)})"
                )
            rows = value[lists[0]] if len(lists) == 1 else None
        if rows is not None:
            more = _more_follow(value, len(rows))
            if more is not None:
                raise ReadFailedError(
                    f"{tool} returned a page of rows ({len(rows)}), and more rows follow "
                    f"({more}); a query reduces every row, never a page of them"
                )
            return list(rows)
    raise ReadFailedError(f"{tool} did not return rows (a JSON list, or an object holding one)")


def _plain(key: Any) -> str:
    """A member's name as the words below are written: no case, no ``_`` or ``-``
    (``next_cursor``, ``nextCursor`` and ``Next-Cursor`` alike)."""
    return str(key).lower().replace("_", "").replace("-", "")


def _only_about_pages(answer: Mapping[str, Any], rows_key: str) -> bool:
    """Whether every member but the rows says something of pages, totals or errors: the
    object wraps the rows, it is not one of them."""
    return all(_plain(k) in _PAGE_WORDS for k in answer if k != rows_key)


def _reported_error(answer: Mapping[str, Any]) -> str | None:
    """A non-empty ``error`` / ``errors`` of a list's answer (GraphQL's ``{"data": null,
    "errors": [...]}``): its rows, if any, are not all of them, and the errors are not rows
    (tests/security/test_query_counts_the_errors_as_the_history.py)."""
    for key, value in answer.items():
        name = _plain(key)
        if name in ("error", "errors", "errormessage") and value not in (None, "", False, [], {}):
            return f"{key}: {json.dumps(value, default=str)[:80]}"
    return None


# How a list's answer says it is a page (names without case, "_" or "-"): a next page's
# cursor, token or link; a flag; or a total above the rows given.
_NEXT = frozenset(
    {"nextcursor", "nextpagetoken", "nexttoken", "nextpage", "next", "nexturl", "nextlink",
     "nextoffset", "continuationtoken"}
)  # fmt: skip
_MORE = frozenset({"hasmore", "hasnext", "hasnextpage", "more", "truncated", "istruncated"})
# Not a plain "total": next to invoices or refunds it is as often a sum of money.
_TOTAL = frozenset({"totalcount", "count", "totalresults", "totalitems", "totalrows"})
_PAGING = frozenset({"pagination", "paging", "pageinfo", "meta", "links"})
# A wrapper's other members (names as above): its pages, totals and errors.
_WRAPPER = frozenset({"error", "errors", "errormessage", "page", "pagesize", "limit", "offset",
                      "total"})  # fmt: skip
_PAGE_WORDS = _NEXT | _MORE | _TOTAL | _PAGING | _WRAPPER


def _more_follow(answer: Mapping[str, Any], rows: int, nested: bool = False) -> str | None:
    """What in a list's answer says more rows follow than the ``rows`` it gave, or None."""
    for key, value in answer.items():
        name = _plain(key)
        if name in _NEXT and value not in (None, "", False, 0, [], {}):
            return f"{key}: {json.dumps(value, default=str)[:40]}"
        if name in _MORE and value is True:
            return f"{key}: true"
        if (
            name in _TOTAL
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value > rows
        ):
            return f"{key}: {value}"
        if name in _PAGING and not nested and isinstance(value, Mapping):
            found = _more_follow(value, rows, nested=True)
            if found is not None:
                return f"{key}.{found}"
    return None


# The fields of an error report (names without case, "_" or "-"): a body such as
# {"error": ...}, {"detail": "Not found."} (REST frameworks), {"ok": false, "message": ...}
# or RFC 9457's {"status": 404, "title": ..., "type": ...}.
_REPORT = frozenset(
    {"error", "errors", "errormessage", "errorcode", "message", "detail", "details", "reason",
     "title", "type", "instance", "description", "code", "status", "statuscode", "ok",
     "success", "found"}
)  # fmt: skip
_SAYS_ERROR = frozenset({"error", "errors", "errormessage", "detail"})
_FLAGS = frozenset({"ok", "success", "found"})
_STATUS = frozenset({"code", "status", "statuscode", "errorcode"})


def error_report(record: Mapping[str, Any]) -> str | None:
    """Why ``record`` is an error report rather than a record, or None: each of its fields
    is one an error report uses, and one says what went wrong (an ``error``, ``errors``
    or ``detail`` that is not empty, an ``ok`` / ``success`` / ``found`` that is false, a
    status of 400 to 599). A record with any other field is a record."""
    if not record or len(record) > len(_REPORT):
        return None
    names: dict[str, Any] = {}
    for key in record:  # a record's first field is seldom a report's: one look, as a rule
        name = _plain(key)
        if name not in _REPORT and not (name == "data" and record[key] is None):
            return None  # (GraphQL's failure is {"data": null, "errors": [...]})
        names[name] = key
    for name, key in names.items():
        value = record[key]
        if name in _SAYS_ERROR and value not in (None, "", [], {}):
            return f"{key}: {json.dumps(value, default=str)[:80]}"
        if name in _FLAGS and value is False:
            return f"{key}: false"
        if name in _STATUS and _is_error_status(value):
            return f"{key}: {value}"
    return None


def _is_error_status(value: Any) -> bool:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599
