"""Page cursors the API gives out (Activity's checks, the Asks queue): an opaque token that
names the last item of a page, with a tag of what it pages (``c1:`` checks, ``a1:`` asks)
so a cursor of one list is refused by another. Decoding accepts only what ``encode`` made:
anything else is a 400 that says to start again, never a store read of an odd key."""

from __future__ import annotations

import base64
import binascii
import re

from claros.errors import BadRequestError

__all__ = ["decode", "encode"]

_MAX = 100  # characters: longer than any cursor this server makes


def encode(tag: str, item_id: str) -> str:
    return base64.urlsafe_b64encode((tag + item_id).encode()).decode().rstrip("=")


def decode(tag: str, item_id: re.Pattern[str], cursor: str) -> str:
    """The item id ``cursor`` names, if it is a ``tag`` cursor of an id ``item_id`` matches."""
    bad = BadRequestError("cursor is not one this server gave out: start again from the first page")
    if len(cursor) > _MAX:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError):
        raise bad from None
    if not raw.startswith(tag) or not item_id.match(raw[len(tag) :]):
        raise bad
    return raw[len(tag) :]
