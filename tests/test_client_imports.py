"""The client installs alone (`pipx install getclaros`, no server extra): no module of
claros_guard, nor any claros module it imports, may need boto3 or Powertools to import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXPORT = Path(__file__).resolve().parent / "data" / "exports" / "example.jsonl"

# Run in a fresh interpreter where the server extra's packages cannot be imported at all.
PROBE = """
import importlib, pkgutil, sys

SERVER_ONLY = ("boto3", "botocore", "aws_lambda_powertools", "aws_xray_sdk", "s3transfer")


class NoServerExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in SERVER_ONLY:
            raise ImportError(f"{name} is in the server extra only")
        return None


sys.meta_path.insert(0, NoServerExtra())
import claros_guard

for module in pkgutil.walk_packages(claros_guard.__path__, "claros_guard."):
    importlib.import_module(module.name)
from claros_guard.cli import main

code = main(["verify", "--export", sys.argv[1]])
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(SERVER_ONLY))
print("server-only modules loaded:", loaded)
sys.exit(code)
"""


def test_every_client_module_imports_without_the_server_extra() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(EXPORT)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: export" in done.stdout
    assert "server-only modules loaded: []" in done.stdout


def test_serve_without_the_server_extra_names_the_install_command(tmp_path: Path) -> None:
    probe = PROBE.split("import claros_guard")[0] + (
        "from claros_guard.cli import main\nsys.exit(main(['serve', '--data', sys.argv[1]]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "claros serve needs the server extra (pip install 'getclaros[server]')" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
