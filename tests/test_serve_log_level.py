"""``claros serve`` reads ``$CLAROS_LOG`` as the guard does: WARNING leaves out the line
it logs per request (and what writing it costs), a level that is none is refused."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_and_get(data: Path, level: str | None) -> str:
    """Start ``claros serve``, GET one route, stop it: what it wrote on stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    if level is not None:
        env["CLAROS_LOG"] = level
    port = _free_port()
    log = data / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claros_guard.cli", "serve", "--data", str(data),
             "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT,
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
            assert answer.status_code == 401  # no key: the request still went through
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return log.read_text()


@pytest.mark.parametrize(("level", "logged"), [(None, True), ("info", True), ("WARNING", False)])
def test_serve_logs_a_line_per_request_only_at_info(
    tmp_path: Path, level: str | None, logged: bool
) -> None:
    text = _serve_and_get(tmp_path, level)
    assert ('"GET /v1/me HTTP/1.1" 401' in text) is logged, text
    assert "Traceback" not in text


def test_serve_refuses_a_log_level_that_is_none(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    done = subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "serve", "--port", "0", "--data",
         str(tmp_path)],
        env={**env, "CLAROS_LOG": "loud"}, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "claros serve: CLAROS_LOG='loud' is not a log level: use DEBUG, INFO, WARNING, ERROR,"
        " CRITICAL"
    ]
    assert not any(tmp_path.iterdir())  # refused before anything was made
