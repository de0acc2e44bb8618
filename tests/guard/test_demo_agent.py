"""``make run``: the demo serves Claros, pushes the example rules and mappings, and runs the
scripted agent once through the guard, printing each decision."""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> str:
    """stdout up to the line holding ``marker`` (bounded; the demo never ends by itself)."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if selector.select(timeout=deadline - time.monotonic()):
            line = proc.stdout.readline()
            out.append(line)
            if marker in line:
                break
    return "".join(out)


def test_make_run_drives_the_example_agent_through_the_guard(tmp_path: Path) -> None:
    peers = tempfile.mkdtemp(prefix="cd")
    env = {
        **os.environ,
        "CLAROS_PORT": str(_free_port()),
        "CLAROS_DATA": str(tmp_path / "data"),
        "CLAROS_PEER_DIR": peers,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "claros.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        out = _lines_until(proc, "decisions as expected", timeout=90)
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
        shutil.rmtree(peers, ignore_errors=True)
    assert "Ctrl-C stops it." in out and "Try:" in out
    assert "Pushed 8 rules and 3 mappings" in out
    for decision in ("read", "allow", "nudge", "stop", "ask→ran", "ask→no"):
        assert f" {decision} " in out, out
    assert "lookup on another server" in out
    assert "money written as text is still a number" in out
    assert "its total is unknown, so the rule fires (on_unknown)" in out
    assert "14 of 14 decisions as expected." in out, out
