"""Claude Code's hook lets a write through because another Claude Code session runs a
guard for a server of the same name (THREATS.md §1: no write runs unchecked).

``claros hook pre`` stays out of an MCP call ``mcp__shop__<tool>`` when the guard of app
``shop`` says (over its peer socket) that the agent it serves is ``claude-code``: that
guard checks the call, so the hook does not check it twice. But the hook only asked
whether *a* guard of ``shop`` serves *a* Claude Code, not whether that guard wraps the
connection this call goes over. A person with two sessions, one whose ``shop`` is wrapped
in a guard and one whose ``shop`` is not (another project's ``.mcp.json``, the hook
installed for the user), or a pipeline running several sessions: every write the second
session makes to its unguarded ``shop`` is waved through by the first session's guard,
checked by nobody.

Here "session A" is a separate process (an MCP client naming itself ``claude-code``) with
a guard of ``shop``; the hook runs for "session B", which is not A and not under it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.guard.conftest import Workspace, example
from tests.guard.test_examples import wait_registered
from tests.guard.test_hooks import decision, hook, pre

STOP_REFUNDS: dict[str, Any] = {
    "id": "no-refunds",
    "app": "shop",
    "tools": ["refund_create"],
    "when": "1 == 1",
    "response": "stop",
    "message": "No refunds today.",
}

# Session A: Claude Code (by its client name) with ``shop`` wrapped in a guard; it says
# "ready" once connected, and leaves when its stdin closes.
SESSION_A = textwrap.dedent(
    """
    import sys, anyio, json
    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    async def main():
        spec = json.loads(sys.argv[1])
        params = StdioServerParameters(command=spec["command"], args=spec["args"], env=spec["env"])
        claude = Implementation(name="claude-code", version="2.1.0")
        async with Client(params, client_info=claude):
            print("ready", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)

    anyio.run(main)
    """
)


@pytest.mark.anyio
async def test_a_guard_serving_another_claude_code_session_does_not_excuse_the_hook(
    workspace: Workspace,
) -> None:
    ws = workspace
    ws.push(rules=[STOP_REFUNDS])
    params = ws.guard("shop", example("shop"))
    spec = {"command": params.command, "args": list(params.args), "env": params.env}
    with subprocess.Popen(
        [sys.executable, "-c", SESSION_A, json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=ws.env,
        text=True,
    ) as session_a:
        assert session_a.stdin is not None and session_a.stdout is not None
        try:
            assert session_a.stdout.readline().strip() == "ready"
            await wait_registered(ws, "shop")
            # Session B's Claude Code calls its own, unguarded shop: only the hook checks.
            event = pre("mcp__shop__refund_create", {"order": "1", "amount": 9})
            answer = await hook(ws, "pre", event)
            verdict, reason, _ = decision(answer)
            assert verdict == "deny", f"waved through unchecked: {answer}"
            assert reason is not None and "no-refunds" in reason
        finally:
            session_a.stdin.close()
            session_a.wait(timeout=30)
