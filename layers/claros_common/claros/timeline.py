"""One timeline per person: their own checks and their agents', newest first.

Each item is the summary written with its check, with the check's outcome joined in as
``outcome`` (``{status, summary, reported_at}``, or null while none was reported). The
outcome is its own ledger record; it reaches the item because recording it also updates
the item's doc (``claros.outcomes``), so a page is one read however long it is.
"""

from __future__ import annotations

from typing import Any

from claros.auth import Principal
from claros.check_rows import timeline_collection
from claros.errors import BadRequestError, ForbiddenError
from claros.store.base import Store

__all__ = ["timeline"]

MAX_POSITION = 100  # a position is the key of a timeline doc (a page's next): far shorter


def timeline(
    store: Store, principal: Principal, *, limit: int, before: str | None
) -> dict[str, Any]:
    if not principal.person:
        raise ForbiddenError("a timeline belongs to a person: use a person's key")
    if before is not None and len(before) > MAX_POSITION:
        raise BadRequestError("before is not a timeline position (a page's next)")
    docs = store.query_docs(
        principal.workspace,
        timeline_collection(principal.person),
        after=before,
        limit=limit,
        descending=True,
    )
    items = [{**d.value, "outcome": d.value.get("outcome")} for d in docs]
    body: dict[str, Any] = {"person": principal.person, "items": items}
    if len(docs) == limit:
        body["next"] = docs[-1].key  # pass as ?before= for the next page
    return body
