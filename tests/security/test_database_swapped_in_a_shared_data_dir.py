"""Another local user swaps the database under ``claros serve`` (THREATS.md §2).

``claros serve --data DIR`` used a data directory others may write as it found it (a
Docker volume or a shared folder made 0777, a directory made under umask 000): anyone
could rename ``claros.db`` away and put their own in its place, with their own admin key
in it. The server's threads open the file by name, so the next connection, and the next
start, used theirs: every check, ask and approval then went through the other user's
ledger.

Now a data directory of this user's loses group and other write when the server opens it,
and one of another user's that others may write is refused.

Seen to fail on the old code: the other user's ``os.rename`` of ``claros.db`` succeeded
(``the other user could move the database: ok``), and ``claros serve`` used another user's
world-writable directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="acting as another user needs root")

# Run as another user: try to move the database away (what a swap starts with).
AS_NOBODY = (
    "import os, sys; os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
    "try:\n"
    "    os.rename(sys.argv[1], sys.argv[1] + '.theirs')\n"
    "    print('ok')\n"
    "except OSError as exc:\n"
    "    print(type(exc).__name__)\n"
)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory other users can reach (pytest's own are 0700), removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="claros-shared-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(data: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "claros_guard.cli", "serve", "--data", str(data),
         "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            return proc
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/me", timeout=2)
            return proc
        except httpx.HTTPError:
            assert time.monotonic() < deadline, "claros serve did not start in 60 s"
            time.sleep(0.1)


def test_another_user_cannot_move_the_database_of_a_running_server(shared: Path) -> None:
    data = shared / "data"
    data.mkdir()
    data.chmod(0o777)  # as a volume or a shared folder often is
    proc = _serve(data)
    try:
        assert proc.poll() is None, proc.communicate()[0].decode()
        moved = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, str(data / "claros.db")],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert moved.returncode == 0, moved.stderr
        assert moved.stdout.strip() == "PermissionError", (
            f"the other user could move the database: {moved.stdout.strip()}"
        )
        assert not stat.S_IMODE(data.stat().st_mode) & 0o022
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_data_directory_of_another_user_that_others_may_write_is_refused(
    shared: Path,
) -> None:
    data = shared / "data"
    data.mkdir()
    data.chmod(0o777)
    os.chown(data, NOBODY, NOBODY)
    proc = _serve(data)
    if proc.poll() is None:
        proc.terminate()
    out = proc.communicate(timeout=30)[0].decode()
    assert proc.returncode == 2, out
    assert f"others may write in the Claros data directory {data} (mode 0777" in out, out
    assert "Traceback" not in out
    assert not (data / "claros.db").exists()
