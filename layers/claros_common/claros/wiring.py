"""Builds the store and signer a process uses, from Settings. The only place that picks
between local (SQLite + key file) and AWS (DynamoDB + KMS)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from claros.config import ConfigError, Settings
from claros.signing import FileSigner, KmsSigner, Signer
from claros.store.base import Store, StoreError
from claros.tamper import DynamoTamperLog, GuardedSigner, TamperLog

if TYPE_CHECKING:  # imported where built: only a process whose settings name one pays
    from claros.anchor import Anchor  # (the mapper drags in the mapping models; every
    from claros.mapping.mapper import ModelMapper  # function's cold start paid for them)
    from claros.rules.judge import Judge

__all__ = ["Services", "build_services", "open_signer", "open_store"]


def _dynamodb() -> Any:
    import boto3  # only the AWS side imports boto3, and only when it runs there

    return boto3.client("dynamodb")


def _kms() -> Any:
    import boto3

    return boto3.client("kms")


def open_store(settings: Settings, *, create: bool = True) -> Store:
    """The store ``settings`` name. Locally, ``create`` makes the data directory and its
    database on first use (the server, ``claros.auth create``); without it, a data
    directory holding no database is a StoreError (``no Claros data at PATH``), so a
    command that only reads never leaves an empty one behind a typo."""
    if settings.store == "dynamodb":
        from claros.store.dynamo import DynamoStore

        return DynamoStore(
            _dynamodb(),
            settings.ledger_table,
            settings.records_table,
            settings.state_table,
        )
    from claros.store.sqlite import SqliteStore

    data = Path(settings.data_dir)
    database = data / "claros.db"
    if not create:
        if not database.is_file():
            raise StoreError(f"no Claros data at {data}")
    else:
        try:
            data.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError as exc:
            raise StoreError(f"{data} is a file, not a Claros data directory") from exc
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise StoreError(f"cannot make the Claros data directory {data}: {why}") from exc
        _not_writable_by_others(data)
    return SqliteStore(database, sync=settings.sqlite_sync)


def _not_writable_by_others(data: Path) -> None:
    """A data directory others may write lets them swap ``claros.db`` for their own (with
    their admin key in it), between starts or under a running server, whose threads open
    the file by name: one of this user's is narrowed (group and others lose write), one of
    another user's is refused (THREATS.md §2)."""
    try:
        info = data.stat()
        if not info.st_mode & 0o022:
            return
        if info.st_uid == os.geteuid():
            data.chmod(stat.S_IMODE(info.st_mode) & ~0o022)
            return
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise StoreError(f"cannot keep others from writing in {data}: {why}") from exc
    raise StoreError(
        f"others may write in the Claros data directory {data} (mode "
        f"{stat.S_IMODE(info.st_mode):04o}, owned by uid {info.st_uid}): they could swap "
        "its database; use a directory of your own"
    )


def open_signer(settings: Settings) -> Signer:
    if settings.signer == "kms":
        return KmsSigner(
            _kms(),
            signer_role_arn=settings.kms_signer_role_arn,
            alias_prefix=settings.kms_alias_prefix,
        )
    return FileSigner(settings.data_dir)


def _no_metric(name: str, value: float) -> None:
    """The default ``Services.metric``: counts go nowhere."""


class Services:
    """What request handlers work with; built once per process (or per Lambda container).
    A plain class (the dataclass it was cost every function's cold start ~1 ms to define)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        signer: Signer,
        # Where signed checkpoints are also copied (AWS: an Object Lock bucket), if anywhere.
        anchor: Anchor | None = None,
        # Counts for dashboards (Lambda: Powertools Metrics); a no-op by default.
        metric: Callable[[str, float], None] = _no_metric,
        # What decides rules without ``when`` (claros.rules.judge); none by default.
        judge: Judge | None = None,
        # What proposes mappings with a model (claros.mapping.mapper); none by default.
        mapper: ModelMapper | None = None,
        # AWS: tampering seen on the tables' streams (claros.tamper); none locally.
        tamper: TamperLog | None = None,
    ) -> None:
        self.settings, self.store, self.signer, self.anchor = settings, store, signer, anchor
        self.metric = metric
        self.judge, self.mapper, self.tamper = judge, mapper, tamper

    @property
    def counts_metrics(self) -> bool:
        """Whether something collects ``metric`` counts (not the no-op default)."""
        return self.metric is not _no_metric

    def close(self) -> None:
        self.store.close()


def open_anchor(settings: Settings) -> Anchor | None:
    if not settings.anchor_bucket:
        return None
    import boto3

    from claros.anchor import S3Anchor

    return S3Anchor(boto3.client("s3"), settings.anchor_bucket)


def open_tamper_log(settings: Settings, store: Store) -> TamperLog | None:
    """Where the stream watcher records tampering: AWS only (SQLite refuses the edits
    themselves, with triggers)."""
    if settings.store != "dynamodb":
        return None
    return DynamoTamperLog(
        getattr(store, "client", None) or _dynamodb(),
        settings.state_table,
        settings.records_table,
        settings.ledger_table,
    )


def build_services(settings: Settings | None = None, *, create: bool = True) -> Services:
    settings = settings or Settings.from_env()
    store = open_store(settings, create=create)
    signer = open_signer(settings)
    tamper = open_tamper_log(settings, store)
    if tamper is not None:
        # Tampering stops every signature for its workspace until an admin acknowledges it.
        signer = GuardedSigner(signer, store, tamper)
    judge, mapper = open_judge(settings), open_mapper(settings)
    return Services(
        settings, store, signer, open_anchor(settings), tamper=tamper, judge=judge, mapper=mapper
    )


def open_judge(settings: Settings) -> Judge | None:
    """The judge ``CLAROS_JUDGE`` names, its module imported only then."""
    if settings.judge in ("", "none"):
        return None
    from claros.rules.judges import judge_from_settings

    try:
        return judge_from_settings(settings.judge, settings.judge_model)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def open_mapper(settings: Settings) -> ModelMapper | None:
    if not settings.mapper_model:
        return None
    from claros.mapping.mapper import model_mapper

    return model_mapper(settings.mapper_model)
