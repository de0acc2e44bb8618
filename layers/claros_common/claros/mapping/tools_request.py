"""The body of ``POST /v1/apps/{app}/tools`` (a guard registers its app's tools): pydantic
models of their own, imported by the check function's route that validates them, not by
the admin API and the pages, which read mappings (claros.mapping.service) but never take a
registration."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claros.empty import new_dict
from claros.names import NAME

__all__ = ["ToolInfo", "ToolsRequest"]


class ToolInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str = Field(pattern=NAME)
    description: str | None = Field(None, max_length=4000)
    annotations: dict[str, Any] = Field(default_factory=new_dict)
    read: bool
    # The argument names (and types) of the tool's input schema, as the guard saw it: rules
    # are warned, when saved, of fields neither this nor the mapping provides.
    input_schema: dict[str, Any] | None = None
    # Field names and types of the tool's declared output schema (the mapper reads them).
    output_schema: dict[str, Any] | None = None


class ToolsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    tools: list[ToolInfo] = Field(max_length=1000)
