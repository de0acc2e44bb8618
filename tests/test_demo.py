"""``make run``'s program, as a newcomer meets it: start it, run the commands it prints."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_demo_prints_keys_and_commands_that_work(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "CLAROS_PORT": str(port), "CLAROS_DATA": str(tmp_path / "data")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "claros.demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip
    try:
        lines: list[str] = []
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        out = "".join(lines)
        assert f"http://127.0.0.1:{port}" in out, out
        keys = dict(re.findall(r"^  (admin|agent|service|audit) .*?(ck_\S+)$", out, re.M))
        assert set(keys) == {"admin", "agent", "service", "audit"}, out
        # The "Try:" block, run as printed.
        block = out.split("Try:\n", 1)[1].split("\nCtrl-C", 1)[0]
        # The first line puts this venv's claros on PATH: its absolute bin, found at run time.
        bin_dir = Path(sys.executable).absolute().parent
        assert block.startswith(f'  export PATH={bin_dir}:"$PATH"'), block
        assert "\n  claros verify " in block
        script = "set -e\n" + block.replace("curl -s", "curl -sf")
        # A PATH without the venv, as a new shell has: only the printed line brings claros.
        bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              timeout=60, env=bare)  # fmt: skip
        assert done.returncode == 0, done.stderr + done.stdout
        assert '"result":"allow"' in done.stdout and '"ok":true' in done.stdout
        assert "OK:" in done.stdout, done.stdout  # claros verify, run from the printed PATH
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            entries = http.get("/v1/ledger/entries", headers={"Authorization":
                               f"Bearer {keys['agent']}"}).text  # fmt: skip
            assert entries.count("\n") >= 1
        assert (tmp_path / "data" / "demo-keys.json").stat().st_mode & 0o777 == 0o600
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # also closes its pipes


def test_readme_opens_with_the_two_commands() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    head = readme.split("```", 2)[1]
    assert "make run" in head and "make test" in head
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "make test" in ci


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CLAROS_PORT": "eighty"}, "CLAROS_PORT must be a port number (0 to 65535), not 'eighty'"),
        ({"CLAROS_PORT": "70000"}, "CLAROS_PORT must be a port number"),
        ({"CLAROS_LEDGER_CHECKPOINT_EVERY": "x"}, "CLAROS_LEDGER_CHECKPOINT_EVERY"),
    ],
)
def test_demo_refuses_a_bad_environment_in_one_line(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "claros.demo"],
        env={**os.environ, "CLAROS_DATA": str(tmp_path / "data"), **env},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


def test_demo_ledger_has_a_member_role_entry_for_every_member(tmp_path: Path) -> None:
    """Who could act when is on the demo's ledger: each member it adds joins in one
    transaction with their ``member_role`` entry, with the role they hold."""
    from claros.config import Settings
    from claros.demo import WORKSPACE, _keys
    from claros.people import list_members
    from claros.store.sqlite import SqliteStore

    settings = Settings(data_dir=tmp_path / "data")
    (tmp_path / "data").mkdir()
    keys = _keys(settings)
    assert set(keys) == {"admin", "person", "agent", "service", "audit"}
    store = SqliteStore(tmp_path / "data" / "claros.db")
    try:
        members = {m["email"]: m["role"] for m in list_members(store, WORKSPACE)}
        roles: dict[str, str] = {}
        for entry, record in store.entries_with_records(WORKSPACE):
            if entry.kind == "member_role":
                assert record is not None
                roles[record["person"]] = record["role"]  # the last entry per person
        assert members == {"admin@example.com": "admin", "dana@example.com": "member"}
        assert roles == members
    finally:
        store.close()
