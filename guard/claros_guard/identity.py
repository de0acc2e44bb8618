"""Who the agent is, as the check row records it (evidence.txt, "What each check row holds").

``agent.name`` is the MCP client's own name from its ``initialize`` (``clientInfo.name``),
mapped to a well-known name where we know the client; ``model`` comes from
``$CLAROS_AGENT_MODEL`` when set (MCP does not carry it); ``session`` is one per
connection and ``call_id`` one per call.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from typing import Any

from claros_guard import VERSION

__all__ = ["KNOWN_CLIENTS", "agent_name", "new_call_id", "new_session", "via"]

# (pattern on the lowercased clientInfo.name, the name Claros records), first match wins.
KNOWN_CLIENTS: tuple[tuple[str, str], ...] = (
    (r"claude[-_ ]?code", "claude-code"),
    (r"claude[-_ ]?(ai|desktop)", "claude-desktop"),
    (r"cursor", "cursor"),
    (r"codex", "codex"),
    (r"windsurf|codeium", "windsurf"),
    (r"visual studio code|vscode|vs code|copilot", "vscode"),
    (r"gemini", "gemini-cli"),
    (r"\bzed\b", "zed"),
    (r"cline", "cline"),
    (r"continue", "continue"),
    (r"goose", "goose"),
    (r"playwright", "playwright"),
    (r"browser[-_ ]?use", "browser-use"),
)

_CLEAN = re.compile(r"[^A-Za-z0-9_.:/@+ -]+")


def agent_name(client_info: Mapping[str, Any] | None) -> str:
    raw = str((client_info or {}).get("name") or "").strip()
    lowered = raw.lower()
    for pattern, name in KNOWN_CLIENTS:
        if re.search(pattern, lowered):
            return name
    cleaned = _CLEAN.sub("", raw).strip()[:128]
    return cleaned or "unknown-mcp-client"


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
