"""The example servers' tools as their guards register them: each server's tools/list
through the real MCP SDK client, turned into registration entries by the guard's own code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
from mcp import Client

from claros_guard.app import _schema_outline, output_outline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def _list(server: Any) -> list[dict[str, Any]]:
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    out = []
    for tool in tools:
        hint = tool.annotations.read_only_hint if tool.annotations else None
        entry: dict[str, Any] = {"name": tool.name, "read": bool(hint),
                                 "description": tool.description or ""}  # fmt: skip
        entry["input_schema"] = _schema_outline(tool.input_schema)
        output = output_outline(tool.output_schema)
        if output is not None:
            entry["output_schema"] = output
        out.append(entry)
    return out


def registrations() -> dict[str, list[dict[str, Any]]]:
    """{app: registered tools} for the shop and the accounting example servers."""
    out: dict[str, list[dict[str, Any]]] = {}
    for app in ("shop", "accounting"):
        server = _module(f"{app}_server").mcp
        out[app] = anyio.run(_list, server)
    return out
