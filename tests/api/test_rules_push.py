"""``claros rules push FILE`` as a real subprocess against a real local server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from claros.local import LocalServer
from tests.api.conftest import Keys, rule

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def push(server: LocalServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAROS_URL": server.url, "CLAROS_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "rules", "push", *args],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


def test_push_yaml_then_unchanged_then_edit(
    server: LocalServer, keys: Keys, tmp_path: Path
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"rules": [rule(), rule(id="other", response="nudge")]}))
    first = push(server, keys.admin, str(path), "--made-by", "expert")
    assert first.returncode == 0, first.stderr
    assert "OK: refund-half v1 created" in first.stdout and "OK: other v1 created" in first.stdout
    again = push(server, keys.admin, str(path))
    assert again.stdout.count("unchanged") == 2
    path.write_text(yaml.safe_dump([rule(message="new words")]))
    edited = push(server, keys.admin, str(path))
    assert "OK: refund-half v2 new version" in edited.stdout


def test_push_json_reports_refusals(server: LocalServer, keys: Keys, tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([rule(), rule(id="bad", when="amount >")]))
    done = push(server, keys.admin, str(path))
    assert done.returncode == 1
    assert "OK: refund-half v1 created" in done.stdout
    assert "FAIL: bad:" in done.stderr and "rule.when" in done.stderr


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [(None, ".yaml", "cannot read"), ("rules: [", ".yaml", "not valid YAML"),
     ("{", ".json", "not valid JSON"), ("[1]", ".json", "not an object")],
)  # fmt: skip
def test_push_file_errors(
    server: LocalServer, keys: Keys, tmp_path: Path, content: str | None, suffix: str,
    message: str,
) -> None:  # fmt: skip
    path = tmp_path / f"rules{suffix}"
    if content is not None:
        path.write_text(content)
    done = push(server, keys.admin, str(path))
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr


def test_push_needs_an_admin_key_and_a_server(
    server: LocalServer, keys: Keys, tmp_path: Path
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule()))
    refused = push(server, keys.agent, str(path))
    assert refused.returncode == 1 and "cannot do this" in refused.stderr
    env = {**os.environ, "CLAROS_URL": "http://127.0.0.1:9", "CLAROS_KEY": keys.admin}
    down = subprocess.run([sys.executable, "-m", "claros_guard.cli", "rules", "push", str(path)],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert down.returncode == 2 and "cannot reach Claros" in down.stderr


def push_mappings(server: LocalServer, key: str, path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAROS_URL": server.url, "CLAROS_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "mappings", "push", str(path)],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


def test_push_mappings(server: LocalServer, keys: Keys, tmp_path: Path) -> None:
    import httpx

    tools = {"tools": [{"name": "order_read", "read": True}, {"name": "refund_create",
                                                               "read": False}]}  # fmt: skip
    httpx.post(f"{server.url}/v1/apps/shop/tools", json=tools,
               headers={"Authorization": f"Bearer {keys.agent}"}).raise_for_status()  # fmt: skip
    fetch = {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"}
    good = {"app": "shop", "tool": "refund_create", "fetch": fetch}
    bad = {"app": "shop", "tool": "order_cancel",
           "fetch": {"tool": "refund_create", "arguments": {"id": "$order"}}}  # fmt: skip
    path = tmp_path / "mappings.yaml"
    path.write_text(yaml.safe_dump({"mappings": [good, bad]}))
    done = push_mappings(server, keys.admin, path)
    assert done.returncode == 1
    assert "OK: shop refund_create v1 created" in done.stdout
    assert "FAIL: shop order_cancel: mapping.fetch.tool: 'refund_create' of shop is not a read" \
        in done.stderr  # fmt: skip
    path.write_text(yaml.safe_dump([good]))
    again = push_mappings(server, keys.admin, path)
    assert again.returncode == 0 and "unchanged" in again.stdout
    path.write_text(yaml.safe_dump([{"tool": "x"}]))
    missing = push_mappings(server, keys.admin, path)
    assert missing.returncode == 1 and "the mapping needs app and tool" in missing.stderr
