"""Storage behind one protocol: SQLite (the embedded default) and DynamoDB (AWS)."""

from claros.store.base import (
    GLOBAL,
    ChainBusyError,
    ConflictError,
    Doc,
    DocWrite,
    NewRecord,
    PruneError,
    PruneResult,
    RecordTooLargeError,
    Store,
    StoreError,
)

__all__ = [
    "GLOBAL",
    "ChainBusyError",
    "ConflictError",
    "Doc",
    "DocWrite",
    "NewRecord",
    "PruneError",
    "PruneResult",
    "RecordTooLargeError",
    "Store",
    "StoreError",
]
