"""Settings, read from the environment once, at the edge (never at import time)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Settings"]


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    store: Literal["sqlite", "dynamodb"] = "sqlite"
    signer: Literal["file", "kms"] = "file"
    data_dir: Path = Path(".claros")
    # DynamoDB tables (AWS mode).
    ledger_table: str = "claros-ledger"
    records_table: str = "claros-records"
    state_table: str = "claros-state"
    export_bucket: str = ""
    anchor_bucket: str = ""
    # Checkpoints: every N entries, and whenever the tail stayed unsigned this long.
    checkpoint_every: int = Field(100, ge=1, le=1_000_000)
    checkpoint_max_age_s: int = Field(300, ge=1)
    # Sign checkpoints in the request that crosses a multiple of N (local mode); in AWS
    # the checkpoint function does it, fed by the ledger table's stream.
    inline_checkpoints: bool = True
    fast_approval_s: int = Field(10, ge=0)
    # An ask can be answered for this long; an approval can be used (once) for this long.
    ask_ttl_s: int = Field(3600, ge=1)
    approval_ttl_s: int = Field(900, ge=1)
    max_body_bytes: int = 1_000_000
    max_depth: int = 32

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        store = env.get("CLAROS_STORE", "sqlite")
        values: dict[str, object] = {
            "store": store,
            "signer": env.get("CLAROS_SIGNER", "kms" if store == "dynamodb" else "file"),
            "data_dir": env.get("CLAROS_DATA", ".claros"),
            "ledger_table": env.get("CLAROS_LEDGER_TABLE", "claros-ledger"),
            "records_table": env.get("CLAROS_RECORDS_TABLE", "claros-records"),
            "state_table": env.get("CLAROS_STATE_TABLE", "claros-state"),
            "export_bucket": env.get("CLAROS_EXPORT_BUCKET", ""),
            "anchor_bucket": env.get("CLAROS_ANCHOR_BUCKET", ""),
            "checkpoint_every": env.get("CLAROS_LEDGER_CHECKPOINT_EVERY", "100"),
            "checkpoint_max_age_s": env.get("CLAROS_LEDGER_CHECKPOINT_MAX_AGE", "300"),
            "inline_checkpoints": env.get(
                "CLAROS_INLINE_CHECKPOINTS", "false" if store == "dynamodb" else "true"
            ),
            "fast_approval_s": env.get("CLAROS_FAST_APPROVAL_S", "10"),
            "ask_ttl_s": env.get("CLAROS_ASK_TTL_S", "3600"),
            "approval_ttl_s": env.get("CLAROS_APPROVAL_TTL_S", "900"),
        }
        return cls.model_validate(values)
