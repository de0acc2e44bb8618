"""Fixture apps for the mapper (tests/data/mapper/*.yaml): tools written compactly, turned
into registration entries of the shape guards send (input and output schema outlines)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parents[1] / "data" / "mapper"
APPS = sorted(p.stem for p in DATA.glob("*.yaml"))


def _fields(spec: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for name, kind in spec.items():
        if name.endswith("[]"):
            row = {"type": "object", "properties": _fields(kind)}
            props[name[:-2]] = {"type": "array", "items": row}
        else:
            props[name] = {"type": kind}
    return props


def registration(tool: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": tool["name"], "read": bool(tool.get("read")),
                             "description": tool.get("description", "")}  # fmt: skip
    schema: dict[str, Any] = {"type": "object", "properties": _fields(tool.get("inputs", {}))}
    if tool.get("required"):
        schema["required"] = tool["required"]
    entry["input_schema"] = schema
    if "outputs" in tool:
        entry["output_schema"] = {"type": "object", "properties": _fields(tool["outputs"])}
    if "rows" in tool:
        rows = {"type": "array", "items": {"type": "object", "properties": _fields(tool["rows"])}}
        entry["output_schema"] = {"type": "object", "properties": {"result": rows}}
    return entry


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DATA / f"{name}.yaml").read_text())
    data["registrations"] = {
        app: [registration(t) for t in tools] for app, tools in data["apps"].items()
    }
    return data
