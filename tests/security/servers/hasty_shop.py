"""A raw JSON-RPC shop on stdio whose refund does not wait for the answer to its question.

``refund_create`` (a write) asks its client to confirm the amount (``elicitation/create``)
and, once the file ``$HASTY_SHOP_GO`` exists (a test makes it when it has seen what it
waits for), answers the call without the answer, as a tool that gives up on a question
does, without cancelling the question. Every message it receives is appended to
``$EXAMPLE_CALL_LOG`` as ``{"tool": "<received>", "arguments": message}``, and the refund
as ``{"tool": "refund_create", ...}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from call_log import call_logger

TOOLS = [
    {
        "name": "refund_create",
        "inputSchema": {
            "type": "object",
            "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
        },
        "annotations": {"readOnlyHint": False},
    }
]
_log = call_logger("shop")


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _refund(request_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    _send({
        "jsonrpc": "2.0", "id": "confirm-1", "method": "elicitation/create",
        "params": {
            "message": f"Refund {arguments.get('amount')}? Confirm or correct it.",
            "requestedSchema": {"type": "object", "properties": {"amount": {"type": "number"}}},
        },
    })  # fmt: skip
    go = Path(os.environ["HASTY_SHOP_GO"])
    deadline = time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    _log("refund_create", arguments)
    text = json.dumps({"ok": True, **arguments})
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"content": [{"type": "text", "text": text}]},
    }


def _answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message or not isinstance(method, str):
        return None  # a notification, or the answer to the question: logged only
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hasty-shop", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        return _refund(message["id"], dict(params.get("arguments") or {}))
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        _log(f"<{message.get('method', 'answer')}>", message)
        answer = _answer(message)
        if answer is not None:
            _send(answer)


if __name__ == "__main__":
    main()
