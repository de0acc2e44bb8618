"""Claros client side: the MCP guard, Claude Code hooks and `claros verify`."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("claros")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    VERSION = "0.0.0"

__all__ = ["VERSION"]
