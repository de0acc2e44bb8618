"""The guard in front of the example servers, driven by the real MCP SDK client."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import CallToolResult

from tests.guard.conftest import Workspace, example, lab

pytestmark = pytest.mark.anyio

REFUND_MAPPING: dict[str, Any] = {
    "app": "shop",
    "tool": "refund_create",
    "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"},
    "derived": {"share": "amount / order.total"},
}
INVOICE_MAPPING: dict[str, Any] = {
    "app": "accounting",
    "tool": "invoice_submit",
    "fetch": {"tool": "invoice_read", "arguments": {"name": "$name"}, "into": ""},
    "derived": {"net": "grand_total - discount"},
    "lookups": [
        {
            "key": "items[].item_code",
            "tool": "item_read",
            "arguments": {"code": "$"},
            "pick": "item_group",
            "var": "item_groups",
            "context": ["item_name"],
        }
    ],
    "queries": [
        {
            "tool": "invoice_list",
            "arguments": {"supplier": "$supplier"},
            "where": {"supplier": "$supplier"},
            "op": "count",
            "var": "supplier_invoices",
        }
    ],
}


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def tools_called(ws: Workspace, app: str | None = None) -> list[str]:
    return [c["tool"] for c in ws.calls() if app is None or c["app"] == app]


async def wait_registered(ws: Workspace, app: str, tool: str | None = None) -> dict[str, Any]:
    """The app's registration, once Claros has it (and, if named, the tool)."""
    async with httpx.AsyncClient(base_url=ws.claros.url) as http:
        with anyio.fail_after(20):
            while True:
                answer = await http.get("/v1/apps", headers={"Authorization": f"Bearer {ws.agent}"})
                found = {a["app"]: a for a in answer.json()["apps"]}
                if app in found and (
                    tool is None or any(t["name"] == tool for t in found[app]["tools"])
                ):
                    return dict(found[app])
                await anyio.sleep(0.05)


async def test_reads_pass_writes_are_checked_and_their_outcome_reported(ws: Workspace) -> None:
    async with Client(ws.guard("shop", example("shop"))) as agent:
        registered = await wait_registered(ws, "shop")
        reads = {t["name"] for t in registered["tools"] if t["read"]}
        assert reads == {"order_read", "customer_read", "refund_list"}
        read = await agent.call_tool("order_read", {"id": "1187"})
        assert read.structured_content is not None and read.structured_content["total"] == 200
        assert ws.records("check") == []  # a read is never checked
        wrote = await agent.call_tool("refund_create", {"order": "1188", "amount": 10})
        assert not wrote.is_error and '"order": "1188"' in text(wrote)
        assert tools_called(ws) == ["order_read", "refund_create"]
        with anyio.fail_after(10):
            while not ws.records("outcome"):
                await anyio.sleep(0.05)
    (check,) = ws.records("check")
    assert check["tool"] == "refund_create" and check["result"] == "allow"
    agent_info = check["agent"]
    assert agent_info["name"] == "mcp" and agent_info["via"]["guard"] == "claros-guard"
    assert agent_info["session"].startswith("ses_") and agent_info["call_id"].startswith("call_")
    (outcome,) = ws.records("outcome")
    assert outcome["check_id"] == check["check_id"] and outcome["status"] == "ok"


async def test_a_stop_never_reaches_the_server(ws: Workspace) -> None:
    ws.push(
        rules=[
            {
                "id": "no-refunds",
                "app": "shop",
                "tools": ["refund_create"],
                "when": "amount > 0",
                "response": "stop",
                "message": "Refunds are paused.",
            }
        ]
    )
    async with Client(ws.guard("shop", example("shop"))) as agent:
        result = await agent.call_tool("refund_create", {"order": "1188", "amount": 10})
    assert result.is_error
    assert "no-refunds" in text(result) and "Refunds are paused" in text(result)
    assert "refund_create" not in tools_called(ws)
    assert [c["result"] for c in ws.records("check")] == ["stop"]
    assert ws.records("outcome") == []


async def test_a_nudge_runs_and_the_agent_reads_the_message(ws: Workspace) -> None:
    ws.push(
        rules=[
            {
                "id": "note-it",
                "app": "shop",
                "tools": ["refund_create"],
                "when": "amount > 5",
                "response": "nudge",
                "message": "Note the refund in the account.",
            }
        ]
    )
    async with Client(ws.guard("shop", example("shop"))) as agent:
        result = await agent.call_tool("refund_create", {"order": "1188", "amount": 10})
    assert not result.is_error
    assert result.content[-1].text == "Claros (note-it): Note the refund in the account."  # type: ignore[union-attr]
    assert result.structured_content is not None and result.structured_content["order"] == "1188"
    assert "refund_create" in tools_called(ws)


async def test_an_ask_waits_with_progress_and_runs_once_approved(ws: Workspace) -> None:
    ws.push(
        rules=[
            {
                "id": "big-share",
                "app": "shop",
                "tools": ["refund_create"],
                "when": "share > 0.5",
                "response": "ask",
                "owners": ["dana@example.com"],
                "message": "Over half the order.",
            }
        ],
        mappings=[],
    )
    progress: list[str] = []
    async with (
        Client(ws.guard("shop", example("shop"), "--ask-wait", "20")) as agent,
        httpx.AsyncClient(base_url=ws.claros.url) as http,
    ):
        await wait_registered(ws, "shop")
        ws.push(mappings=[REFUND_MAPPING])

        async def approve(done: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")
            if len(progress) == 1:
                ask_id = (message or "").rsplit("ask ", 1)[1].rstrip(")")
                answer = await http.post(
                    f"/api/asks/{ask_id}/answer",
                    json={"decision": "approve"},
                    headers={"Authorization": f"Bearer {ws.admin}"},
                )
                assert answer.status_code == 200, answer.text

        result = await agent.call_tool(
            "refund_create", {"order": "1187", "amount": 150}, progress_callback=approve
        )
    assert not result.is_error, text(result)
    assert progress and "Waiting for dana@example.com to approve" in progress[0]
    assert tools_called(ws, "shop").count("refund_create") == 1
    assert [c["result"] for c in ws.records("check")] == ["ask", "allow"]
    assert ws.records("check")[1]["approval"]["decided_by"] == "admin@example.com"


async def test_an_unanswered_ask_says_who_and_a_retry_uses_the_same_question(
    ws: Workspace,
) -> None:
    ws.push(
        rules=[
            {
                "id": "all-refunds",
                "app": "shop",
                "tools": ["refund_create"],
                "when": "amount > 0",
                "response": "ask",
                "owners": ["dana@example.com"],
            }
        ]
    )
    call = {"order": "1188", "amount": 10}
    async with Client(ws.guard("shop", example("shop"), "--ask-wait", "0.2")) as agent:
        first = await agent.call_tool("refund_create", call)
        assert first.is_error and "Waiting for approval" in text(first)
        assert "dana@example.com" in text(first) and "same arguments" in text(first)
        assert "refund_create" not in tools_called(ws)
        (ask,) = ws.records("check")
        with httpx.Client(base_url=ws.claros.url) as http:
            answer = http.post(
                f"/api/asks/{ask['ask_id']}/answer",
                json={"decision": "approve"},
                headers={"Authorization": f"Bearer {ws.admin}"},
            )
            assert answer.status_code == 200, answer.text
        second = await agent.call_tool("refund_create", call)
    assert not second.is_error, text(second)
    assert tools_called(ws).count("refund_create") == 1
    assert [c["result"] for c in ws.records("check")] == ["ask", "allow"]  # no second question


async def test_needs_are_read_on_the_server_and_lookups_cached(ws: Workspace) -> None:
    ws.push(
        rules=[
            {
                "id": "big-invoice",
                "app": "accounting",
                "tools": ["invoice_submit"],
                "when": "net > 10000",
                "response": "stop",
                "message": "Too big.",
            },
            {
                "id": "first",
                "app": "accounting",
                "tools": ["invoice_submit"],
                "when": "supplier_invoices <= 1",
                "response": "nudge",
                "message": "First invoice.",
            },
        ]
    )
    async with Client(ws.guard("accounting", example("accounting"))) as agent:
        await wait_registered(ws, "accounting")
        ws.push(mappings=[INVOICE_MAPPING])
        stopped = await agent.call_tool("invoice_submit", {"name": "ACC-PINV-0042"})
        allowed = await agent.call_tool("invoice_submit", {"name": "ACC-PINV-0043"})
    assert stopped.is_error and "big-invoice" in text(stopped)
    assert not allowed.is_error and "Claros (" not in text(allowed)  # 3 invoices: no nudge
    assert tools_called(ws) == [
        "invoice_read",
        "item_read",
        "item_read",
        "invoice_list",  # for 0042, never the agent's
        "invoice_read",
        "invoice_list",  # 0043: its one item was read 0042's round: cached
        "invoice_submit",
    ]
    stop_row, allow_row = ws.records("check")
    assert stop_row["resolved"] is True and stop_row["derived"] == {"net": 12000}
    assert stop_row["vars"]["item_groups"] == ["Raw", "Services"]
    assert allow_row["vars"]["supplier_invoices"] == 3  # where applied by the guard


async def test_pagination_list_changes_and_registration_follow_the_server(ws: Workspace) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async with Client(ws.guard("lab", lab()), message_handler=on_message) as agent:
        pages, cursor = [], None
        while True:
            page = await agent.list_tools(cursor=cursor)
            pages.append([t.name for t in page.tools])
            cursor = page.next_cursor
            if not cursor:
                break
        assert [len(p) for p in pages] == [3, 3, 3, 1]  # the server's pages, unchanged
        registered = await wait_registered(ws, "lab")
        assert len(registered["tools"]) == 10  # every page
        grown = await agent.call_tool("grow", {})
        assert not grown.is_error
        with anyio.fail_after(10):
            await changed.wait()
        registered = await wait_registered(ws, "lab", "extra_write")
    read = {t["name"]: t["read"] for t in registered["tools"]}
    assert read["extra_write"] is False and read["thing_read"] is True
    assert read["lookup_thing"] is True and read["note_write"] is False  # by their names


async def test_forwarded_params_lose_the_callers_envelope(ws: Workspace) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "example.com/trace": "t-1"}
    async with Client(ws.guard("lab", lab())) as agent:
        result = await agent.call_tool("echo_meta", {}, meta=meta)  # type: ignore[arg-type]
    assert result.structured_content == {"meta": {"example.com/trace": "t-1"}}


@pytest.fixture
def ws(workspace: Workspace) -> Workspace:
    return workspace
