"""A rules file that says a key twice: the reviewer reads one value, Claros enforces the
other (THREATS.md, 1: the agent writes files in the repository, rules files among them;
an admin reviews the change and runs ``claros rules push``).

``yaml.safe_load`` and ``json.loads`` keep the last of two equal keys without a word. An
agent asked to add a rule writes ``response: ask`` where the reviewer looks, and a second
``response: allow`` (or ``when: 'false'``, ``mode: shadow``) lower down; ``claros rules
push`` saved the last one, exit 0, and the rule never asked. The guard refuses a message
with a key twice for the same reason (``claros_guard.shape``: "readers disagree on which
one counts"); pushing such a file now fails (exit 2, as a file that is not YAML does),
naming the key and where it is, and nothing in the file is sent.
"""

# ruff: noqa: F811

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from html import unescape
from pathlib import Path

import httpx
import pytest

from claros.local import LocalServer
from tests.api.conftest import Keys, bearer, put_rule
from tests.api.test_rules_push import push
from tests.web.conftest import Browserish, sign_in  # noqa: F401 - a fixture
from tests.web.test_rules_forms import EDIT, _once

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

RULES_YAML = """\
rules:
  - id: other
    workflow_id: refunds
    app: shop
    tools: [refund_create]
    title: Another rule, fine
    response: nudge
  - id: refund-half
    workflow_id: refunds
    app: shop
    tools: [refund_create]
    title: Refunds over half the order total need the owner's approval
    when: amount > order_total / 2
    response: ask
    owners: [dana@acme.test]
    message: Refund is over half of the order
    response: allow
"""

RULES_JSON = """[
 {"id": "other", "workflow_id": "refunds", "app": "shop", "tools": ["refund_create"],
  "title": "Another rule, fine", "response": "nudge"},
 {"id": "refund-half", "workflow_id": "refunds", "app": "shop", "tools": ["refund_create"],
  "title": "Refunds over half", "when": "amount > order_total / 2", "response": "ask",
  "when": "false"}
]"""


@pytest.mark.parametrize(("name", "text"), [("rules.yaml", RULES_YAML), ("rules.json", RULES_JSON)])
def test_a_rules_file_with_a_key_twice_is_not_pushed(
    server: LocalServer, keys: Keys, tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    done = push(server, keys.admin, str(path))
    with httpx.Client(base_url=server.url) as http:
        saved = http.get("/api/rules", headers=bearer(keys.admin)).json()["rules"]
    assert [(r["id"], r["rule"]["response"], r["rule"].get("when")) for r in saved] == [], saved
    assert done.returncode == 2, (done.stdout, done.stderr)  # a file problem, as for bad YAML
    key = "response" if name.endswith(".yaml") else "when"
    assert f"the key {key!r} twice" in done.stderr, done.stderr


def test_a_mappings_file_with_a_key_twice_is_not_pushed(
    server: LocalServer, keys: Keys, tmp_path: Path
) -> None:
    path = tmp_path / "mappings.json"
    path.write_text(
        json.dumps([{"app": "shop", "tool": "refund_create"}])[:-2] + ', "tool": "order_cancel"}]'
    )
    env = {**os.environ, "CLAROS_URL": server.url, "CLAROS_KEY": keys.admin}
    done = subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "mappings", "push", str(path)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)  # a file problem, as for bad YAML
    assert "the key 'tool' twice" in done.stderr, done.stderr


def test_yaml_merge_keys_are_not_a_key_twice(
    server: LocalServer, keys: Keys, tmp_path: Path
) -> None:
    """A merge (``<<: *base``) with a key of its own that overrides the merged one is
    YAML's way of sharing fields, not a key said twice."""
    path = tmp_path / "rules.yaml"
    path.write_text(
        "base: &base {workflow_id: refunds, app: shop, tools: [refund_create], response: nudge}\n"
        "rules:\n"
        "  - {<<: *base, id: a, title: A, response: stop}\n"
    )
    done = push(server, keys.admin, str(path))
    assert done.returncode == 0, done.stderr
    with httpx.Client(base_url=server.url) as http:
        saved = http.get("/api/rules/a", headers=bearer(keys.admin)).json()
    assert saved["rule"]["response"] == "stop"


def test_the_rules_page_editor_refuses_a_key_twice(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    """The same text pasted into the Rules page's editor (an admin copying the reviewed
    file) was saved with its last value too."""
    put_rule(http, keys.admin)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    text = (
        "id: refund-half\nworkflow_id: refunds\napp: shop\ntools: [refund_create]\n"
        "title: Refunds over half\nwhen: amount > order_total / 2\nresponse: ask\n"
        "owners: [dana@acme.test]\nresponse: allow\n"
    )
    sent = admin.post_form(EDIT, {"text": text, "once": _once(page, EDIT)})
    assert "twice" in unescape(sent.text), sent.text[:2000]
    saved = http.get("/api/rules/refund-half", headers=bearer(keys.admin)).json()
    assert (saved["version"], saved["rule"]["response"]) == (1, "ask"), saved


def test_a_rules_file_that_lists_a_rule_twice_is_not_pushed(
    server: LocalServer, keys: Keys, tmp_path: Path
) -> None:
    """The same at the list's level: two entries with one id. Each was pushed in turn, so
    the second (``response: allow``, further down the file) replaced the first as a new
    version."""
    first = {"id": "refund-half", "workflow_id": "refunds", "app": "shop",
             "tools": ["refund_create"], "title": "Refunds over half", "response": "ask",
             "when": "amount > order_total / 2"}  # fmt: skip
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([first, {"id": "other", **{k: v for k, v in first.items()
                                                          if k != "id"}},
                                {**first, "response": "allow"}]))  # fmt: skip
    done = push(server, keys.admin, str(path))
    with httpx.Client(base_url=server.url) as http:
        saved = http.get("/api/rules", headers=bearer(keys.admin)).json()["rules"]
    assert [(r["id"], r["version"], r["rule"]["response"]) for r in saved] == [], saved
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "refund-half" in done.stderr and "twice" in done.stderr, done.stderr
