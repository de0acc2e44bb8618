"""Claros client side: the MCP guard, Claude Code hooks and `claros verify`."""

from __future__ import annotations

__all__ = ["VERSION"]

VERSION: str  # looked up when first read (below)


def __getattr__(name: str) -> str:
    # The installed version, found on first use: importlib.metadata costs tens of
    # milliseconds, which a hook letting a Read through must not pay.
    if name != "VERSION":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("claros")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        found = "0.0.0"
    globals()["VERSION"] = found
    return found
