"""The MCP session layer alone, in process: the SDK's ``ClientSession`` on memory streams
in front of ``AgentSession``, a fake Claros behind it, the lab server as the upstream."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.message import SessionMessage

from claros_guard.app import AppSettings, GuardedApp, GuardSettings
from claros_guard.peers import PeerClient
from claros_guard.reporter import Reporter
from claros_guard.session import AgentSession
from claros_guard.transport import UpstreamSpec
from tests.guard.conftest import LAB
from tests.guard.test_policy import FakeClaros

pytestmark = pytest.mark.anyio


async def test_agent_session_checks_writes_and_relays_the_rest() -> None:
    stop = {
        "result": "stop",
        "check_id": "chk_9",
        "messages": [{"rule_id": "no-notes", "message": "No notes today."}],
    }
    claros = FakeClaros([stop, {"result": "allow", "check_id": "chk_10"}])
    spec = UpstreamSpec(command=sys.executable, args=(str(LAB),))
    peers = PeerClient(Path(tempfile.mkdtemp(prefix="cs")), "ck_k")
    reporter = Reporter(claros, idle=0.0)
    app = GuardedApp(
        AppSettings("lab", spec), GuardSettings(), api=claros, peers=peers, reporter=reporter
    )
    to_guard = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_agent = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    async with anyio.create_task_group() as tg:
        await tg.start(reporter.run)
        await tg.start(app.run)
        tg.start_soon(AgentSession(app, to_guard[1], to_agent[0]).run)  # type: ignore[arg-type]
        async with ClientSession(to_agent[1], to_guard[0]) as client:
            init = await client.initialize()
            assert init.server_info.name == "lab"
            read = await client.call_tool("thing_read", {"id": "T-1"})
            stopped = await client.call_tool("note_write", {"text": "a"})
            allowed = await client.call_tool("note_write", {"text": "b"})
            with anyio.fail_after(5):
                while not claros.reports:
                    await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert not read.is_error
    assert stopped.is_error and "no-notes: No notes today" in stopped.content[0].text  # type: ignore[union-attr]
    assert not allowed.is_error
    sent: list[dict[str, Any]] = claros.checks
    assert [c["arguments"] for c in sent] == [{"text": "a"}, {"text": "b"}]
    assert sent[0]["agent"]["name"] == "mcp" and sent[0]["agent"]["via"]["guard"] == "claros-guard"
    assert [(r.route, r.body, r.key) for r in claros.reports] == [
        (
            "/v1/check/chk_10/outcome",
            {"status": "ok", "summary": '{"ok": true, "tool": "note_write"}'},
            "outcome-chk_10",
        )
    ]
