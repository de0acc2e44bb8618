"""Checking a call: who it is for, what was decided, and the row that goes in the ledger."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claros.auth import Principal, check_email, member_role
from claros.checkpoints import append
from claros.clock import new_id, now_ms
from claros.errors import ForbiddenError
from claros.wiring import Services

__all__ = ["AgentInfo", "CheckRequest", "Via", "record_check", "resolve_on_behalf_of"]

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_max_length=512)


class Via(_Strict):
    guard: str = Field(min_length=1, max_length=128)
    version: str | None = Field(None, max_length=64)


class AgentInfo(_Strict):
    """What the agent says it is. ``on_behalf_of`` is honoured only from a service key."""

    name: str = Field(min_length=1, max_length=128)
    model: str | None = Field(None, max_length=128)
    version: str | None = Field(None, max_length=64)
    session: str | None = Field(None, max_length=256)
    call_id: str | None = Field(None, max_length=256)
    via: Via | None = None
    on_behalf_of: str | None = Field(None, max_length=256)


class CheckRequest(_Strict):
    app: str = Field(pattern=_NAME)
    tool: str = Field(pattern=_NAME)
    arguments: dict[str, Any] = Field(default_factory=dict)
    agent: AgentInfo
    fetched: dict[str, Any] | None = None


def resolve_on_behalf_of(
    services: Services, principal: Principal, agent: AgentInfo
) -> tuple[str | None, str | None]:
    """(on_behalf_of, obo_source), from the credential, never from what the agent says.

    A person's key (agent or admin) acts for that person. Only a service key, tied to
    nobody, may name a workspace member in ``agent.on_behalf_of``."""
    if principal.kind in ("agent", "admin"):
        return principal.person, f"{principal.kind}_key"
    if principal.kind == "service" and agent.on_behalf_of:
        email = check_email(agent.on_behalf_of)
        if member_role(services.store, principal.workspace, email) is None:
            raise ForbiddenError(
                f"agent.on_behalf_of names {email}, who is not a member of this workspace"
            )
        return email, "service_key"
    return None, None


def record_check(services: Services, principal: Principal, req: CheckRequest) -> dict[str, Any]:
    on_behalf_of, obo_source = resolve_on_behalf_of(services, principal, req.agent)
    check_id = new_id("chk")
    agent = req.agent.model_dump(exclude_none=True, exclude={"on_behalf_of"})
    row: dict[str, Any] = {
        "check_id": check_id,
        "workspace": principal.workspace,
        "ts": now_ms(),
        "app": req.app,
        "tool": req.tool,
        "arguments": req.arguments,
        "agent": agent,
        "key_id": principal.key_id,
        "on_behalf_of": on_behalf_of,
        "obo_source": obo_source,
        "result": "allow",
        "allowed": True,
        "rules": [],
        "reason": "no rule applied",
    }
    settings = services.settings
    entry = append(
        services.store,
        services.signer if settings.inline_checkpoints else None,
        settings.checkpoint_every,
        principal.workspace,
        "check",
        check_id,
        row,
    )
    return {
        "check_id": check_id,
        "result": row["result"],
        "allowed": row["allowed"],
        "rules": row["rules"],
        "reason": row["reason"],
        "on_behalf_of": on_behalf_of,
        "obo_source": obo_source,
        "seq": entry.seq,
    }
