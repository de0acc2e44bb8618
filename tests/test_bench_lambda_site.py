"""bench/lambda_site.py: the interpreter the cold-start benches time a function's handler
in imports the layer's packages and the runtime's boto3, and nothing else the
development venv has (whose extra packages the X-Ray patcher would import)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import lambda_site

pytestmark = pytest.mark.slow


def _imports(site: lambda_site.Site, module: str, tmp_path: Path) -> bool:
    env = lambda_site.lambda_env({"PATH": "/usr/bin:/bin"}, site, tmp_path)
    done = subprocess.run(
        [site.python, "-c", f"import {module}"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.returncode == 0


def test_the_site_has_the_layer_and_the_runtime_and_nothing_else(tmp_path: Path) -> None:
    site = lambda_site.build(tmp_path / "lambda")
    assert site is not None
    for module in ("claros.api.entry", "aws_xray_sdk.core", "httpx", "nacl", "boto3"):
        assert _imports(site, module, tmp_path), module
    # In the development venv (moto's, the tests', the CLI's), not in the layer.
    for module in ("requests", "rich", "moto", "pytest"):
        assert not _imports(site, module, tmp_path), module


def test_the_environment_is_lambdas(tmp_path: Path) -> None:
    site = lambda_site.Site("python", "/site:/layer")
    env = lambda_site.lambda_env({"HOME": "/h", "PYTHONPATH": "/elsewhere"}, site, tmp_path)
    assert env["LAMBDA_TASK_ROOT"] == str(tmp_path) and env["PYTHONPATH"] == "/site:/layer"
    assert env["AWS_LAMBDA_FUNCTION_NAME"] and env["HOME"] == "/h"


def test_a_missing_distribution_gives_no_site_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(lambda_site, "_lock", lambda: (["no-such-distribution"], frozenset()))
    assert lambda_site.build(tmp_path / "lambda") is None
    assert "no-such-distribution is not installed" in capsys.readouterr().out
