"""``$CLAROS_LOG``: the log level of every long-running ``claros`` command (the guard, the
local server). Small on purpose: ``claros serve`` reads it without importing the guard."""

from __future__ import annotations

import os

from claros_guard.errors import ConfigError

__all__ = ["LEVELS", "log_level"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level() -> str:
    """``$CLAROS_LOG`` (default INFO); ConfigError naming the levels when it is none."""
    level = (os.environ.get("CLAROS_LOG") or "INFO").strip().upper()
    if level not in LEVELS:
        raise ConfigError(
            f"CLAROS_LOG={os.environ.get('CLAROS_LOG')!r} is not a log level: use "
            + ", ".join(LEVELS)
        )
    return level
