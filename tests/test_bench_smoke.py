"""Every benchmark still runs: each at a tiny size, so a change that breaks one is seen in
the test run rather than the next time someone measures. Nothing here looks at a time
(benches never assert one); the benches' own checks (a failed call, a chain that does not
add up) still raise."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import __main__ as bench_main
from bench import (
    append,
    canonical,
    capacity,
    coldstart,
    decide,
    export,
    first_request,
    guard,
    hooks,
    lambda_site,
    pages,
    roundtrip,
    server,
    verify,
)

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]

TINY: dict[str, Callable[[], Any]] = {
    "append": lambda: append.main(total=64),
    "append_group": lambda: bench_main.append_group(writers=(1, 2), total=8),
    "canonical": lambda: canonical.main(n=20),
    "decide": lambda: decide.main(n=5),
    "export": lambda: export.main(sizes=(200,)),
    "guard": lambda: guard.main(calls=2, rounds=3),
    "hooks": lambda: hooks.main(pairs=1, rounds_=3),
    "server": lambda: server.main(requests=8, clients=(1, 2)),
    "pages": lambda: pages.main(["300"]) or True,
    "coldstart": lambda: coldstart.main() or True,
    "first_request": lambda: first_request.main() or True,
    "capacity": lambda: capacity.main(pairs=5, every=10, environments=(1, 3)),
    "verify": lambda: verify.main(sizes=(200,)),
    "roundtrip": lambda: roundtrip.main(calls=2, rounds=3),
}


def test_every_bench_has_a_tiny_run() -> None:
    assert sorted(TINY) == sorted(bench_main.BENCHES)


@pytest.mark.parametrize("name", sorted(TINY))
def test_bench_runs_at_a_tiny_size(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(verify, "RESULTS", tmp_path / "results")  # not the checkout's cache
    monkeypatch.setenv("BENCH_COLDSTART_ROUNDS", "1")
    monkeypatch.setenv("BENCH_PAGES_CACHE", str(tmp_path / "ledgers"))
    result = TINY[name]()
    assert result
    out = capsys.readouterr().out
    assert "load average" in out  # every figure says how loaded the machine was
    if name in ("coldstart", "first_request"):  # the handler built as Lambda builds it
        assert "as Lambda runs it" in out, out


def test_an_unknown_bench_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["nonesuch"]) == 2
    assert "unknown benchmark(s): nonesuch" in capsys.readouterr().err


def test_the_guards_http_client_sets_nodelay_and_keeps_its_connection() -> None:
    # The round-trip bench raises if a request reconnected; Nagle's algorithm with delayed
    # ACKs would add up to ~40 ms to a small write, so the guard's socket must not wait.
    assert roundtrip.main(calls=2, rounds=3)["nodelay"] is True


@pytest.mark.parametrize("how", ["console script", "checkout"])
def test_verify_runs_the_code_before_beside_this(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # BENCH_VERIFY_BEFORE: another checkout's claros script (started as a user's is), or a
    # directory holding another checkout's code. Here: this very code, either way.
    monkeypatch.setattr(verify, "RESULTS", tmp_path / "results")
    before = verify._claros() if how == "console script" else str(Path(__file__).parents[1])
    monkeypatch.setenv("BENCH_VERIFY_BEFORE", before)
    assert Path(verify._before()[0]).name == ("claros" if how == "console script" else "env")
    rows = verify.measure(200, repeat=1)["rows"]
    assert rows[-1]["name"] == "before: verify --export (200)"
    assert "before: verify --export (200)" in capsys.readouterr().out


def _coldstart_on(
    python: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    """What bench coldstart says on stderr, run with BENCH_COLDSTART_PYTHON=``python``
    (the exit code must be 2: a figure on the wrong interpreter is worse than none)."""
    monkeypatch.setenv("BENCH_COLDSTART_PYTHON", python)
    with pytest.raises(SystemExit) as stopped:
        coldstart.main()
    assert stopped.value.code == 2
    return capsys.readouterr().err


def test_coldstart_refuses_an_interpreter_it_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "python3.13")
    err = _coldstart_on(missing, monkeypatch, capsys)
    assert f"BENCH_COLDSTART_PYTHON={missing}: cannot run" in err, err


@pytest.mark.parametrize(
    ("prints", "reason"),
    [
        ("echo 3.9", "is Python 3.9; Claros needs 3.11+"),
        ("exit 3", "is not a Python interpreter"),
        ("echo three", "printed 'three' for its version"),
    ],
)
def test_coldstart_refuses_what_is_no_python_it_can_use(
    prints: str,
    reason: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{prints}\n")
    fake.chmod(0o755)
    assert reason in _coldstart_on(str(fake), monkeypatch, capsys)


def test_runtime_site_says_why_pip_could_not_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No index to install from (PIP_NO_INDEX): pip fails; the site says so, and no stamp is
    # left behind to make the half-built venv look ready next time.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    with pytest.raises(lambda_site.SiteError, match="pip could not install the layer's packages"):
        lambda_site.runtime_site(sys.executable, tmp_path / "sites")
    assert not list((tmp_path / "sites").glob("*/claros-pins.json"))


def test_runtime_site_imports_each_function_from_the_lock_alone(tmp_path: Path) -> None:
    # Built for this very interpreter (CI has no second one): a venv holding the lock's
    # packages and the runtime's boto3 set, in which the functions' imports run; then kept.
    site = lambda_site.runtime_site(sys.executable, tmp_path)
    installed = subprocess.run(
        [site.python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout.lower()  # fmt: skip
    assert "pydantic==" in installed and "boto3==" in installed
    assert "pytest" not in installed and "moto" not in installed  # nothing of the dev venv
    coldstart.compile_all(site.python)
    for name in ("check", "web", "authorizer"):
        _, _, modules = coldstart._import_seconds(coldstart._routes_of(name), REPO, site, False)
        assert modules > 50, name
    stamp = Path(site.python).parents[1] / "claros-pins.json"
    before = stamp.stat().st_mtime_ns
    assert lambda_site.runtime_site(sys.executable, tmp_path) == site  # kept, not rebuilt
    assert stamp.stat().st_mtime_ns == before
