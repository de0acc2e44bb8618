"""An ask's answer as a request carries it: a pydantic model of its own, imported by the
functions that take answers (the admin API, the pages), not by the check function, which
opens and reads asks (claros.asks) but never validates an answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AnswerRequest"]


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    decision: Literal["approve", "deny"]
    note: str | None = Field(None, max_length=2000)
