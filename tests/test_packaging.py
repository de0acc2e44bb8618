"""What `pipx install getclaros` and `pip install 'getclaros[server]'` would give a user:
the wheel and the sdist `python -m build` makes, each installed into a fresh venv, run as
a user runs them (`claros --version`, `claros verify --export`, `claros serve`)."""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EXPORTS = REPO / "tests" / "data" / "exports"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
SERVER_ONLY = ("boto3", "botocore", "aws_lambda_powertools", "aws_xray_sdk")
# No .pyc compiling at install (botocore alone is thousands of modules): the test runs
# a few commands once, and that is most of an install's time.
INSTALL = ("install", "--disable-pip-version-check", "-q", "--no-compile")


def _run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=Path(args[0]).parent)  # fmt: skip


def _venv(where: Path, install: str) -> Path:
    """A fresh venv at ``where`` with ``install`` (a built file, maybe with an extra).
    The venv gets no pip of its own (as pipx makes them): this pip installs into it with
    ``--python``. Putting pip into each venv (ensurepip) cost ~4 s of CPU, for nothing the
    test looks at."""
    made = _run(sys.executable, "-m", "venv", "--without-pip", where)
    assert made.returncode == 0, made.stderr
    python = where / "bin" / "python"
    done = _run(sys.executable, "-m", "pip", "--python", python, *INSTALL, install, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return where / "bin"


# What a checkout holds that is not the project's source: never copied into the build.
NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".aws-sam",
              "node_modules", ".claros", ".mypy_cache", ".ruff_cache", ".pytest_cache")  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # Built from a copy of the checkout: setuptools writes its egg-info and the sdist's
    # release tree into the source directory, and nothing a test does may write into the
    # checkout (other test processes read it, and a second build there would race).
    source = tmp_path_factory.mktemp("source") / "getclaros"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE), symlinks=True)
    out = tmp_path_factory.mktemp("dist")
    done = _run(sys.executable, "-m", "build", "--outdir", out, source, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("getclaros-*.whl")
    (sdist,) = out.glob("getclaros-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist, "out": out}


@pytest.fixture(scope="module")
def venvs(built: dict[str, Path]) -> dict[str, Path]:
    """The client alone from the sdist, the server extra from the wheel: made side by side."""
    jobs: dict[str, Callable[[], Path]] = {
        "client": lambda: _venv(built["out"] / "client", str(built["sdist"])),
        "server": lambda: _venv(built["out"] / "server", f"{built['wheel']}[server]"),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in running.items()}


def test_the_wheel_holds_both_packages_and_the_web_assets_and_no_tests(
    built: dict[str, Path],
) -> None:
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = wheel.namelist()
        info = f"getclaros-{PROJECT['version']}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"claros", "claros_guard", info}, tops
    assert {"claros/web/static/claros.css", "claros/web/static/claros.js"} <= set(names)
    assert "claros_guard/cli.py" in names and f"{info}/licenses/LICENSE" in names
    assert not [n for n in names if "/tests/" in n or n.split("/")[-1].startswith("test_")]
    assert "Name: getclaros\n" in metadata and "License-Expression: Apache-2.0\n" in metadata
    # boto3 and Powertools come only with an extra (server; dev adds the stubs).
    needs = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    base = [line for line in needs if "extra ==" not in line]
    assert base and not [line for line in base if "boto3" in line or "powertools" in line]
    assert any("aws-lambda-powertools" in n and 'extra == "server"' in n for n in needs)


def test_the_sdist_holds_the_sources_the_licence_and_no_tests(built: dict[str, Path]) -> None:
    with tarfile.open(built["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "LICENSE", "guard/claros_guard/cli.py",
            "layers/claros_common/claros/web/static/claros.js"} <= names  # fmt: skip
    assert not [n for n in names if n.startswith("tests/")]


def _verify_both_ways(bin_dir: Path) -> None:
    good = _run(bin_dir / "claros", "verify", "--export", EXPORTS / "example.jsonl")
    assert good.returncode == 0 and "OK: export" in good.stdout, good.stdout + good.stderr
    edited = _run(bin_dir / "claros", "verify", "--export", EXPORTS / "record-edited.jsonl")
    assert edited.returncode == 1 and "edited" in edited.stdout, edited.stdout + edited.stderr


def test_the_client_alone_runs_without_boto3_or_powertools(venvs: dict[str, Path]) -> None:
    client = venvs["client"]
    version = _run(client / "claros", "--version")
    assert version.stdout == f"claros {PROJECT['version']}\n", version.stderr
    _verify_both_ways(client)
    for module in SERVER_ONLY:
        absent = _run(client / "python", "-c", f"import {module}")
        assert absent.returncode == 1 and "ModuleNotFoundError" in absent.stderr, module
    serve = _run(client / "claros", "serve", "--port", "0", "--data", client.parent / "data")
    assert serve.returncode == 2
    assert "needs the server extra (pip install 'getclaros[server]')" in serve.stderr


def test_the_server_extra_serves(venvs: dict[str, Path]) -> None:
    server = venvs["server"]
    version = _run(server / "claros", "--version")
    assert version.stdout == f"claros {PROJECT['version']}\n", version.stderr
    _verify_both_ways(server)
    proc = subprocess.Popen(
        [str(server / "claros"), "serve", "--port", "0", "--data", str(server.parent / "data")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=server.parent,
    )  # fmt: skip
    try:
        url = _wait_for_banner(proc, timeout=60)
        with httpx.Client(base_url=url, timeout=10) as http:
            # Up and answering as Claros: a request without a key is refused with a reason.
            reply = http.get("/v1/ledger/entries")
            assert reply.status_code == 401, reply.text
            # The web app's assets come from the installed package data.
            css = http.get("/app/static/claros.css")
            assert css.status_code == 200 and css.text, css.status_code
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def _wait_for_banner(proc: subprocess.Popen[str], timeout: float) -> str:
    """The URL from `Claros listening on URL`, read from stderr (bounded)."""
    assert proc.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stderr, selectors.EVENT_READ)
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if selector.select(timeout=deadline - time.monotonic()):
            line = proc.stderr.readline()
            seen.append(line)
            if "Claros listening on " in line:
                return line.split("Claros listening on ", 1)[1].split()[0]
    raise AssertionError(f"no banner from claros serve: {''.join(seen)}")
