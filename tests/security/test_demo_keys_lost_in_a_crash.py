"""``make run`` killed at the worst moment never starts again (THREATS.md §2, §6).

The demo makes its keys in the database, then writes them to ``demo-keys.json`` (Claros
keeps only their hashes). It wrote that file in place (``O_TRUNC``): a demo killed between
the two (Ctrl-C twice, a closed terminal, kill -9), or as it wrote the file, left a
database whose demo members were made and a keys file that was missing or cut short; every
later ``make run`` then stopped with a traceback (``ConflictError: dana@example.com is a
member already``, or ``JSONDecodeError``) until ``make clean`` threw the ledger away.

Now the file is written whole or not at all (a temporary file, fsync, a rename), and a
start that finds it missing or damaged over a workspace made before makes new keys for the
members already there, says so, and serves.

Seen to fail on the old code: the second start exited 1 with ``ConflictError: dana@example.com
is a member already`` (killed before the file) and ``json.decoder.JSONDecodeError`` (a file
cut short).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx

# The real demo, killed with SIGKILL by itself the moment it opens the keys file (or its
# temporary file): the database then holds the demo's members, the file does not exist.
KILLED_AT_THE_KEYS_FILE = textwrap.dedent(
    """
    import os, runpy, signal
    real_open = os.open
    def open_then_die(path, flags, *args, **kwargs):
        if "demo-keys" in os.fsdecode(path):
            os.kill(os.getpid(), signal.SIGKILL)
        return real_open(path, flags, *args, **kwargs)
    os.open = open_then_die
    runpy.run_module("claros.demo", run_name="__main__")
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(data: Path, port: int) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    return {**clean, "CLAROS_PORT": str(port), "CLAROS_DATA": str(data),
            "CLAROS_DEMO_AGENT": "0"}  # fmt: skip


def _start(data: Path) -> tuple[str, dict[str, str]]:
    """Start ``python -m claros.demo``; once it serves, (what it printed, its keys); each
    key is tried on the server it started. The process is stopped."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "claros.demo"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=_env(data, port),
    )  # fmt: skip
    try:
        lines: list[str] = []
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        out = "".join(lines)
        assert "Ctrl-C" in out, f"the demo did not start:\n{out}"
        keys = dict(re.findall(r"^  (admin|person|agent|service|audit) .*?(ck_\S+)", out, re.M))
        assert set(keys) == {"admin", "person", "agent", "service", "audit"}, out
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            for kind, key in keys.items():
                me = http.get("/v1/me", headers={"Authorization": f"Bearer {key}"})
                assert me.status_code == 200, (kind, me.text)
        return out, keys
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_demo_killed_before_its_keys_file_starts_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_KEYS_FILE], capture_output=True, text=True,
        env=_env(data, _free_port()), timeout=120, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (data / "claros.db").exists() and not (data / "demo-keys.json").exists()
    out, keys = _start(data)
    assert "Traceback" not in out
    assert "new keys" in out, out  # it says why the keys are not the ones shown before
    again, same = _start(data)  # and from then on the same keys, as before
    assert same == keys and "new keys" not in again
    assert (data / "demo-keys.json").stat().st_mode & 0o777 == 0o600


def test_a_keys_file_cut_short_is_not_a_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _, keys = _start(data)
    kept = data / "demo-keys.json"
    first_text = kept.read_text()[:20]
    kept.write_text(first_text)  # as a crash mid-write (the old write) left it
    out, fresh = _start(data)
    assert "Traceback" not in out
    assert "new keys" in out, out
    assert fresh["admin"] != keys["admin"]
    assert (data / "demo-keys.json.damaged").read_text() == first_text  # kept to look at
