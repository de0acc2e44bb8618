"""``claros rules push FILE`` and ``claros mappings push FILE``: send rules or mappings
written in YAML or JSON to Claros.

The file holds one rule, a list of rules, or ``{"rules": [...]}``. Each rule is sent as
it is; Claros validates it, makes a new version only when it changed, and says why it
refused one. Exit 0 when every rule landed, 1 when Claros refused any, 2 on usage, file
or connection errors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from claros_guard.api import segment
from claros_guard.client import ApiError, Client, ClientError
from claros_guard.files import FileProblem, parse_json, parse_yaml, plain_json, read_text

__all__ = ["load_items", "push_mappings", "push_rules"]

# (what to call it, where to PUT it, the body)
Sent = tuple[str, str, dict[str, Any]]


def load_items(path: str, plural: str) -> list[dict[str, Any]]:
    parse = parse_json if Path(path).suffix == ".json" else parse_yaml
    try:
        # A key said twice: the file's reviewer may read one, Claros would save the other.
        data = plain_json(parse(read_text(path), path, unique_keys=True), path)
    except FileProblem as exc:
        raise ClientError(str(exc)) from None
    if isinstance(data, dict) and plural in data:
        data = data[plural]
    items = data if isinstance(data, list) else [data]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ClientError(f"{path}: item {i + 1} is not an object")
    return items


def _push(
    client: Client, items: list[dict[str, Any]], send: Callable[[dict[str, Any]], Sent]
) -> int:
    """PUT each item; print OK or FAIL (with Claros's reason and the place) for each."""
    failed = 0
    for i, item in enumerate(items, 1):
        try:
            name, path, body = send(item)
        except ValueError as exc:
            print(f"FAIL: item {i}: {exc}", file=sys.stderr)
            failed += 1
            continue
        try:
            state = client.json("PUT", path, json=body)
        except ApiError as exc:
            print(f"FAIL: {name}: {exc.message}", file=sys.stderr)
            failed += 1
            continue
        if not (
            isinstance(state, dict)
            and isinstance(state.get("version"), int)
            and isinstance(state.get("hash"), str)
        ):  # another server at that URL: stop before sending the rest
            raise client.unlike(f"PUT {path} gave no version", state)
        what = "unchanged" if not state.get("changed") else (
            "created" if state["version"] == 1 else "new version")  # fmt: skip
        print(f"OK: {name} v{state['version']} {what} ({state['hash'][:12]})")
        _print_warnings(name, state.get("warnings"))
    return 1 if failed else 0


def _print_warnings(name: str, warnings: Any) -> None:
    """Claros's warnings about a saved item (a rule reading a field nothing provides): on
    stderr, after its OK line. A warning is not a failure: the exit code stays 0."""
    if not isinstance(warnings, list):
        return
    for warning in warnings[:100]:
        print(f"WARNING: {name}: {str(warning)[:500]}", file=sys.stderr)


def push_rules(client: Client, path: str, made_by: str) -> int:
    def send(rule: dict[str, Any]) -> Sent:
        rule_id = rule.get("id")
        if not isinstance(rule_id, str) or not rule_id:
            raise ValueError("the rule has no id")
        return rule_id, f"/api/rules/{segment(rule_id)}", {"rule": rule, "made_by": made_by}

    items = load_items(path, "rules")
    _once_each(path, items, lambda rule: rule.get("id"), "rule")
    return _push(client, items, send)


def _once_each(
    path: str, items: list[dict[str, Any]], name: Callable[[dict[str, Any]], Any], what: str
) -> None:
    """Refuse a file that lists one rule (or mapping) twice: each is pushed in turn, so
    the later one, further down the file, would replace the one its reviewer read as a
    new version (tests/security/test_rules_file_says_a_key_twice.py)."""
    seen: set[str] = set()
    for item in items:
        key = name(item)
        if not isinstance(key, str) or not key:
            continue  # reported as that item's FAIL
        if key in seen:
            raise ClientError(
                f"{path} lists the {what} {key} twice: each would be pushed in turn, the "
                "later replacing the earlier, so nothing in it is sent"
            )
        seen.add(key)


def push_mappings(client: Client, path: str) -> int:
    def send(mapping: dict[str, Any]) -> Sent:
        app, tool = mapping.get("app"), mapping.get("tool")
        if not isinstance(app, str) or not isinstance(tool, str):
            raise ValueError("the mapping needs app and tool")
        # One segment each: an app or tool may be named team/shop or a:b.
        path = f"/api/mappings/{segment(app)}/{segment(tool)}"
        # A file from `claros mappings propose` names its proposal: the version then
        # records that it was proposed (and by which proposer).
        body: dict[str, Any] = {"mapping": {k: v for k, v in mapping.items() if k != "proposal"}}
        if mapping.get("proposal") is not None:
            body["proposal"] = mapping["proposal"]
        return f"{app} {tool}", path, body

    items = load_items(path, "mappings")

    def named(mapping: dict[str, Any]) -> Any:
        app, tool = mapping.get("app"), mapping.get("tool")
        return f"{app} {tool}" if isinstance(app, str) and isinstance(tool, str) else None

    _once_each(path, items, named, "mapping")
    return _push(client, items, send)
