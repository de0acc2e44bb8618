"""Cold start: what each function's entry module imports (claros.api.entry and the
function's own routes; the authorizer: claros.api.authorizer) against importing the
all-routes ``claros.api.lambda_entry`` (what every function imported before), each in a
fresh interpreter, interleaved in one run. Target: each at most 40% of the baseline.
Beside it, the check function's whole entry module with its handler built, against the
same on the all-routes entry: the handler's Powertools Tracer imports the X-Ray SDK and
botocore either way, a cost the route split does not change.

``python -m bench coldstart``; BENCH_COLDSTART_ROUNDS sets the rounds (default 7; a
figure wants at least 3, the smoke test runs 1); BENCH_COLDSTART_BEFORE=<git rev> adds the
all-routes entry as it was at that revision to the same run. Every module is compiled to .pyc first
(``compileall``, as the layer's build does: in an environment with PYTHONDONTWRITEBYTECODE
the claros modules were compiled from source in every interpreter, and the figures were
partly the compiler's). Each import is timed
inside its own fresh interpreter, wall clock and that process's CPU time; the rows show the
fastest run, the median, and the CPU time, with the ratios of both to the baseline's (CPU
time moves less with the load of the machine's other work). boto3 is counted where an
import needs it (the routes create their clients on first use, so none does today).
"""

from __future__ import annotations

import ast
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from bench.harness import Result

REPO = Path(__file__).resolve().parent.parent
FUNCTIONS = ("check", "outcome", "evidence", "checkpoint", "admin", "export", "prune", "authorizer")
TARGET = 0.40

_TIMER = (
    "import sys, time\n"
    "n, t, c = len(sys.modules), time.perf_counter(), time.process_time()\n"
    "{body}\n"
    "wall, cpu = time.perf_counter() - t, time.process_time() - c\n"
    "sys.stdout.write(repr((wall, cpu, len(sys.modules) - n)))\n"
)
# What the layer's build compiles (layers/claros_common/Makefile), and the functions' code.
COMPILED = (REPO / "layers" / "claros_common" / "claros", REPO / "functions")


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLAROS_", "POWERTOOLS_")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    # What the template gives every function; nothing connects at import time.
    env.update(
        CLAROS_STORE="dynamodb", POWERTOOLS_SERVICE_NAME="claros",
        POWERTOOLS_METRICS_NAMESPACE="Claros", AWS_DEFAULT_REGION="us-east-1",
    )  # fmt: skip
    return env


def compile_all() -> None:
    """.pyc for every module imported, as the layer ships them."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *map(str, COMPILED)],
        env=_env(), capture_output=True, timeout=300, check=True,
    )  # fmt: skip


def _import_seconds(body: str, cwd: Path) -> tuple[float, float, int]:
    """(wall, CPU) seconds of ``body`` in a fresh interpreter, timed inside it, and how many
    modules it imported (a count the machine's load does not move)."""
    done = subprocess.run(
        [sys.executable, "-c", _TIMER.format(body=body)],
        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    wall, cpu, modules = ast.literal_eval(done.stdout)
    return float(wall), float(cpu), int(modules)


def _routes_of(name: str) -> str:
    """Importing what the function's entry imports: claros.api.entry and its routes."""
    if name == "authorizer":
        return "import claros.api.authorizer"
    return (
        "import importlib, claros.api.entry as e\n"
        f"for m in e.ROUTE_MODULES[{name!r}]: importlib.import_module(m)"
    )


def _result(name: str, runs: list[tuple[float, float, int]]) -> Result:
    """The fastest wall time, the median, the least CPU time; ``items``: modules imported."""
    wall = min(w for w, _, _ in runs)
    median = statistics.median(w for w, _, _ in runs)
    cpu = min(c for _, c, _ in runs)
    return Result(name, wall, max(m for _, _, m in runs), median_seconds=median, cpu_seconds=cpu)


def _interleaved(
    baseline: tuple[str, str, Path], subjects: dict[str, tuple[str, Path]], rounds: int
) -> tuple[Result, list[Result]]:
    compile_all()
    for _, body, cwd in [baseline]:  # warm-up: the disk cache holds every module
        _import_seconds(body, cwd)
    for body, cwd in subjects.values():
        _import_seconds(body, cwd)
    base: list[tuple[float, float, int]] = []
    times: dict[str, list[tuple[float, float, int]]] = {name: [] for name in subjects}
    for _ in range(rounds):  # A B C ... A B C: the machine's drift hits all alike
        base.append(_import_seconds(*baseline[1:]))
        for name, (body, cwd) in subjects.items():
            times[name].append(_import_seconds(body, cwd))
    return _result(baseline[0], base), [_result(name, t) for name, t in times.items()]


def _before(rev: str, where: Path) -> tuple[str, tuple[str, Path]]:
    """The all-routes entry as it was at git revision ``rev`` (BENCH_COLDSTART_BEFORE), so a
    change of the shared modules shows what the baseline itself was before it, in the same
    run: the layer's code at ``rev`` unpacked in ``where``, compiled, first on sys.path."""
    archive = subprocess.run(
        ["git", "archive", rev, "layers/claros_common/claros"],
        cwd=REPO, capture_output=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(where, filter="data")
    layer = where / "layers" / "claros_common"
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(layer)],
        env=_env(), capture_output=True, timeout=300, check=True,
    )  # fmt: skip
    body = f"sys.path.insert(0, {str(layer)!r})\nimport claros.api.lambda_entry"
    return f"lambda_entry at {rev} (before)", (body, REPO)


def measure(rounds: int) -> tuple[Result, list[Result]]:
    """The target: each function's imports against the all-routes entry's."""
    subjects = {name: (_routes_of(name), REPO) for name in FUNCTIONS}
    baseline = ("import claros.api.lambda_entry", "import claros.api.lambda_entry", REPO)
    with tempfile.TemporaryDirectory(prefix="coldstart-before-") as where:
        if rev := os.environ.get("BENCH_COLDSTART_BEFORE"):
            name, subject = _before(rev, Path(where))
            subjects[name] = subject
        return _interleaved(baseline, subjects, rounds)


def measure_with_handler(rounds: int) -> tuple[Result, list[Result]]:
    """Beside it, the whole entry module with its handler built (Powertools' Tracer then
    imports the X-Ray SDK, which patches botocore): functions/check/app.py against the
    same handler built on the all-routes entry, as functions/check/app.py was."""
    old = "from claros.api.lambda_entry import handler_for\nhandler_for('check')"
    subjects = {"functions/check/app.py": ("import app", REPO / "functions" / "check")}
    return _interleaved(("all routes + handler_for('check')", old, REPO), subjects, rounds)


def _ms(seconds: float | None) -> str:
    return f"{(seconds or 0.0) * 1000:8.1f}"


def _print(base: Result, results: list[Result], target: float | None) -> float:
    """Rows: min wall, median wall, min CPU (ms), modules imported, then min wall and CPU
    as a share of the baseline's; returns the worst wall ratio."""
    print(f"  {'':<36} {'min ms':>8} {'median':>8} {'cpu ms':>8} {'modules':>7}"
          f"  {'wall':>6} {'cpu':>6}")  # fmt: skip
    print(f"  {base.name:<36} {_ms(base.seconds)} {_ms(base.median_seconds)} "
          f"{_ms(base.cpu_seconds)} {base.items:7}  (baseline)")  # fmt: skip
    worst = 0.0
    for result in results:
        ratio = result.seconds / base.seconds
        cpu = (result.cpu_seconds or 0.0) / (base.cpu_seconds or 1.0)
        over = target is not None and ratio > target and result.name in FUNCTIONS
        if result.name in FUNCTIONS or target is None:  # not the "before" row
            worst = max(worst, ratio)
        flag = f"  over {target:.0%}" if over else ""
        times = f"{_ms(result.seconds)} {_ms(result.median_seconds)} {_ms(result.cpu_seconds)}"
        print(f"  {result.name:<36} {times} {result.items:7}  {ratio:6.1%} {cpu:6.1%}{flag}")
    return worst


def main() -> None:
    rounds = max(1, int(os.environ.get("BENCH_COLDSTART_ROUNDS", "7")))
    print(f"cold start imports, {rounds} fresh interpreters each, interleaved, one run "
          f"(load average {_load()}):")  # fmt: skip
    worst = _print(*measure(rounds), TARGET)
    print(f"  worst ratio {worst:.1%} (target at most {TARGET:.0%}); load average {_load()}")
    print("with the handler built (Tracer, Logger, Metrics), check function:")
    _print(*measure_with_handler(rounds), None)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
