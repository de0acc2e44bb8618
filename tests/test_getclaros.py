"""`npx getclaros COMMAND` runs `claros COMMAND`: the npm launcher in npm/getclaros, run
through a real npx from the checkout, finds the client and passes exit codes through."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "npm" / "getclaros"
EXPORTS = REPO / "tests" / "data" / "exports"
NODE_BIN = Path(shutil.which("node") or "/usr/bin/node").parent

pytestmark = pytest.mark.skipif(
    shutil.which("npx") is None, reason="npx (Node 18+ with npm) is not installed"
)


def _npx(*args: str, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    # Only what the launcher may use: node, and the directories the test names.
    clean = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run(
        ["npx", "--yes", str(PACKAGE), *args], env=clean, capture_output=True, text=True,
        timeout=120, cwd=REPO, executable=shutil.which("npx"),
    )  # fmt: skip


def test_exit_codes_pass_through_from_claros() -> None:
    with_client = f"{Path(sys.executable).parent}:{NODE_BIN}:/bin"
    good = _npx("verify", "--export", str(EXPORTS / "example.jsonl"), path=with_client)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "OK: export" in good.stdout
    edited = _npx("verify", "--export", str(EXPORTS / "record-edited.jsonl"), path=with_client)
    assert edited.returncode == 1 and "edited" in edited.stdout
    missing = _npx("verify", "--export", "no-such-file.jsonl", path=with_client)
    assert missing.returncode == 2 and "no-such-file.jsonl" in missing.stderr


def test_claros_python_names_the_client() -> None:
    chosen = _npx("verify", "--help", path=f"{NODE_BIN}:/bin", CLAROS_PYTHON=sys.executable)
    assert chosen.returncode == 0 and "usage: claros verify" in chosen.stdout
    wrong = _npx("verify", path=f"{NODE_BIN}:/bin", CLAROS_PYTHON="/bin/true-not-python")
    assert wrong.returncode == 2
    assert "CLAROS_PYTHON=/bin/true-not-python cannot import the Claros client" in wrong.stderr


def test_without_the_client_it_says_how_to_install_it(tmp_path: Path) -> None:
    # A PATH with node and a shell (npx needs both) and nothing else: no claros, no python.
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("node", "sh"):
        found = shutil.which(tool)
        assert found is not None
        (bare / tool).symlink_to(found)
    done = _npx("verify", path=str(bare))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "getclaros: the Claros client is not installed" in done.stderr
