"""A shop MCP server (the SDK's low-level ``Server``) whose order record carries a long
note: ``$BULKY_NOTE_MB`` megabytes of text (an attachment pasted into a field, or an agent
that wrote one through an allowed write). ``order_read`` is a read, ``refund_create`` a
write. Every tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
from call_log import call_logger
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp_types import CallToolResult, ListToolsResult, TextContent, Tool, ToolAnnotations

_log = call_logger("shop")
NOTE = "x" * int(float(os.environ.get("BULKY_NOTE_MB", "1")) * 1024 * 1024)
SCHEMA = {"type": "object", "properties": {"order": {"type": "string"},
                                           "amount": {"type": "number"}}}  # fmt: skip


async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
    return ListToolsResult(
        tools=[
            Tool(
                name="order_read",
                input_schema=SCHEMA,
                annotations=ToolAnnotations(read_only_hint=True),
            ),
            Tool(
                name="refund_create",
                input_schema=SCHEMA,
                annotations=ToolAnnotations(read_only_hint=False),
            ),
        ]  # fmt: skip
    )


async def call_tool(ctx: Any, params: Any) -> CallToolResult:
    arguments = dict(params.arguments or {})
    _log(params.name, arguments)
    if params.name == "order_read":
        record = {"id": arguments.get("order"), "total": 20, "note": NOTE}
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(record))], structured_content=record
        )
    return CallToolResult(content=[TextContent(type="text", text="refunded")])


server = Server("bulky-shop", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
