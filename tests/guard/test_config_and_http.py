"""One process wrapping several servers (``--config``), and a Streamable HTTP server."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from claros_guard.config import load_config
from claros_guard.errors import ConfigError
from tests.guard.conftest import EXAMPLES, Workspace, example
from tests.guard.test_examples import text, tools_called, wait_registered
from tests.guard.test_peers import CREDIT_MAPPING, CREDIT_RULE

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_one_process_wraps_several_servers(workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    config = tmp_path / "guards.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "agent": "accounting",
                "servers": {
                    "accounting": {"command": example("accounting")},
                    "shop": {"command": example("shop"), "read": ["order_read"]},
                },
            }
        )
    )
    argv = ["-m", "claros_guard.cli", "guard", "--config", str(config)]
    params = StdioServerParameters(command=sys.executable, args=argv, env=ws.env)
    async with Client(params) as agent:
        assert {t.name for t in (await agent.list_tools()).tools} >= {"credit_note_create"}
        await wait_registered(ws, "shop")  # registered, though no agent talks to it
        await wait_registered(ws, "accounting")
        ws.push(rules=[CREDIT_RULE], mappings=[CREDIT_MAPPING])
        over = await agent.call_tool("credit_note_create", {"order": "1188", "amount": 100})
        within = await agent.call_tool("credit_note_create", {"order": "1187", "amount": 20})
    assert over.is_error and "credit-over-order" in text(over)
    assert not within.is_error
    assert tools_called(ws, "shop") == ["order_read", "order_read"]


async def test_a_streamable_http_server(workspace: Workspace) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "shop_server.py"), "--http", str(port)],
        env=workspace.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(20):
            while True:
                try:
                    probe = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    await anyio.sleep(0.05)
                else:
                    await probe.aclose()
                    break
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(workspace.guard("shop", [], "--upstream-url", url)) as agent:
            read = await agent.call_tool("order_read", {"id": "1187"})
            wrote = await agent.call_tool("refund_create", {"order": "1188", "amount": 10})
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert not read.is_error and not wrote.is_error
    assert [c["result"] for c in workspace.records("check")] == ["allow"]
    assert tools_called(workspace) == ["order_read", "refund_create"]


def test_config_errors_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers:\n  shop: {command: [python], url: http://x}\nagent: crm\n")
    with pytest.raises(
        ConfigError, match="servers.shop: Value error, give the server a command or a url"
    ):
        load_config(str(bad))
    bad.write_text("servers: [oops\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "missing.yaml"))
    bad.write_text("servers:\n  shop: {command: [python]}\nagent: crm\n")
    with pytest.raises(ConfigError, match="agent names 'crm', which is not among the servers"):
        load_config(str(bad))
