"""The body of ``PUT /api/evidence/retention``: a pydantic model in a module of its own,
imported by that route when it first runs, so the retention readers (the prune
function's other routes, the AIUC-1 pack) import no pydantic."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["RetentionRequest"]


class RetentionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    # None removes the setting: every record is kept.
    days: int | None
