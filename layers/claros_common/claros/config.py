"""Settings, read from the environment once, at the edge (never at import time)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["ConfigError", "Settings"]

# Each setting's environment variable.
ENV = {
    "store": "CLAROS_STORE",
    "signer": "CLAROS_SIGNER",
    "data_dir": "CLAROS_DATA",
    "ledger_table": "CLAROS_LEDGER_TABLE",
    "records_table": "CLAROS_RECORDS_TABLE",
    "state_table": "CLAROS_STATE_TABLE",
    "export_bucket": "CLAROS_EXPORT_BUCKET",
    "anchor_bucket": "CLAROS_ANCHOR_BUCKET",
    "kms_signer_role_arn": "CLAROS_KMS_SIGNER_ROLE_ARN",
    "kms_alias_prefix": "CLAROS_KMS_ALIAS_PREFIX",
    "checkpoint_every": "CLAROS_LEDGER_CHECKPOINT_EVERY",
    "checkpoint_max_age_s": "CLAROS_LEDGER_CHECKPOINT_MAX_AGE",
    "inline_checkpoints": "CLAROS_INLINE_CHECKPOINTS",
    "fast_approval_s": "CLAROS_FAST_APPROVAL_S",
    "ask_ttl_s": "CLAROS_ASK_TTL_S",
    "approval_ttl_s": "CLAROS_APPROVAL_TTL_S",
    "judge": "CLAROS_JUDGE",
    "judge_model": "CLAROS_JUDGE_MODEL",
    "mapper_model": "CLAROS_MAPPER_MODEL",
    "role_writes": "CLAROS_ROLE_WRITES",
}

# The writes a function's role may make besides its own work (template.yaml narrows each
# role): ``verified_state``, the verified-through state (only the signer role, which
# LeadingKeys lets write it); ``key_use``, a key's last use (not the read-only roles).
RoleWrite = Literal["verified_state", "key_use"]
ROLE_WRITES: tuple[RoleWrite, ...] = ("verified_state", "key_use")


class ConfigError(ValueError):
    """The environment holds a setting Claros cannot use; the message names the variable."""


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
    # Which of ROLE_WRITES this process may make (CLAROS_ROLE_WRITES, comma-separated; an
    # empty value: none). Locally every one; the domain code takes them as arguments.
    role_writes: frozenset[RoleWrite] = frozenset(ROLE_WRITES)

    @property
    def keeps_verified_state(self) -> bool:
        return "verified_state" in self.role_writes

    @property
    def notes_key_use(self) -> bool:
        return "key_use" in self.role_writes

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``CLAROS_*`` variables (unset ones take their defaults); a value
        Claros cannot use is a ``ConfigError`` naming each variable that is wrong."""
        env = os.environ if env is None else env
        values: dict[str, object] = {field: env[name] for field, name in ENV.items() if name in env}
        if isinstance(values.get("role_writes"), str):
            values["role_writes"] = [w.strip() for w in str(values["role_writes"]).split(",")
                                     if w.strip()]  # fmt: skip
        if values.get("store") == "dynamodb":  # AWS: KMS keys, checkpoints from the stream
            values.setdefault("signer", "kms")
            values.setdefault("inline_checkpoints", "false")
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors(include_url=False):
                field = str(error["loc"][0]) if error["loc"] else ""
                name = ENV.get(field, field)
                problems.append(f"{name}={env.get(name, '')!r}: {error['msg']}")
            raise ConfigError("bad environment: " + "; ".join(problems)) from exc
