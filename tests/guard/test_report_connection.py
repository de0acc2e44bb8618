"""The guard's checks and its outcome reports ride one open keep-alive connection to Claros
(one HTTP client per guard process): a report costs no new connection and no handshake
on the agent's path."""

from __future__ import annotations

import pytest

from claros_guard.api import HttpClarosApi, outcome_report
from tests.guard.conftest import Workspace

pytestmark = pytest.mark.anyio


async def test_checks_and_reports_share_one_connection(
    workspace: Workspace, opened: list[object]
) -> None:
    api = HttpClarosApi(workspace.claros.url, workspace.agent)
    try:
        for n in range(3):
            body = {"app": "shop", "tool": "refund_create", "arguments": {"amount": n + 1},
                    "agent": {"name": "test-agent", "call_id": f"call-{n}"}}  # fmt: skip
            answer = await api.check(body)
            assert answer["result"] == "allow"
            await api.send_report(outcome_report(answer["check_id"], "ok", None, "outcome"))
    finally:
        await api.aclose()
    assert len(opened) == 1, opened
    outcomes = workspace.records("outcome")
    assert len(outcomes) == 3
