"""Another local user reads the local server's database (THREATS.md §2).

SQLite creates its files 0644 whatever the umask (its default file mode, which the umask
can only narrow), and its -wal and -shm files with the database's mode. So a data
directory another user can enter (made by ``mkdir`` before ``claros serve``, a shared
volume, ``--data /srv/claros``) gave every local user every record (the arguments of
every checked call, the facts read for it) and the ask webhook's secret, which the
database keeps as it is to sign with. The database, its -wal and -shm must be 0600 under
any umask, and a database an older version left 0644 is narrowed when the server opens it.

Seen to fail on the old code: ``claros.db is mode 0o644, not 0o600`` (umask 000 and 002
alike).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

FILES = ("claros.db", "claros.db-wal", "claros.db-shm")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_once(data: Path, umask: int) -> None:
    """Run the real ``claros serve`` under ``umask`` until it has answered a request (so
    the database and its WAL are there), then stop it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    port = _free_port()
    log = data.parent / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claros_guard.cli", "serve", "--data", str(data),
             "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=lambda: os.umask(umask),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    answer = httpx.get(f"http://127.0.0.1:{port}/v1/me", timeout=2)
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, "claros serve did not start in 60 s"
                    time.sleep(0.1)
            assert answer.status_code == 401, answer.text
            # While it runs: the -wal and -shm are there (they go when it stops cleanly).
            for name in FILES:
                _assert_private(data / name)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert "Traceback" not in log.read_text()


def _assert_private(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == 0o600, f"{path.name} is mode {oct(mode)}, not 0o600"


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022])
def test_the_database_is_the_users_alone_under_any_umask(tmp_path: Path, umask: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)  # made beforehand, as mkdir or a volume makes it: others may enter
    _serve_once(data, umask)
    _assert_private(data / "claros.db")


def test_a_database_left_readable_by_an_older_version_is_narrowed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    db = sqlite3.connect(data / "claros.db")  # as an older version left it
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE older (x)")
        db.commit()
    finally:
        db.close()
    (data / "claros.db").chmod(0o644)
    _serve_once(data, 0o022)
    _assert_private(data / "claros.db")
