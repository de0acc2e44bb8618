"""A test MCP server (the SDK's low-level ``Server``) with resources and prompts and no
tools at all: no ``tools`` capability, no ``tools/list``."""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

NOTE = "note://welcome"


async def list_resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri=NOTE, name="welcome", mime_type="text/plain")]
    )


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    text = "hello from the resources server" if str(params.uri) == NOTE else "no such note"
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=str(params.uri), text=text)]
    )


async def list_prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="greet", description="Say hi.")])


async def get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text="hi"))
    return types.GetPromptResult(messages=[message])


server = Server(
    "resources-only",
    on_list_resources=list_resources,
    on_read_resource=read_resource,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
