"""A raw JSON-RPC server on stdio, as lenient as a server can be: it logs every line it
receives (``$RAW_UPSTREAM_LOG``, one JSON object per line: the line as received and when,
on the system-wide monotonic clock) and answers every request it can make sense of,
whatever the method's case, and each message of a batch. Nothing MCP-aware beyond that:
if the guard let anything through, this server would take it.

Tools: ``order_read`` (``readOnlyHint: true``) and ``refund_create`` (a write).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

TOOLS = [
    {
        "name": "order_read",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "refund_create",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": False},
    },
]


def _log(line: str) -> None:
    path = os.environ["RAW_UPSTREAM_LOG"]
    with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123
        fh.write(json.dumps({"ns": time.monotonic_ns(), "line": line}) + "\n")
        fh.flush()


def _result(method: str, params: Any) -> dict[str, Any]:
    method = method.lower()
    if method == "initialize":
        return {
            "protocolVersion": (params or {}).get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-upstream", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name = params.get("name") if isinstance(params, dict) else params
        return {"content": [{"type": "text", "text": f"ran {json.dumps(name)}"}]}
    return {}


def _answer(message: Any) -> dict[str, Any] | None:
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        return None
    method = message["method"] if isinstance(message["method"], str) else ""
    return {"jsonrpc": "2.0", "id": message["id"], "result": _result(method, message.get("params"))}


def main() -> None:
    for line in sys.stdin:
        _log(line.rstrip("\n"))
        try:
            message = json.loads(line)
        except ValueError:
            continue
        batch = message if isinstance(message, list) else [message]
        for item in batch:
            answer = _answer(item)
            if answer is not None:
                sys.stdout.write(json.dumps(answer) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
