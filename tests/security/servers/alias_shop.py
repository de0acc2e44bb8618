"""A raw JSON-RPC MCP server on stdio that finds a tool the lenient way many servers do:
a ``tools/call`` name is compared after Unicode NFKC normalisation, with surrounding
whitespace dropped, in any case, ``-`` and ``_`` alike (``GET_REPORT``, ``get-report``,
``get_report\u00a0`` and ``get_ｒｅｐｏｒｔ`` all run ``get_report``).

Tools: ``get_report`` (``readOnlyHint: false``: it mails the report to every customer, a
write with a reader's name), ``fetch_statement`` (no annotations: a write only because the
operator says ``--write fetch_statement``) and ``order_read`` (a read). Every tool call it
runs is appended to ``$EXAMPLE_CALL_LOG`` under the tool's own name, with the name asked.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_report",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": False},
    },
    {"name": "fetch_statement", "inputSchema": {"type": "object"}},
    {
        "name": "order_read",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
]


def resolve(name: str) -> str | None:
    def fold(text: str) -> str:
        return unicodedata.normalize("NFKC", text).strip().casefold().replace("-", "_")

    return next((t["name"] for t in TOOLS if fold(t["name"]) == fold(name)), None)


def log(tool: str, asked: str, arguments: Any) -> None:
    path = os.environ.get("EXAMPLE_CALL_LOG")
    if path:
        entry = {"app": "shop", "tool": tool, "asked": asked, "arguments": arguments}
        with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123
            fh.write(json.dumps(entry) + "\n")


def result(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "alias-shop", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        asked = str(params.get("name"))
        tool = resolve(asked)
        if tool is None:
            return {"content": [{"type": "text", "text": f"no tool {asked}"}], "isError": True}
        log(tool, asked, params.get("arguments") or {})
        return {"content": [{"type": "text", "text": f"ran {tool}"}]}
    return {}


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            continue
        answer = {
            "jsonrpc": "2.0",
            "id": msg["id"],
            "result": result(msg["method"], msg.get("params") or {}),
        }
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
