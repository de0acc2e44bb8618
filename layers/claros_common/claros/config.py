"""Settings, read from the environment once, at the edge (never at import time).

``Settings`` is a plain frozen class, not a pydantic model. Every function reads it, and a
pydantic model meant importing pydantic and building the model at every cold start (~110
ms of CPU here, a quarter of what the all-routes entry cost), also in the functions that
validate no request body (the authorizer, evidence, checkpoint, export).

The rules are still the pydantic model's (``claros.settings_model.SettingsModel``). A value
that is plainly valid (``_plain``: one of a setting's words as written, a whole number in
decimal digits within its bounds, one of pydantic's boolean words, a string where any
string will do, a path) is taken as it is, and that is the value the model gives for it.
Any other value, and a name that is not a setting, goes to the model, which takes it as
pydantic reads it (``" 100 "``, ``"1_000"``, ``"1.0"``) or refuses it with its own
messages; only then is pydantic imported. So the values and the messages are the
model's; tests/test_config.py checks the plain readings against the model, field by
field and on generated values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

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
    "sqlite_sync": "CLAROS_SQLITE_SYNC",
    "role_writes": "CLAROS_ROLE_WRITES",
}

# The writes a function's role may make besides its own work (template.yaml narrows each
# role): ``verified_state``, the verified-through state (only the signer role, which
# LeadingKeys lets write it); ``key_use``, a key's last use (not the read-only roles).
RoleWrite = Literal["verified_state", "key_use"]
ROLE_WRITES: tuple[RoleWrite, ...] = ("verified_state", "key_use")

# The model's kms_alias_prefix pattern, as a full match (pydantic's regex engine reads the
# model's ``^...$`` as the whole string, never before a trailing newline).
ALIAS_PREFIX = r"alias/[A-Za-z0-9][A-Za-z0-9/_-]{0,200}"
# pydantic's boolean words (any ASCII case).
BOOLEAN_WORDS = {
    **dict.fromkeys(("0", "f", "n", "no", "off", "false"), False),
    **dict.fromkeys(("1", "t", "y", "on", "yes", "true"), True),
}

# Each setting (the model's fields, in its order): its default and how a plainly valid
# value reads (``_plain``): ("word", options), ("int", least, most), ("bool",), ("str",),
# ("alias",), ("path",), ("role_writes",). The model's comments say what each is for.
FIELDS: dict[str, tuple[object, tuple[Any, ...]]] = {
    "store": ("sqlite", ("word", ("sqlite", "dynamodb"))),
    "signer": ("file", ("word", ("file", "kms"))),
    "data_dir": (Path(".claros"), ("path",)),
    "ledger_table": ("claros-ledger", ("str",)),
    "records_table": ("claros-records", ("str",)),
    "state_table": ("claros-state", ("str",)),
    "export_bucket": ("", ("str",)),
    "anchor_bucket": ("", ("str",)),
    "kms_signer_role_arn": ("", ("str",)),
    "kms_alias_prefix": ("alias/claros-ledger-", ("alias",)),
    "checkpoint_every": (100, ("int", 1, 1_000_000)),
    "checkpoint_max_age_s": (300, ("int", 1, None)),
    "inline_checkpoints": (True, ("bool",)),
    "fast_approval_s": (10, ("int", 0, None)),
    "ask_ttl_s": (3600, ("int", 1, None)),
    "approval_ttl_s": (900, ("int", 1, None)),
    "max_body_bytes": (1_000_000, ("int", None, None)),
    "judge": ("", ("word", ("", "none", "keyword", "bedrock"))),
    "judge_model": ("", ("str",)),
    "mapper_model": ("", ("str",)),
    "max_depth": (32, ("int", None, None)),
    "sqlite_sync": ("full", ("word", ("full", "normal"))),
    "role_writes": (frozenset(ROLE_WRITES), ("role_writes",)),
}


class ConfigError(ValueError):
    """The environment holds a setting Claros cannot use; the message names the variable."""


class _Unplain:
    """What ``_plain`` returns for a value it leaves to the model."""


UNPLAIN = _Unplain()


def _str(value: object) -> object:
    return value if type(value) is str else UNPLAIN


def _word(value: object, options: tuple[str, ...]) -> object:
    return value if type(value) is str and value in options else UNPLAIN


def _int(value: object, least: int | None, most: int | None) -> object:
    if type(value) is str and value.isascii() and value.isdigit() and len(value) <= 18:
        value = int(value)  # ASCII decimal digits only: no sign, space, "_" or "."
    if type(value) is not int:
        return UNPLAIN
    if (least is not None and value < least) or (most is not None and value > most):
        return UNPLAIN  # the model's message says which bound
    return value


def _bool(value: object) -> object:
    if type(value) is bool:
        return value
    if type(value) is str and value.isascii():
        return BOOLEAN_WORDS.get(value.lower(), UNPLAIN)
    return UNPLAIN


def _alias(value: object) -> object:
    return value if type(value) is str and re.fullmatch(ALIAS_PREFIX, value) else UNPLAIN


def _path(value: object) -> object:
    if type(value) is str:
        return Path(value)
    return value if isinstance(value, Path) else UNPLAIN


def _role_writes(value: object) -> object:
    if isinstance(value, list | tuple | set | frozenset) and all(
        type(w) is str and w in ROLE_WRITES for w in value
    ):
        return frozenset(value)
    return UNPLAIN


_READERS: dict[str, Callable[..., object]] = {
    "str": _str, "word": _word, "int": _int, "bool": _bool, "alias": _alias, "path": _path,
    "role_writes": _role_writes,
}  # fmt: skip


def _plain(rule: tuple[Any, ...], value: object) -> object:
    """``value`` as the model reads it, when it is plainly valid under ``rule``; else
    ``UNPLAIN`` (the model decides)."""
    return _READERS[rule[0]](value, *rule[1:])


def _plainly_valid(values: Mapping[str, object]) -> dict[str, object] | None:
    """Every setting, from ``values`` and the defaults, when each given value is plainly
    valid and each name a setting; else None (the model decides)."""
    if not values.keys() <= FIELDS.keys():
        return None
    out: dict[str, object] = {}
    for name, (default, rule) in FIELDS.items():
        if name not in values:
            out[name] = default
            continue
        value = _plain(rule, values[name])
        if value is UNPLAIN:
            return None
        out[name] = value
    return out


def _by_model(values: Mapping[str, object], env: Mapping[str, str] | None) -> dict[str, object]:
    """Every setting as the pydantic model reads ``values``. Refused: with ``env`` (the
    values came from there), a ``ConfigError`` naming each variable that is wrong; without,
    the model's own ``ValidationError``, as a ``Settings(...)`` call has always raised."""
    from pydantic import ValidationError

    from claros.settings_model import SettingsModel

    try:
        model = SettingsModel.model_validate(values)
    except ValidationError as exc:
        if env is None:
            raise
        problems = []
        for error in exc.errors(include_url=False):
            field = str(error["loc"][0]) if error["loc"] else ""
            name = ENV.get(field, field)
            problems.append(f"{name}={env.get(name, '')!r}: {error['msg']}")
        raise ConfigError("bad environment: " + "; ".join(problems)) from exc
    return {name: getattr(model, name) for name in FIELDS}


class Settings:
    """What Claros is configured with (claros.settings_model.SettingsModel says each
    setting's meaning and bounds). Frozen; ``replace`` gives a changed copy."""

    __slots__ = tuple(FIELDS)

    store: Literal["sqlite", "dynamodb"]
    signer: Literal["file", "kms"]
    data_dir: Path
    ledger_table: str
    records_table: str
    state_table: str
    export_bucket: str
    anchor_bucket: str
    kms_signer_role_arn: str
    kms_alias_prefix: str
    checkpoint_every: int
    checkpoint_max_age_s: int
    inline_checkpoints: bool
    fast_approval_s: int
    ask_ttl_s: int
    approval_ttl_s: int
    max_body_bytes: int
    judge: Literal["", "none", "keyword", "bedrock"]
    judge_model: str
    mapper_model: str
    max_depth: int
    sqlite_sync: Literal["full", "normal"]
    role_writes: frozenset[RoleWrite]

    def __init__(self, **values: object) -> None:
        """The settings ``values`` name (the others take their defaults); a value the model
        refuses raises its ``pydantic.ValidationError``."""
        self._set(_plainly_valid(values) or _by_model(values, None))

    def _set(self, values: Mapping[str, object]) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Settings are frozen: use replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Settings are frozen")

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in FIELDS}

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle: through the constructor
        return (_settings, (self.as_dict(),))

    def replace(self, **changes: object) -> Settings:
        """A copy with ``changes``, read as the constructor reads them."""
        return Settings(**{**self.as_dict(), **changes})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Settings):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self.as_dict().values()))

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"

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
        settings = cls.__new__(cls)
        settings._set(_plainly_valid(values) or _by_model(values, env))
        return settings


def _settings(values: dict[str, object]) -> Settings:
    return Settings(**values)
