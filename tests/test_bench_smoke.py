"""Every benchmark still runs: each at a tiny size, so a change that breaks one is seen in
the test run rather than the next time someone measures. Nothing here looks at a time
(benches never assert one); the benches' own checks (a failed call, a chain that does not
add up) still raise."""

from __future__ import annotations

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
    pages,
    roundtrip,
    server,
    verify,
)

pytestmark = pytest.mark.slow

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
