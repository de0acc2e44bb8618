"""An answered check survives a power cut (THREATS.md §6): every connection the SQLite
store opens, in the server's threads too, syncs the write-ahead log at each commit
(``PRAGMA synchronous=FULL``) unless ``CLAROS_SQLITE_SYNC=normal`` asks for the faster
setting that survives a killed process only (docs/ledger.md, "Storage")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from claros.config import Settings
from claros.store.sqlite import SqliteStore
from claros.wiring import open_store

# PRAGMA synchronous reads back as a number.
FULL, NORMAL = 2, 1


def _synchronous_in_each_thread(store: SqliteStore) -> set[int]:
    """The setting of the store's connection in this thread and in two new ones (the
    local server serves each request in a thread of its own, on that thread's connection)."""
    seen: set[int] = set()
    made: list[int] = []

    def read() -> None:
        store.append("acme", "check", f"c{len(made)}", {"result": "allow"})
        made.append(1)
        seen.add(store._conn().execute("PRAGMA synchronous").fetchone()[0])

    read()
    for _ in range(2):  # one after the other: each its own thread, and its own connection
        thread = threading.Thread(target=read)
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive()
    return seen


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, FULL),
        ({"CLAROS_SQLITE_SYNC": "full"}, FULL),
        ({"CLAROS_SQLITE_SYNC": "normal"}, NORMAL),
    ],
    ids=["default", "full", "normal"],
)
def test_every_connection_syncs_as_the_setting_says(
    tmp_path: Path, env: dict[str, str], expected: int
) -> None:
    settings = Settings.from_env({"CLAROS_DATA": str(tmp_path / "data"), **env})
    store = open_store(settings)
    assert isinstance(store, SqliteStore)
    try:
        assert _synchronous_in_each_thread(store) == {expected}
    finally:
        store.close()
