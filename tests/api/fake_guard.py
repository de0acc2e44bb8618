"""An in-process stand-in for the guard, against fake apps: it asks Claros, runs the reads
Claros needs on the apps (refusing non-reads), filters and reduces query rows itself, and
asks again with ``fetched`` until the check is decided."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from claros_guard.queries import filter_rows, reduce_rows
from tests.api.conftest import bearer

Tool = Callable[[dict[str, Any]], Any]


@dataclass
class FakeApp:
    name: str
    reads: dict[str, Tool] = field(default_factory=dict)
    writes: dict[str, Tool] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def register(self, http: httpx.Client, key: str) -> None:
        reads = [{"name": n, "read": True, "annotations": {"readOnlyHint": True}}
                 for n in self.reads]  # fmt: skip
        tools = reads + [{"name": n, "read": False} for n in self.writes]
        response = http.post(f"/v1/apps/{self.name}/tools", json={"tools": tools},
                             headers=bearer(key))  # fmt: skip
        assert response.status_code == 200, response.text

    def read(self, tool: str, arguments: dict[str, Any]) -> Any:
        if tool not in self.reads:
            raise PermissionError(f"{tool} is not a read of {self.name}")
        self.calls.append((tool, arguments))
        return self.reads[tool](arguments)


@dataclass
class FakeGuard:
    http: httpx.Client
    key: str
    apps: dict[str, FakeApp]
    rounds: list[list[dict[str, Any]]] = field(default_factory=list)

    def check(self, app: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        fetched: dict[str, Any] = {}
        for _ in range(5):
            body: dict[str, Any] = {"app": app, "tool": tool, "arguments": arguments,
                                    "agent": {"name": "fake-guard", "call_id": "c"}}  # fmt: skip
            if fetched:
                body["fetched"] = fetched
            response = self.http.post("/v1/check", json=body, headers=bearer(self.key))
            assert response.status_code == 200, response.text
            answer = dict(response.json())
            if "need" not in answer:
                return answer
            assert answer["allowed"] is False and "check_id" not in answer
            self.rounds.append(answer["need"])
            for need in answer["need"]:
                source = self.apps[need.get("app", app)]
                result = source.read(need["tool"], need["arguments"])
                if need["kind"] == "query":
                    rows = filter_rows(result, need.get("where") or {})
                    result = reduce_rows(rows, need["op"], need.get("field"))
                fetched[need["key"]] = result
        raise AssertionError("no decision after 5 rounds")
