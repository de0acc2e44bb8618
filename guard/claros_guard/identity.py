"""Who the agent is, as the check row records it (evidence.txt, "What each check row holds").

``agent.name`` is one of the spec's fixed names (``claude-code``, ``cursor``, ``codex``,
``playwright``, ``browser-use``) when the MCP client's own name (``clientInfo.name`` from
its ``initialize``) is that client, and otherwise that name exactly as the client gave it;
``model`` comes from ``$CLAROS_AGENT_MODEL`` when set (MCP does not carry it);
``session`` is one per connection and ``call_id`` one per call.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from typing import Any

from claros_guard import VERSION

__all__ = ["KNOWN_CLIENTS", "agent_name", "new_call_id", "new_session", "via"]

# The names evidence.txt fixes, each as the words a client's name starts with: "cursor"
# matches "Cursor" and "cursor-vscode", "codex" matches "codex-mcp-client", but a name
# merely containing one ("my-cursor-tool") is some other client and keeps its own name.
KNOWN_CLIENTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("claude", "code"), "claude-code"),
    (("claudecode",), "claude-code"),
    (("cursor",), "cursor"),
    (("codex",), "codex"),
    (("playwright",), "playwright"),
    (("browser", "use"), "browser-use"),
    (("browseruse",), "browser-use"),
)

_WORD = re.compile(r"[a-z0-9]+")
NAME_MAX = 128  # Claros refuses a longer agent.name, and would then block every write
UNKNOWN = "unknown-mcp-client"


def agent_name(client_info: Mapping[str, Any] | None) -> str:
    raw = (client_info or {}).get("name")
    if not isinstance(raw, str) or not raw.strip():
        return UNKNOWN
    words = tuple(_WORD.findall(raw.lower()))
    for prefix, name in KNOWN_CLIENTS:
        if words[: len(prefix)] == prefix:
            return name
    return raw[:NAME_MAX]


def via(guard: str = "claros-guard") -> dict[str, str]:
    return {"guard": guard, "version": VERSION}


def new_session() -> str:
    return f"ses_{uuid.uuid4().hex}"


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex}"


def agent_info(client_info: Mapping[str, Any] | None, session: str) -> dict[str, Any]:
    info: dict[str, Any] = {"name": agent_name(client_info), "session": session, "via": via()}
    version = (client_info or {}).get("version")
    if isinstance(version, str) and version:
        info["version"] = version[:64]
    model = os.environ.get("CLAROS_AGENT_MODEL")
    if model:
        info["model"] = model[:128]
    return info
