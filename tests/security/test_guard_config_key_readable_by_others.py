"""THREATS.md §2 (other local users): a guard config that holds the Claros key inline
(``claros: {key: ck_...}``) was used whatever its permissions; written with the usual
umask it is 0644, and every other user of the machine could read the key and check, ask
and report as this agent. As ssh does with a private key, the guard refuses such a file
(exit 2, with the fix), and takes it once only its owner may read it. A config whose key
comes from the environment (``key_env``, the default) holds no secret and may be read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from claros_guard.config import load_config
from claros_guard.errors import ConfigError

CONFIG = """\
claros: {url: "http://127.0.0.1:9", key: ck_agent_inline_0123456789}
servers:
  shop: {command: [python, shop_server.py]}
"""


def _config(tmp_path: Path, mode: int, text: str = CONFIG) -> Path:
    path = tmp_path / "guards.yaml"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_guard_refuses_a_key_others_may_read(tmp_path: Path) -> None:
    path = _config(tmp_path, 0o644)
    run = subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "guard", "--config", str(path)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert "others on this machine may read" in run.stderr and "chmod 600" in run.stderr
    assert "ck_agent_inline" not in run.stderr + run.stdout  # the key itself is never shown


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_any_group_or_other_bit_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ConfigError, match=f"mode {mode:04o}"):
        load_config(str(_config(tmp_path, mode)))


def test_the_owners_own_file_and_a_key_from_the_environment_are_taken(tmp_path: Path) -> None:
    assert load_config(str(_config(tmp_path, 0o600))).key() == "ck_agent_inline_0123456789"
    shared = CONFIG.replace("key: ck_agent_inline_0123456789", "key_env: CLAROS_KEY")
    assert load_config(str(_config(tmp_path, 0o644, shared))).claros.key is None
