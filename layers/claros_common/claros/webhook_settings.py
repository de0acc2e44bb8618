"""The ask webhook's settings as an admin sets them (``PUT /api/settings/ask-webhook``).

Its own module: pydantic's ``HttpUrl`` imports ``pydantic.networks``, which imports
``importlib.metadata``'s whole body (email, zipfile, csv), a cold-start cost for the check
and evidence functions, which use ``claros.webhook`` but never parse these settings. The
admin function imports it where the settings are written.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, HttpUrl

__all__ = ["WebhookSettings"]


class WebhookSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    url: HttpUrl
    secret: str = Field(min_length=16, max_length=256)
