"""``claros rules push FILE`` and ``claros mappings push FILE``: send rules or mappings
written in YAML or JSON to Claros.

The file holds one rule, a list of rules, or ``{"rules": [...]}``. Each rule is sent as
it is; Claros validates it, makes a new version only when it changed, and says why it
refused one. Exit 0 when every rule landed, 1 when Claros refused any, 2 on usage, file
or connection errors.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from claros_guard.client import ApiError, Client, ClientError

__all__ = ["load_items", "push_mappings", "push_rules"]


def load_items(path: str, plural: str) -> list[dict[str, Any]]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ClientError(f"{path} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: "
                          f"{exc}") from exc  # fmt: skip
    if isinstance(data, dict) and plural in data:
        data = data[plural]
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ClientError(f"{path}: item {i + 1} is not an object")
    return items


def push_rules(client: Client, path: str, made_by: str) -> int:
    rules = load_items(path, "rules")
    failed = 0
    for i, rule in enumerate(rules, 1):
        rule_id = rule.get("id")
        if not isinstance(rule_id, str) or not rule_id:
            print(f"FAIL: rule {i}: it has no id", file=sys.stderr)
            failed += 1
            continue
        try:
            state = client.json("PUT", f"/api/rules/{rule_id}",
                                json={"rule": rule, "made_by": made_by})  # fmt: skip
        except ApiError as exc:
            where = "; ".join(f"{d['field']}: {d['problem']}" for d in exc.details or [])
            print(f"FAIL: {rule_id}: {exc.message}" + (f" ({where})" if where else ""),
                  file=sys.stderr)  # fmt: skip
            failed += 1
            continue
        what = "unchanged" if not state.get("changed") else (
            "created" if state["version"] == 1 else "new version")  # fmt: skip
        print(f"OK: {rule_id} v{state['version']} {what} ({state['hash'][:12]})")
    return 1 if failed else 0


def push_mappings(client: Client, path: str) -> int:
    mappings = load_items(path, "mappings")
    failed = 0
    for i, mapping in enumerate(mappings, 1):
        app, tool = mapping.get("app"), mapping.get("tool")
        if not isinstance(app, str) or not isinstance(tool, str):
            print(f"FAIL: mapping {i}: it needs app and tool", file=sys.stderr)
            failed += 1
            continue
        try:
            state = client.json("PUT", f"/api/mappings/{app}/{tool}", json={"mapping": mapping})
        except ApiError as exc:
            where = "; ".join(f"{d['field']}: {d['problem']}" for d in exc.details or [])
            print(f"FAIL: {app} {tool}: {exc.message}" + (f" ({where})" if where else ""),
                  file=sys.stderr)  # fmt: skip
            failed += 1
            continue
        what = "unchanged" if not state.get("changed") else (
            "created" if state["version"] == 1 else "new version")  # fmt: skip
        print(f"OK: {app} {tool} v{state['version']} {what}")
    return 1 if failed else 0
