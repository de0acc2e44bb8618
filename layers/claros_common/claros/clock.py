"""Time and ids. Kept in one place so tests can pin them."""

from __future__ import annotations

import secrets
import time

__all__ = ["new_id", "now_ms"]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def new_id(prefix: str) -> str:
    """A time-ordered, unguessable id: ``<prefix>_<ms as 12 hex><16 hex random>``."""
    return f"{prefix}_{now_ms():012x}{secrets.token_hex(8)}"
