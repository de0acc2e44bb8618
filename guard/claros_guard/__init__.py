"""Claros client side: the MCP guard, Claude Code hooks and `claros verify`."""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "RELEASE", "VERSION"]

# What pip and pipx install (`claros` on PyPI is another project's name).
DISTRIBUTION = "getclaros"
# This source tree's version, the one pyproject.toml and npm/getclaros/package.json carry
# (tests/test_cli_help.py keeps the three equal): used when no installed metadata is found.
RELEASE = "0.1.0"

VERSION: str  # looked up when first read (below)


def __getattr__(name: str) -> str:
    # The installed version, found on first use: importlib.metadata costs tens of
    # milliseconds, which a hook letting a Read through must not pay.
    if name != "VERSION":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a source tree that was never installed
        found = RELEASE
    globals()["VERSION"] = found
    return found
