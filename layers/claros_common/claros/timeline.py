"""One timeline per person: their own checks and their agents', newest first."""

from __future__ import annotations

from typing import Any

from claros.auth import Principal
from claros.errors import ForbiddenError
from claros.store.base import Store

__all__ = ["timeline"]


def timeline(
    store: Store, principal: Principal, *, limit: int, before: str | None
) -> dict[str, Any]:
    if not principal.person:
        raise ForbiddenError("a timeline belongs to a person: use a person's key")
    docs = store.query_docs(
        principal.workspace,
        f"timeline:{principal.person}",
        after=before,
        limit=limit,
        descending=True,
    )
    body: dict[str, Any] = {"person": principal.person, "items": [d.value for d in docs]}
    if len(docs) == limit:
        body["next"] = docs[-1].key  # pass as ?before= for the next page
    return body
