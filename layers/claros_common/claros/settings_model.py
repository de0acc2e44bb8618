"""The settings' rules as a pydantic model: each setting's type, default and bounds.

``claros.config.Settings`` is what the code uses: a plain class that takes a value it finds
plainly valid as it is and asks this model about every other value (then the model's
errors are the messages). Only that path imports this module, and pydantic with it: a
function whose environment is the template's never does (claros.config says why).
tests/test_config.py holds the two alike: the same fields, defaults and bounds, and
every value ``Settings`` takes as it is is the value this model gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from claros.config import ROLE_WRITES, RoleWrite

__all__ = ["SettingsModel"]


class SettingsModel(BaseModel):
    # Built on its first validation (tests/aws/test_deferred_models.py): this module is
    # imported only to validate.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, title="Settings")

    store: Literal["sqlite", "dynamodb"] = "sqlite"
    signer: Literal["file", "kms"] = "file"
    data_dir: Path = Path(".claros")
    # DynamoDB tables (AWS mode).
    ledger_table: str = "claros-ledger"
    records_table: str = "claros-records"
    state_table: str = "claros-state"
    export_bucket: str = ""
    anchor_bucket: str = ""
    # The only role a workspace KMS key's policy lets sign (AWS; template.yaml).
    kms_signer_role_arn: str = ""
    # A workspace's KMS key is found by the alias <prefix><workspace>. Aliases are
    # per account and region: each stack has its own prefix (template.yaml), so a second
    # stack never finds, and then fails to sign with, the first one's keys.
    kms_alias_prefix: str = Field(
        "alias/claros-ledger-", pattern=r"^alias/[A-Za-z0-9][A-Za-z0-9/_-]{0,200}$"
    )
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
    # What decides rules without `when` (claros.rules.judges): none by default; `keyword`
    # is a deterministic stand-in for local runs, `bedrock` a model (CLAROS_JUDGE_MODEL).
    judge: Literal["", "none", "keyword", "bedrock"] = ""
    judge_model: str = ""
    # A Bedrock model that proposes mappings (claros.mapping.mapper); unset: the schema
    # proposer alone, which needs no model.
    mapper_model: str = ""
    max_depth: int = 32
    # SQLite (local mode): "full" syncs the write-ahead log at every commit, so an
    # answered check survives a power cut or a system crash too; "normal" syncs only at
    # WAL checkpoints (faster; a power cut may lose the last answered checks, never the
    # chain's order). docs/ledger.md, "Storage".
    sqlite_sync: Literal["full", "normal"] = "full"
    # Which of ROLE_WRITES this process may make (CLAROS_ROLE_WRITES, comma-separated; an
    # empty value: none). Locally every one; the domain code takes them as arguments.
    role_writes: frozenset[RoleWrite] = frozenset(ROLE_WRITES)
