"""Activity: a workspace's checks, newest first, filtered, searched and counted.

Who sees what: admins (and audit keys, which read the ledger's records) see every check of
the workspace; a member sees the checks made for them, by their own keys and their agents'
(``on_behalf_of`` is them), as their timeline and Home do (``claros.web.views``).

Cost: every page is key-ordered reads of the workspace's check records (newest first,
within the key range of the time range) that read at most ``SCAN_LIMIT`` records; a
filter that matches little may give a short page with a cursor to read on. Counts per
result look at the newest ``COUNT_LIMIT`` checks of the time range at most, and say so
when there are more ("10,000+"). See docs/api.md, "Activity".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from claros import cursors
from claros.asks import COLLECTION as ASKS
from claros.auth import PERSON_KINDS, Principal, member_role
from claros.coverage import outcome_view
from claros.errors import BadRequestError, ForbiddenError
from claros.store.base import CheckQuery, Store, check_matches

__all__ = [
    "COUNT_LIMIT",
    "MAX_LIMIT",
    "OUTCOMES",
    "PARAMETERS",
    "RESULTS",
    "SCAN_LIMIT",
    "ActivityRequest",
    "asked_of",
    "list_activity",
    "may_see",
    "parse_activity",
]

RESULTS = ("allow", "nudge", "ask", "stop")
OUTCOMES = ("ok", "error", "none")
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
SCAN_LIMIT = 5_000  # check records one page reads at most
COUNT_LIMIT = 10_000  # check records the counts per result read at most
# A text search reads each candidate's arguments (one record and a JSON parse each), so it
# reads fewer per page and counts over fewer.
TEXT_SCAN_LIMIT = 1_000
TEXT_COUNT_LIMIT = 2_000
PARAMETERS = ("app", "tool", "agent", "person", "result", "rule", "outcome", "since",
              "until", "q", "cursor", "limit")  # fmt: skip
_MAX_TEXT = 200
_CHECK_ID = re.compile(r"^chk_[0-9a-f]{28}$")
_ASK_ID = re.compile(r"^ask_[0-9a-f]{28}$")
_CURSOR = "c1:"


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class ActivityRequest(NamedTuple):
    """A parsed, valid Activity query: the filters, the search, the page."""

    query: CheckQuery
    search: str | None = None
    before: str | None = None
    limit: int = DEFAULT_LIMIT

    def filters(self) -> dict[str, Any]:
        """The filters as the URL carries them (the page's form and links)."""
        q = self.query
        out = {"app": q.app, "tool": q.tool, "agent": q.agent, "person": q.person,
               "result": q.result, "rule": q.rule_id, "outcome": q.outcome,
               "since": q.since, "until": q.until, "q": self.search}  # fmt: skip
        return {k: v for k, v in out.items() if v is not None}


def encode_cursor(check_id: str) -> str:
    return cursors.encode(_CURSOR, check_id)


def decode_cursor(cursor: str) -> str:
    return cursors.decode(_CURSOR, _CHECK_ID, cursor)


def parse_time(name: str, value: str, *, end: bool = False) -> int:
    """A time filter: milliseconds since 1970, or an ISO 8601 date or date and time (UTC
    unless it names its offset). A date alone as ``until`` means the end of that day."""
    text = value.strip()
    if text.isascii() and text.isdigit() and len(text) <= 15:
        return int(text)
    try:
        if len(text) == 10:
            day = dt.date.fromisoformat(text)
            start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
            when = start + dt.timedelta(days=1) if end else start
        else:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.UTC)
        return int(when.timestamp() * 1000)
    except (ValueError, OverflowError):  # OverflowError: past year 9999 or before year 1
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise BadRequestError(
            f"{name} must be a date (2026-11-30), a date and time (2026-11-30T14:00, UTC "
            f"unless it gives an offset) or milliseconds since 1970, not {shown!r}"
        ) from None


def _text(name: str, value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    if len(value) > _MAX_TEXT:
        raise BadRequestError(f"{name} is longer than {_MAX_TEXT} characters")
    return value


def parse_activity(params: Mapping[str, str]) -> ActivityRequest:
    """The query string of ``GET /api/checks`` (and of the Activity page), checked: a bad
    value is a ``BadRequestError`` that says plainly what is wrong. Empty values mean no
    filter (a plain GET form sends every field)."""
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise BadRequestError(f"unknown parameter {unknown[0]!r}: use {', '.join(PARAMETERS)}")
    text = {name: _text(name, params.get(name)) for name in PARAMETERS}
    result = text["result"]
    if result is not None and result not in RESULTS:
        raise BadRequestError(f"result must be one of {', '.join(RESULTS)}, not {result!r}")
    outcome = text["outcome"]
    if outcome is not None and outcome not in OUTCOMES:
        raise BadRequestError(
            f"outcome must be ok, error or none (no outcome reported), not {outcome!r}"
        )
    since = parse_time("since", text["since"]) if text["since"] else None
    until = parse_time("until", text["until"], end=True) if text["until"] else None
    if since is not None and until is not None and since >= until:
        raise BadRequestError("since must be before until")
    limit = DEFAULT_LIMIT
    if text["limit"] is not None:
        raw = text["limit"]
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw[:6]) <= MAX_LIMIT:
            raise BadRequestError(f"limit must be a whole number from 1 to {MAX_LIMIT}")
        limit = int(raw)
    before = decode_cursor(text["cursor"]) if text["cursor"] else None
    search = text["q"]
    query = CheckQuery(
        app=text["app"], tool=text["tool"], agent=text["agent"], person=text["person"],
        result=result, rule_id=text["rule"], outcome=outcome, since=since, until=until,
    )  # fmt: skip
    if search is not None and not (_CHECK_ID.match(search) or _ASK_ID.match(search)):
        query = query._replace(text=search)
    return ActivityRequest(query, search, before, limit)


def sees_everything(principal: Principal) -> bool:
    return principal.is_admin or principal.kind == "audit"


def may_see(principal: Principal, row: Mapping[str, Any]) -> bool:
    """Whether the caller may see a check: an admin (or audit key) any of the workspace's;
    a member only those made for them (their own keys' and their agents')."""
    if row.get("workspace") not in (None, principal.workspace):
        return False
    if sees_everything(principal):
        return True
    return bool(principal.person) and row.get("on_behalf_of") == principal.person


def asked_of(store: Store, principal: Principal, row: Mapping[str, Any]) -> bool:
    """Whether the check asked a question this person may answer (it is routed to them,
    they own one of its rules, or they are a workspace admin): they see the whole call
    they are asked about, not only the first arguments an ask card shows."""
    ask_id, person = row.get("ask_id"), principal.person
    if not ask_id or not person or principal.kind not in PERSON_KINDS:
        return False
    doc = store.get_doc(principal.workspace, ASKS, str(ask_id))
    if doc is None or doc.value.get("check_id") != row.get("check_id"):
        return False
    if person in (doc.value.get("routed_to") or []) or person in (doc.value.get("owners") or []):
        return True
    return member_role(store, principal.workspace, person) == "admin"


def _scoped(principal: Principal, query: CheckQuery) -> CheckQuery:
    if sees_everything(principal):
        return query
    if not principal.person:
        raise ForbiddenError("checks are shown to people: use your person key")
    if query.person is not None and query.person != principal.person:
        raise ForbiddenError(
            "members see only their own checks and their agents': person must be you "
            f"({principal.person}) or left out"
        )
    return query._replace(person=principal.person)


def check_summary(row: Mapping[str, Any], outcome: Mapping[str, Any] | None) -> dict[str, Any]:
    """A check as a listing shows it."""
    keys = ("check_id", "ts", "app", "tool", "arguments", "agent", "on_behalf_of",
            "obo_source", "result", "severity", "amount", "currency", "ask_id", "approval",
            "reason")  # fmt: skip
    out = {k: row[k] for k in keys if row.get(k) is not None}
    out["rules"] = [
        {k: r.get(k) for k in ("id", "version", "matched", "response") if r.get(k) is not None}
        for r in row.get("rules") or []
        if isinstance(r, Mapping)
    ]
    out["outcome"] = outcome_view(outcome) if outcome else None
    return out


def _found_by_id(
    store: Store, principal: Principal, request: ActivityRequest, query: CheckQuery
) -> dict[str, Any]:
    """A search by check id or ask id: that one check, when the caller may see it and it
    passes the other filters."""
    search = str(request.search)
    check_id = search
    if _ASK_ID.match(search):
        ask = store.get_doc(principal.workspace, ASKS, search)
        check_id = str(ask.value.get("check_id")) if ask else ""
    row = store.get_record(principal.workspace, "check", check_id) if check_id else None
    outcome = store.get_record(principal.workspace, "outcome", check_id) if row else None
    rows = []
    if row is not None and may_see(principal, row) and check_matches(query, row, outcome):
        rows = [check_summary(row, outcome)]
    by_result = dict.fromkeys(RESULTS, 0)
    for found in rows:
        by_result[str(found["result"])] = by_result.get(str(found["result"]), 0) + 1
    return {"checks": rows, "next": None, "scanned": len(rows),
            "counts": {"by_result": by_result, "total": len(rows), "counted": len(rows),
                       "complete": True, "limit": COUNT_LIMIT}}  # fmt: skip


def list_activity(
    store: Store, principal: Principal, request: ActivityRequest, *, counts: bool = True
) -> dict[str, Any]:
    """One page of Activity (the body of ``GET /api/checks``)."""
    query = _scoped(principal, request.query)
    scope = "workspace" if sees_everything(principal) else "person"
    head: dict[str, Any] = {"workspace": principal.workspace, "scope": scope,
                            "filters": request.filters()}  # fmt: skip
    if scope == "person":
        head["person"] = principal.person
    if request.search is not None and query.text is None:
        return {**head, **_found_by_id(store, principal, request, query)}
    texty = query.text is not None
    page = store.list_checks(
        principal.workspace, query, before=request.before, limit=request.limit,
        scan_limit=TEXT_SCAN_LIMIT if texty else SCAN_LIMIT,
    )  # fmt: skip
    body: dict[str, Any] = {
        **head,
        "checks": [check_summary(row, outcome) for row, outcome in page.rows],
        "next": encode_cursor(page.next) if page.next else None,
        "scanned": page.scanned,
    }
    if counts:
        limit = TEXT_COUNT_LIMIT if texty else COUNT_LIMIT
        found = store.count_checks(principal.workspace, query, scan_limit=limit)
        body["counts"] = {
            "by_result": {r: found.by_result.get(r, 0) for r in RESULTS}
            | {k: v for k, v in found.by_result.items() if k not in RESULTS},
            "total": sum(found.by_result.values()),
            "counted": found.scanned,
            "complete": found.complete,
            "limit": limit,
        }
    return body
