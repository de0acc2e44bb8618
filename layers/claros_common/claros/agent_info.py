"""What the agent says it is, as a check and an outcome report send it: request parts
(pydantic models) of the functions that validate those bodies, apart from
claros.check_rows, whose readers (the evidence and export functions) validate none."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentInfo", "Strict", "Via"]


class Strict(BaseModel):
    """A request part: unknown fields refused, strings bounded."""

    model_config = ConfigDict(extra="forbid", str_max_length=512, defer_build=True)


class Via(Strict):
    guard: str = Field(min_length=1, max_length=128)
    version: str | None = Field(None, max_length=64)


class AgentInfo(Strict):
    """What the agent says it is. ``on_behalf_of`` is honoured only from a service key."""

    name: str = Field(min_length=1, max_length=128)
    model: str | None = Field(None, max_length=128)
    version: str | None = Field(None, max_length=64)
    session: str | None = Field(None, max_length=256)
    call_id: str | None = Field(None, max_length=256)
    via: Via | None = None
    on_behalf_of: str | None = Field(None, max_length=256)
