"""A helpdesk MCP server (the SDK's high-level ``MCPServer``): ``ticket_read`` (a read)
answers a ticket as a record that leaves out the fields it has no value for, as many
APIs do (an unapproved ticket has no ``approved_by``); ``ticket_close`` (a write) takes
the ticket's id and, as the SDK's servers do, ignores arguments it does not know. Every
tool call is appended to ``$EXAMPLE_CALL_LOG``."""

from __future__ import annotations

from typing import Any

from call_log import call_logger
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("tickets")

TICKETS: dict[str, dict[str, Any]] = {
    "T-1": {"ticket_id": "T-1", "title": "Refund 4,000 EUR", "status": "open", "approved_by": None},
    "T-2": {"ticket_id": "T-2", "title": "Typo", "status": "open", "approved_by": "dana@x.test"},
}


_log = call_logger("helpdesk")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def ticket_read(ticket_id: str) -> dict[str, Any]:
    """Read a ticket (fields without a value are left out)."""
    _log("ticket_read", {"ticket_id": ticket_id})
    return {k: v for k, v in TICKETS[ticket_id].items() if v is not None}


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def ticket_close(ticket_id: str) -> dict[str, Any]:
    """Close a ticket."""
    _log("ticket_close", {"ticket_id": ticket_id})
    TICKETS[ticket_id]["status"] = "closed"
    return {"ticket_id": ticket_id, "status": "closed"}


if __name__ == "__main__":
    server.run()
