"""Time and ids. Kept in one place so tests can pin them."""

from __future__ import annotations

import datetime as dt
import secrets
import threading
import time

__all__ = ["new_id", "now_ms", "utc_now"]

_lock = threading.Lock()
_last = [0, 0]  # the last id's (ms, counter) in this process


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def utc_now() -> dt.datetime:
    """Now as an aware UTC datetime, from the same clock as :func:`now_ms` (so a test that
    pins one pins both)."""
    return dt.datetime.fromtimestamp(now_ms() / 1000, tz=dt.UTC)


def new_id(prefix: str) -> str:
    """A time-ordered, unguessable id: ``<prefix>_<ms:12 hex><counter:4 hex><12 hex random>``.

    Ids made by one process sort in the order they were made, even within a millisecond
    (timelines are listed by id); ids from different processes sort by millisecond."""
    ms = now_ms()
    with _lock:
        if ms <= _last[0]:
            ms, counter = _last[0], _last[1] + 1
        else:
            counter = 0
        _last[0], _last[1] = ms, counter
    return f"{prefix}_{ms:012x}{counter:04x}{secrets.token_hex(6)}"
