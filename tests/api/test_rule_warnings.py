"""Saving a rule warns of every field its ``when`` reads that neither the tool's registered
input schema nor its mapping provides (``PUT``/``POST /api/rules``, ``claros rules push``):
a warning, never a refusal."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml

from claros.local import LocalServer
from tests.api.conftest import Keys, bearer, put_rule, rule
from tests.api.test_rules_push import push

SCHEMA = {"type": "object", "properties": {"order": {"type": "string"},
                                           "amount": {"type": "number"}}}  # fmt: skip


def _register(http: httpx.Client, key: str, schema: dict[str, object] | None = SCHEMA) -> None:
    write: dict[str, object] = {"name": "refund_create", "read": False}
    if schema is not None:
        write["input_schema"] = schema
    tools = [write, {"name": "order_read", "read": True}]
    answer = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(key))
    assert answer.status_code == 200, answer.text


def test_a_field_nothing_provides_is_warned(http: httpx.Client, keys: Keys) -> None:
    _register(http, keys.agent)
    state = put_rule(http, keys.admin, when="amount > order_total / 2")
    [warning] = state["warnings"]
    assert "refund_create: the rule reads 'order_total'" in warning
    assert "not an argument in the input schema shop registered" in warning
    assert state["version"] == 1  # saved all the same


def test_arguments_and_mapped_facts_are_not_warned(http: httpx.Client, keys: Keys) -> None:
    _register(http, keys.agent)
    mapping = {"app": "shop", "tool": "refund_create",
               "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "rec"},
               "derived": {"share": "amount / rec.total"},
               "lookups": [{"key": "order", "tool": "order_read", "arguments": {"id": "$"},
                            "pick": "total", "var": "order_total"}]}  # fmt: skip
    saved = http.put("/api/mappings/shop/refund_create", json={"mapping": mapping},
                     headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text
    state = put_rule(
        http, keys.admin, when="amount > order_total / 2 or share > 0.5 or rec.total < 1 or x > 1"
    )
    assert [w.split(":")[0] for w in state["warnings"]] == ["refund_create"]
    assert "reads 'x'" in state["warnings"][0]
    ok = put_rule(http, keys.admin, id="fine", when="amount > order_total / 2 and share > 0.5")
    assert "warnings" not in ok


def test_no_schema_registered_is_said(http: httpx.Client, keys: Keys) -> None:
    state = put_rule(http, keys.admin, when="amount > 5")
    assert "shop registered no input schema for refund_create" in state["warnings"][0]
    body = {"rule": rule(id="new", when="amount > 5"), "made_by": "manual"}
    created = http.post("/api/rules", json=body, headers=bearer(keys.admin))
    assert created.status_code == 201 and created.json()["warnings"]


def test_a_schema_that_takes_anything_or_a_top_level_fetch_warns_nothing(
    http: httpx.Client, keys: Keys
) -> None:
    _register(http, keys.agent, {"type": "object", "additionalProperties": True})
    assert "warnings" not in put_rule(http, keys.admin, when="anything > 5")
    _register(http, keys.agent)
    mapping = {"app": "shop", "tool": "refund_create",
               "fetch": {"tool": "order_read", "arguments": {"id": "$order"}}}  # fmt: skip
    saved = http.put("/api/mappings/shop/refund_create", json={"mapping": mapping},
                     headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text
    assert "warnings" not in put_rule(http, keys.admin, id="x", when="anything > 5")


def test_claude_code_rules_are_warned_of_shell_tools_they_leave_out(
    http: httpx.Client, keys: Keys
) -> None:
    """Claude Code's own tools register no schema (its hooks send its input whole), so
    nothing is said of their fields; a rule naming some of its shell tools but not all is
    warned: the agent picks the tool, and the same command run with another passes it."""
    bash = put_rule(http, keys.admin, id="cc-bash", app="claude-code", tools=["Bash"],
                    when="'--force' in command")  # fmt: skip
    [warning] = bash["warnings"]
    assert warning.startswith("Bash: the rule does not list PowerShell or Monitor;")
    two = put_rule(http, keys.admin, id="cc-two", app="claude-code", tools=["Bash", "Monitor"],
                   when=None)  # fmt: skip
    assert [w.split(";")[0] for w in two["warnings"]] == [
        "Bash, Monitor: the rule does not list PowerShell"
    ]
    shells = put_rule(http, keys.admin, id="cc-all", app="claude-code",
                      tools=["Bash", "PowerShell", "Monitor"],
                      when="'--force' in command")  # fmt: skip
    assert "warnings" not in shells
    edits = put_rule(http, keys.admin, id="cc-edit", app="claude-code", tools=["Edit", "Write"],
                     when="'.env' in file_path")  # fmt: skip
    assert "warnings" not in edits


def test_a_rule_without_when_warns_nothing(http: httpx.Client, keys: Keys) -> None:
    assert "warnings" not in put_rule(http, keys.admin, when=None)


def test_a_bad_input_schema_is_refused(http: httpx.Client, keys: Keys) -> None:
    tools = [{"name": "refund_create", "read": False, "input_schema": "not an object"}]
    answer = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent))
    assert answer.status_code == 400 and "input_schema" in answer.text


def test_push_prints_the_warnings(
    server: LocalServer, http: httpx.Client, keys: Keys, tmp_path: Path
) -> None:
    _register(http, keys.agent)
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"rules": [rule(when="amount > order_totl / 2")]}))
    done = push(server, keys.admin, str(path))
    assert done.returncode == 0, done.stderr  # a warning is not a failure
    assert "OK: refund-half v1 created" in done.stdout
    assert "WARNING: refund-half: refund_create: the rule reads 'order_totl'" in done.stderr
