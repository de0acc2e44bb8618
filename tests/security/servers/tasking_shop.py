"""A shop MCP server on raw JSON-RPC that runs a call as a task when asked to (MCP
2025-11-25's task-augmented requests, ``params.task``): it answers at once with the task
(``CreateTaskResult``, status ``working``), and the refund goes on after that answer.

Its ``refund_create`` asks the client to confirm or correct the amount
(``elicitation/create``) and refunds the amount the answer gives, before it answers the
call or, run as a task, after. It reads answers leniently: the content of any answer
that does not decline or cancel is taken (``"Accept"``, or no action at all, as a yes).
A client that says it runs questions as tasks
(``capabilities.tasks.requests.elicitation.create``; or any client, with
``$TASKING_SHOP_ASKS_AS_TASKS=1``) is asked so: it answers with a task, and the shop
fetches the answer with ``tasks/result``. ``order_read`` is a read. Every refund is
appended to ``$EXAMPLE_CALL_LOG``, and every line received to ``$RAW_UPSTREAM_LOG`` as
``raw_upstream`` does."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from call_log import call_logger

TOOLS = [
    {
        "name": "order_read",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "refund_create",
        "inputSchema": {
            "type": "object",
            "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
        },
        "annotations": {"readOnlyHint": False},
        "execution": {"taskSupport": "optional"},
    },
]
ORDERS = {"1187": {"id": "1187", "customer": "C-7", "total": 20}}

_log = call_logger("shop")


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _text(value: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value}


def _asks_as_tasks(capabilities: Any) -> bool:
    """Whether the client said it runs an ``elicitation/create`` as a task."""
    tasks = capabilities.get("tasks") if isinstance(capabilities, dict) else None
    requests = (tasks or {}).get("requests") or {}
    return isinstance((requests.get("elicitation") or {}).get("create"), dict)


class Shop:
    def __init__(self) -> None:
        # question id: (call id, args); a question asked as a task is asked again as
        # tasks/result, under its id + "-result"
        self.asked: dict[str, tuple[Any, dict[str, Any]]] = {}
        self.questions = 0
        self.task_questions = os.environ.get("TASKING_SHOP_ASKS_AS_TASKS") == "1"

    def on_request(self, id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "initialize":
            self.task_questions |= _asks_as_tasks(params.get("capabilities"))
            capabilities = {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": capabilities,
                "serverInfo": {"name": "tasking-shop", "version": "1"},
            }
            _send({"jsonrpc": "2.0", "id": id, "result": result})
        elif method == "tools/list":
            _send({"jsonrpc": "2.0", "id": id, "result": {"tools": TOOLS}})
        elif method == "tools/call" and params.get("name") == "order_read":
            order = ORDERS.get(str((params.get("arguments") or {}).get("order")), {})
            _send({"jsonrpc": "2.0", "id": id, "result": _text(order)})
        elif method == "tools/call":
            arguments = dict(params.get("arguments") or {})
            call = id
            if isinstance(params.get("task"), dict):  # run as a task: answered now
                task = {
                    "taskId": f"task-{id}",
                    "status": "working",
                    "createdAt": "2026-01-01T00:00:00Z",
                    "lastUpdatedAt": "2026-01-01T00:00:00Z",
                    "ttl": params["task"].get("ttl", 60000),
                }
                _send({"jsonrpc": "2.0", "id": id, "result": {"task": task}})
                call = None
            self.ask(call, arguments)
        elif method == "ping":
            _send({"jsonrpc": "2.0", "id": id, "result": {}})
        else:
            _send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": method}})

    def ask(self, call: Any, arguments: dict[str, Any]) -> None:
        self.questions += 1
        question = f"q{self.questions}"
        self.asked[question] = (call, arguments)
        schema = {"type": "object", "properties": {"amount": {"type": "number"}}}
        params = {
            "mode": "form",
            "message": f"Refund {arguments.get('amount')}? Confirm or correct it.",
            "requestedSchema": schema,
        }
        if self.task_questions:
            params["task"] = {"ttl": 60000}
        _send({"jsonrpc": "2.0", "id": question, "method": "elicitation/create", "params": params})

    def on_answer(self, id: Any, message: dict[str, Any]) -> None:
        call, arguments = self.asked.pop(id, (None, None))
        if arguments is None:
            return
        result = message.get("result") or {}
        task = result.get("task")
        if isinstance(task, dict):  # the client runs the question as a task: fetch its answer
            self.asked[f"{id}-result"] = (call, arguments)
            fetch = {"taskId": task.get("taskId")}
            _send({"jsonrpc": "2.0", "id": f"{id}-result", "method": "tasks/result",
                   "params": fetch})  # fmt: skip
            return
        content = result.get("content")
        # A lenient reader of the answer: its content is taken unless it declines or
        # cancels ("Accept", "ACCEPT" or no action at all read as a yes).
        if result.get("action") in ("decline", "cancel") or not isinstance(content, dict):
            answer = {"isError": True, "content": [{"type": "text", "text": "not confirmed"}]}
        else:
            refund = {"order": arguments.get("order"), "amount": content.get("amount")}
            _log("refund_create", refund)
            answer = _text({"ok": True, **refund})
        if call is not None:
            _send({"jsonrpc": "2.0", "id": call, "result": answer})


def _log_line(line: str) -> None:
    path = os.environ.get("RAW_UPSTREAM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:  # noqa: PTH123
            fh.write(json.dumps({"ns": time.monotonic_ns(), "line": line.rstrip()}) + "\n")


def main() -> None:
    shop = Shop()
    for line in sys.stdin:
        _log_line(line)
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if "method" in message and "id" in message:
            shop.on_request(message["id"], message["method"], message.get("params") or {})
        elif "id" in message and ("result" in message or "error" in message):
            shop.on_answer(message["id"], message)


if __name__ == "__main__":
    main()
