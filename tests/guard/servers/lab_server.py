"""A test MCP server (the SDK's low-level ``Server``) whose tools misbehave on purpose:
it crashes, hangs, fails reads, pages its tool list, grows a tool and says so, and shows
the ``_meta`` it received. Every tool call is appended to ``$EXAMPLE_CALL_LOG``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
import mcp.types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server

READ = types.ToolAnnotations(read_only_hint=True)
WRITE = types.ToolAnnotations(read_only_hint=False)
ANY: dict[str, Any] = {"type": "object", "additionalProperties": True}

TOOLS = [
    types.Tool(name="note_write", description="Write a note.", input_schema=ANY),
    types.Tool(name="thing_read", input_schema=ANY, annotations=READ),
    types.Tool(name="thing_list", input_schema=ANY, annotations=READ),
    types.Tool(name="boom_read", input_schema=ANY, annotations=READ),
    types.Tool(name="stuck_read", input_schema=ANY, annotations=READ),
    types.Tool(name="lookup_thing", input_schema=ANY),
    types.Tool(name="echo_meta", input_schema=ANY, annotations=READ),
    types.Tool(name="crash", input_schema=ANY, annotations=WRITE),
    types.Tool(name="hang", input_schema=ANY, annotations=WRITE),
    types.Tool(name="grow", input_schema=ANY, annotations=WRITE),
]
EXTRA = types.Tool(name="extra_write", input_schema=ANY, annotations=WRITE)
PAGE = 3
THINGS = {"T-1": {"id": "T-1", "size": 3, "owner": "ada"}, "T-2": {"id": "T-2", "size": 9}}


def _log(tool: str, arguments: dict[str, Any]) -> None:
    path = os.environ.get("EXAMPLE_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123
            fh.write(json.dumps({"app": "lab", "tool": tool, "arguments": arguments}) + "\n")


def _text(value: Any, error: bool = False) -> types.CallToolResult:
    text = value if isinstance(value, str) else json.dumps(value)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    start = int((params.cursor if params and params.cursor else "page:0").split(":")[1])
    page = TOOLS[start : start + PAGE]
    more = start + PAGE < len(TOOLS)
    return types.ListToolsResult(tools=page, next_cursor=f"page:{start + PAGE}" if more else None)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    name, arguments = params.name, dict(params.arguments or {})
    _log(name, arguments)
    if name == "thing_read":
        thing = THINGS.get(str(arguments.get("id")))
        return _text(thing) if thing else _text(f"no thing {arguments.get('id')}", error=True)
    if name == "thing_list":
        return _text(list(THINGS.values()))
    if name == "boom_read":
        return _text("the database is down", error=True)
    if name in ("stuck_read", "hang"):
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            _log(f"{name}:cancelled", arguments)
            raise
    if name == "lookup_thing":
        return _text(THINGS["T-1"])
    if name == "echo_meta":
        meta = ctx.params.get("_meta") if ctx.params else None
        return types.CallToolResult(content=[], structured_content={"meta": meta or {}})
    if name == "crash":
        os._exit(3)
    if name == "grow":
        if EXTRA not in TOOLS:
            TOOLS.append(EXTRA)
        await ctx.session.send_tool_list_changed()
        return _text({"tools": len(TOOLS)})
    return _text({"ok": True, "tool": name})


server: Server[Any] = Server(
    "lab", version="0.0.1", on_list_tools=list_tools, on_call_tool=call_tool
)


async def main() -> None:
    async with stdio_server() as (read, write):
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write, options)


if __name__ == "__main__":
    anyio.run(main)
