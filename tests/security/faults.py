"""Fault injectors for tests/security/test_faults.py, each named for the fault it makes.

They fail the operating system's or SQLite's own call at its boundary, so the code under
test sees exactly what a full or read-only disk gives it, and they work when the tests run
as root (where ``chmod`` stops no write):

* ``KeyDirFault``: files created under a directory fail as a full disk does (the file is
  made, its writes fail with ENOSPC: the kernel's own /dev/full is put behind the file
  descriptor) or as a read-only filesystem does (the open fails with EROFS).
* ``SqliteDiskFault``: every connection to one SQLite file, open or opened later, can be
  made full (``PRAGMA max_page_count``: SQLite's real SQLITE_FULL, "database or disk is
  full") or opened read-only (``mode=ro``: SQLITE_READONLY).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

__all__ = ["KeyDirFault", "SqliteDiskFault"]

_NO_LIMIT = 1_073_741_823  # SQLite's default max_page_count


class KeyDirFault:
    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = str(root.absolute())
        self.error: int | None = None  # errno.ENOSPC or errno.EROFS while the fault is on
        self.hits = 0
        real_open = os.open

        def faulty_open(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
            name = str(Path(os.fsdecode(path)).absolute())
            mine = name.startswith(self.root + os.sep) and flags & os.O_CREAT
            if not mine or self.error is None:
                return real_open(path, flags, mode, **kwargs)
            self.hits += 1
            if self.error == errno.EROFS:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), name)
            fd = real_open(path, flags, mode, **kwargs)  # made, as on a full disk
            full = real_open("/dev/full", os.O_WRONLY)
            try:
                os.dup2(full, fd)  # every write now fails with ENOSPC, from the kernel
            finally:
                os.close(full)
            return fd

        monkeypatch.setattr(os, "open", faulty_open)


class SqliteDiskFault:
    def __init__(self, database: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.database = str(Path(database).absolute())
        self.read_only = False  # connections opened from now on are read-only
        self._full = False
        self._conns: list[sqlite3.Connection] = []
        real_connect = sqlite3.connect

        def connect(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
            mine = isinstance(target, str | Path) and str(Path(target).absolute()) == self.database
            if mine and self.read_only:
                target, kwargs["uri"] = f"file:{quote(self.database)}?mode=ro", True
            conn: sqlite3.Connection = real_connect(target, *args, **kwargs)
            if mine:
                self._conns.append(conn)
                self._limit(conn)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)

    def _limit(self, conn: sqlite3.Connection) -> None:
        # Below the current size SQLite keeps the current size: no page can be added.
        conn.execute(f"PRAGMA max_page_count = {1 if self._full else _NO_LIMIT}")

    def fill(self) -> None:
        self._full = True
        for conn in self._conns:
            self._limit(conn)

    def free(self) -> None:
        self._full = False
        for conn in self._conns:
            self._limit(conn)
