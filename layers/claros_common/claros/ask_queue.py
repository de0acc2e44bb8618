"""The asks queue: every open ask, soonest-expiring (so oldest) first, page by page.

An open ask is listed twice while it is open: in the workspace's queue (what admins see:
they may answer any ask) and in the queue of each person it is routed to (what a member
sees: the asks they may answer). Each entry's key is
``<expires_at:013d>:<opened_at:013d>:<ask_id>``, so a range query from now skips the
expired ones and the open count is a count of what is left. The entries are written in the
transaction that opens the ask and deleted in the one that answers it; an expired entry is
deleted by a later listing (a few at a time).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from claros.auth import Principal, member_role
from claros.clock import now_ms
from claros.errors import BadRequestError, ForbiddenError
from claros.store.base import DocWrite, Store

__all__ = [
    "QueuePage",
    "close_writes",
    "open_writes",
    "queue_page",
    "sees_every_ask",
]

ASK = "ask"  # claros.asks.COLLECTION (asks imports this module)
OPEN = "ask_open"  # the workspace's queue
INDEXED = "ask_queue"  # (workspace, INDEXED, "v1"): asks opened before the queue are in it
_SWEEP = 25
MAX_PAGE = 200


def _open_for(person: str) -> str:
    return f"ask_open_for:{person}"


def _entry_key(ask: Mapping[str, Any]) -> str:
    return f"{int(ask['expires_at']):013d}:{int(ask['opened_at']):013d}:{ask['ask_id']}"


def _queues(ask: Mapping[str, Any]) -> list[str]:
    return [OPEN, *(_open_for(str(p)) for p in ask.get("routed_to") or [])]


def open_writes(ask: Mapping[str, Any]) -> list[DocWrite]:
    """The queue entries of a new ask (in the check's own transaction)."""
    key, ref = _entry_key(ask), {"ask_id": ask["ask_id"]}
    return [DocWrite(str(ask["workspace"]), q, key, ref, 0) for q in _queues(ask)]


def close_writes(ask: Mapping[str, Any]) -> list[DocWrite]:
    """Delete an answered ask's entries (in the answer's transaction)."""
    key = _entry_key(ask)
    return [DocWrite(str(ask["workspace"]), q, key, None) for q in _queues(ask)]


def _ensure_indexed(store: Store, workspace: str, now: int) -> None:
    """Queue the asks opened before there was a queue, once per workspace."""
    if store.get_doc(workspace, INDEXED, "v1") is not None:
        return
    after: str | None = None
    while True:
        page = store.query_docs(workspace, ASK, after=after, limit=100)
        for doc in page:
            ask = doc.value
            if ask.get("status") == "open" and int(ask.get("expires_at") or 0) >= now:
                writes = [DocWrite(w.workspace, w.collection, w.key, w.value)
                          for w in open_writes(ask)]  # fmt: skip
                store.write_docs(writes)
        if len(page) < 100:
            break
        after = page[-1].key
    store.write_docs([DocWrite(workspace, INDEXED, "v1", {"at": now})])


def sees_every_ask(store: Store, principal: Principal) -> bool:
    """Admins may answer any ask (claros.asks), so their queue is the workspace's."""
    if principal.is_admin:
        return True
    return bool(principal.person) and (
        member_role(store, principal.workspace, str(principal.person)) == "admin"
    )


def _sweep(store: Store, workspace: str, queue: str, now: int) -> None:
    stale = store.query_docs(workspace, queue, limit=_SWEEP)
    gone = [DocWrite(workspace, queue, d.key, None) for d in stale if d.key < f"{now:013d}:"]
    if gone:
        store.write_docs(gone)


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class QueuePage(NamedTuple):
    asks: list[dict[str, Any]]  # the ask docs, as stored
    open: int  # how many asks are open in this queue (all pages)
    next: str | None  # the cursor of the next page, None on the last
    everyone: bool  # the workspace's queue (an admin's), not the person's own


def _entries(store: Store, workspace: str, queue: str, after: str) -> Iterator[str]:
    while True:
        page = store.query_docs(workspace, queue, after=after, limit=100)
        yield from (d.key for d in page)
        if len(page) < 100:
            return
        after = page[-1].key


def queue_page(
    store: Store,
    principal: Principal,
    *,
    after: str | None = None,
    limit: int = 50,
    mine: bool = False,
    now: int | None = None,
) -> QueuePage:
    """A page of the open asks ``principal`` may answer, soonest-expiring first, with the
    number open in all. ``mine``: only those routed to them, even for an admin."""
    if not principal.person:
        raise ForbiddenError("asks are answered by people: use a person's key")
    if not 1 <= limit <= MAX_PAGE:
        raise BadRequestError(f"limit must be between 1 and {MAX_PAGE}")
    if after is not None and (len(after) > 120 or after.count(":") != 2):
        raise BadRequestError("after is not a position in the asks queue")
    now = now or now_ms()
    workspace = principal.workspace
    _ensure_indexed(store, workspace, now)
    everyone = not mine and sees_every_ask(store, principal)
    queue = OPEN if everyone else _open_for(principal.person)
    _sweep(store, workspace, queue, now)
    start = f"{now:013d}:"  # what expires before now is not open any more
    keys = _entries(store, workspace, queue, max(start, after) if after else start)
    asks: list[dict[str, Any]] = []
    stale: list[DocWrite] = []
    last: str | None = None
    more = False
    for key in keys:
        if len(asks) == limit:
            more = True  # one entry past the page: there is a next page (perhaps stale)
            break
        doc = store.get_doc(workspace, ASK, key.rsplit(":", 1)[1])
        if doc is None or doc.value.get("status") != "open":
            stale.append(DocWrite(workspace, queue, key, None))
            continue
        asks.append(doc.value)
        last = key
    if stale:
        store.write_docs(stale[:50])
    # The count: the rest of the range, from now (entries only, a page of keys at a time).
    total = sum(1 for _ in _entries(store, workspace, queue, start)) - len(stale)
    return QueuePage(asks, max(total, len(asks)), last if more else None, everyone)
