"""The npm reference servers behind the guard: everything they offer passes through
unchanged, and their writes are checked. The same SDK client talks to the server directly
and through the guard, and the two must see the same thing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    LoggingMessageNotificationParams,
    PromptReference,
    Root,
    TextContent,
)

from tests.guard.conftest import EVERYTHING, FILESYSTEM, Workspace, requires_npx

pytestmark = [pytest.mark.anyio, requires_npx, pytest.mark.usefixtures("npm_servers")]


class Agent:
    """What an agent's client offers and what it saw."""

    def __init__(self) -> None:
        self.sampled: list[CreateMessageRequestParams] = []
        self.logs: list[LoggingMessageNotificationParams] = []
        self.notices: list[str] = []
        self.updated = anyio.Event()
        self.logged = anyio.Event()

    async def sampling(
        self, ctx: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        self.sampled.append(params)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text="42"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def elicitation(
        self, ctx: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "Ada Lovelace"})

    async def roots(self, ctx: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file:///srv/agent-root", name="agent root")])

    async def logging(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self.logged.set()

    async def message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if isinstance(method, str):
            self.notices.append(method)
            if method == "notifications/resources/updated":
                self.updated.set()

    def client(self, params: StdioServerParameters) -> Client:
        return Client(
            params,
            sampling_callback=self.sampling,
            list_roots_callback=self.roots,
            elicitation_callback=self.elicitation,
            logging_callback=self.logging,
            message_handler=self.message,
            read_timeout_seconds=60,
        )


def dump(value: Any) -> Any:
    return value.model_dump(mode="json", exclude_none=True)


async def test_server_everything_through_the_guard_is_the_server_itself(ws: Workspace) -> None:
    direct_agent, agent = Agent(), Agent()
    direct_params = StdioServerParameters(command=EVERYTHING[0], args=EVERYTHING[1:], env=ws.env)
    async with (
        direct_agent.client(direct_params) as direct,
        agent.client(ws.guard("everything", EVERYTHING)) as guarded,
    ):
        # The same server, as far as the client can tell.
        assert guarded.protocol_version == direct.protocol_version == "2025-11-25"
        assert dump(guarded.server_info) == dump(direct.server_info)
        # ... but for tasks, which the guard does not relay (it refuses a call run as a
        # task: tests/security/test_agent_runs_the_write_as_a_task.py).
        capabilities = dump(direct.server_capabilities)
        assert capabilities.pop("tasks", None) is not None  # the server runs calls as tasks
        assert dump(guarded.server_capabilities) == capabilities
        assert guarded.instructions == direct.instructions
        with anyio.fail_after(10):  # the conditional tools come after initialized
            while "trigger-sampling-request" not in {
                t.name for t in (await guarded.list_tools()).tools
            }:
                await anyio.sleep(0.05)
        for listing in ("list_tools", "list_resources", "list_resource_templates", "list_prompts"):
            assert dump(await getattr(guarded, listing)()) == dump(await getattr(direct, listing)())

        # Tools: text, structured content, progress, errors.
        echo = await guarded.call_tool("echo", {"message": "hi"})
        assert dump(echo) == dump(await direct.call_tool("echo", {"message": "hi"}))
        weather = await guarded.call_tool("get-structured-content", {"location": "New York"})
        assert (
            weather.structured_content is not None and "temperature" in weather.structured_content
        )
        progress: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(done)

        slow = await guarded.call_tool(
            "trigger-long-running-operation",
            {"duration": 0.3, "steps": 3},
            progress_callback=on_progress,
        )
        assert not slow.is_error and progress == [1, 2, 3]
        bad = await guarded.call_tool("get-sum", {"a": "x"})
        assert dump(bad) == dump(await direct.call_tool("get-sum", {"a": "x"}))

        # Prompts, completions, resources.
        args_prompt = await guarded.get_prompt("args-prompt", {"city": "Paris"})
        assert dump(args_prompt) == dump(await direct.get_prompt("args-prompt", {"city": "Paris"}))
        ref = PromptReference(type="ref/prompt", name="completable-prompt")
        completed = await guarded.complete(ref, {"name": "department", "value": "E"})
        assert completed.completion.values and dump(completed) == dump(
            await direct.complete(ref, {"name": "department", "value": "E"})
        )
        resource = (await guarded.list_resources()).resources[0]
        assert dump(await guarded.read_resource(resource.uri)) == dump(
            await direct.read_resource(resource.uri)
        )

        # The server's requests to the client: sampling, elicitation, roots.
        sampled = await guarded.call_tool(
            "trigger-sampling-request", {"prompt": "six times seven", "maxTokens": 5}
        )
        assert "42" in str(dump(sampled)) and "six times seven" in str(dump(agent.sampled[0]))
        elicited = await guarded.call_tool("trigger-elicitation-request", {})
        assert "Ada Lovelace" in str(dump(elicited))
        roots = await guarded.call_tool("get-roots-list", {})
        assert "file:///srv/agent-root" in str(dump(roots))

        # Notifications: resource updates after a subscription, log messages at a level.
        with pytest.warns(MCPDeprecationWarning):
            await guarded.subscribe_resource(resource.uri)
        await guarded.call_tool("toggle-subscriber-updates", {})
        with pytest.warns(MCPDeprecationWarning):
            await guarded.set_logging_level("debug")
        await guarded.call_tool("toggle-simulated-logging", {})
        with anyio.fail_after(10):
            await agent.updated.wait()
            await agent.logged.wait()
    checked = {c["tool"] for c in ws.records("check")}
    assert {"toggle-subscriber-updates", "toggle-simulated-logging"} <= checked
    assert "echo" not in checked and "get-sum" not in checked  # reads by readOnlyHint


async def test_server_filesystem_reads_pass_and_writes_are_checked(
    ws: Workspace, tmp_path: Path
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "hello.txt").write_text("hello\n")
    ws.push(
        rules=[
            {
                "id": "no-secrets",
                "app": "files",
                "tools": ["write_file"],
                "when": "'secret' in path",
                "response": "stop",
                "message": "Secrets stay out of the repo.",
            }
        ]
    )
    async with Client(ws.guard("files", [*FILESYSTEM, str(root)])) as agent:
        read = await agent.call_tool("read_text_file", {"path": str(root / "hello.txt")})
        assert "hello" in str(dump(read))
        listed = await agent.call_tool("list_directory", {"path": str(root)})
        assert "hello.txt" in str(dump(listed))
        wrote = await agent.call_tool(
            "write_file", {"path": str(root / "notes.txt"), "content": "ok\n"}
        )
        assert not wrote.is_error
        blocked = await agent.call_tool(
            "write_file", {"path": str(root / "secret.txt"), "content": "hunter2\n"}
        )
        assert blocked.is_error and "no-secrets" in str(dump(blocked))
        with anyio.fail_after(10):
            while not ws.records("outcome"):
                await anyio.sleep(0.05)
    assert (root / "notes.txt").read_text() == "ok\n"
    assert not (root / "secret.txt").exists()
    assert [(c["tool"], c["result"]) for c in ws.records("check")] == [
        ("write_file", "allow"),
        ("write_file", "stop"),
    ]
    assert [o["status"] for o in ws.records("outcome")] == ["ok"]


@pytest.fixture
def ws(workspace: Workspace) -> Workspace:
    return workspace
