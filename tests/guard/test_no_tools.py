"""A server without a ``tools`` capability (resources and prompts only) is wrapped
transparently: the guard starts, relays everything, and the agent sees what it would see
without the guard, ``tools/list``'s own "Method not found" included."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.guard.conftest import Workspace

pytestmark = pytest.mark.anyio

RESOURCES = [
    sys.executable,
    str(Path(__file__).resolve().parent / "servers" / "resources_server.py"),
]


async def session(agent: Client) -> dict[str, Any]:
    """What the agent sees of the server, with the proxy's own envelope left out."""
    seen: dict[str, Any] = {"capabilities": agent.server_capabilities}
    seen["resources"] = (await agent.list_resources()).resources
    seen["read"] = (await agent.read_resource("note://welcome")).contents
    seen["prompts"] = (await agent.list_prompts()).prompts
    seen["prompt"] = (await agent.get_prompt("greet")).messages
    with pytest.raises(MCPError) as caught:
        await agent.list_tools()
    seen["tools/list"] = (caught.value.error.code, caught.value.error.message)
    return seen


async def test_a_server_without_tools_is_wrapped_transparently(workspace: Workspace) -> None:
    async with Client(StdioServerParameters(command=RESOURCES[0], args=RESOURCES[1:])) as direct:
        bare = await session(direct)
    async with Client(workspace.guard("notes", RESOURCES)) as agent:
        guarded = await session(agent)
        assert guarded["read"][0].text == "hello from the resources server"
    assert guarded == bare
    assert bare["tools/list"][0] == -32601
