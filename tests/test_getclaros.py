"""`npx getclaros COMMAND` runs `claros COMMAND`: the npm launcher in npm/getclaros, run
through a real npx from the checkout and from the tarball `npm pack` makes (what would be
published), offline, finds the client and passes exit codes through."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
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
    assert "pipx install getclaros" in done.stderr and "pip install getclaros" in done.stderr


# --- the tarball, as npm would publish it ------------------------------------------------
@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("pack")
    offline = {"PATH": f"{NODE_BIN}:/usr/bin:/bin", "HOME": str(out),
               "npm_config_offline": "true", "npm_config_cache": str(out / "cache")}  # fmt: skip
    done = subprocess.run(
        ["npm", "pack", "--pack-destination", str(out)], cwd=PACKAGE, env=offline,
        capture_output=True, text=True, timeout=120, executable=shutil.which("npm"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (made,) = out.glob("getclaros-*.tgz")
    yield made


def _npx_tarball(tarball: Path, *args: str, path: str) -> subprocess.CompletedProcess[str]:
    # Offline, with a cache of its own: npx installs the tarball and nothing from a registry.
    home = tarball.parent
    env = {
        "PATH": path,
        "HOME": str(home),
        "npm_config_offline": "true",
        "npm_config_cache": str(home / "cache"),
        "npm_config_update_notifier": "false",
    }
    return subprocess.run(
        ["npx", "--yes", "--package", str(tarball), "getclaros", *args], env=env,
        capture_output=True, text=True, timeout=120, cwd=REPO, executable=shutil.which("npx"),
    )  # fmt: skip


def test_the_tarball_holds_the_launcher_and_agrees_with_pyproject(tarball: Path) -> None:
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        manifest = json.load(tar.extractfile("package/package.json"))  # type: ignore[arg-type]
    assert names == {"package/package.json", "package/bin/getclaros.js", "package/README.md"}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert manifest["name"] == project["name"] == "getclaros"
    assert manifest["version"] == project["version"]
    assert manifest["license"] == project["license"]
    assert manifest["bin"] == {"getclaros": "bin/getclaros.js"}


def test_npx_on_the_tarball_passes_the_clients_exit_codes(tarball: Path) -> None:
    with_client = f"{Path(sys.executable).parent}:{NODE_BIN}:/usr/bin:/bin"
    for export, code in (("example.jsonl", 0), ("record-edited.jsonl", 1), ("none.jsonl", 2)):
        args = ("verify", "--export", str(EXPORTS / export))
        direct = subprocess.run([str(Path(sys.executable).parent / "claros"), *args],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        through = _npx_tarball(tarball, *args, path=with_client)
        assert direct.returncode == through.returncode == code, through.stdout + through.stderr
        assert through.stdout == direct.stdout
    version = _npx_tarball(tarball, "--version", path=with_client)
    assert version.returncode == 0 and version.stdout.startswith("claros "), version.stderr


def test_npx_on_the_tarball_without_the_client_names_the_install_command(
    tarball: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("node", "sh"):
        found = shutil.which(tool)
        assert found is not None
        (bare / tool).symlink_to(found)
    done = _npx_tarball(tarball, "verify", path=str(bare))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pipx install getclaros" in done.stderr, done.stderr
