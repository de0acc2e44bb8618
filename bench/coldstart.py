"""Cold start: what each function's entry module imports (claros.api.entry and the
function's own routes; the authorizer: claros.api.authorizer) against importing the
all-routes ``claros.api.lambda_entry`` (what every function imported before), each in a
fresh interpreter, interleaved in one run. Target: each at most 40% of the baseline.
Beside it, the check function's whole entry module with its handler built, against the
same on the all-routes entry: the handler's Powertools Tracer imports the X-Ray SDK and
botocore either way, a cost the route split does not change.

``python -m bench coldstart``; BENCH_COLDSTART_ROUNDS sets the rounds (default 7). .pyc
files are written by a first warm-up import, as the layer's build compiles them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.harness import Result

REPO = Path(__file__).resolve().parent.parent
FUNCTIONS = ("check", "outcome", "evidence", "checkpoint", "admin", "export", "prune", "authorizer")
TARGET = 0.40

_TIMER = (
    "import sys, time\n"
    "t = time.perf_counter()\n"
    "{body}\n"
    "sys.stdout.write(repr(time.perf_counter() - t))\n"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAROS_", "POWERTOOLS_"))}
    # What the template gives every function; nothing connects at import time.
    env.update(
        CLAROS_STORE="dynamodb", POWERTOOLS_SERVICE_NAME="claros",
        POWERTOOLS_METRICS_NAMESPACE="Claros", AWS_DEFAULT_REGION="us-east-1",
    )  # fmt: skip
    return env


def _import_seconds(body: str, cwd: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _TIMER.format(body=body)],
        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return float(done.stdout)


def _routes_of(name: str) -> str:
    """Importing what the function's entry imports: claros.api.entry and its routes."""
    if name == "authorizer":
        return "import claros.api.authorizer"
    return (
        "import importlib, claros.api.entry as e\n"
        f"for m in e.ROUTE_MODULES[{name!r}]: importlib.import_module(m)"
    )


def _interleaved(
    baseline: tuple[str, Path], subjects: dict[str, tuple[str, Path]], rounds: int
) -> tuple[float, dict[str, float]]:
    for body, cwd in [baseline, *subjects.values()]:  # warm-up: .pyc written, disk cached
        _import_seconds(body, cwd)
    base: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in subjects}
    for _ in range(rounds):  # A B C ... A B C: the machine's drift hits all alike
        base.append(_import_seconds(*baseline))
        for name, (body, cwd) in subjects.items():
            times[name].append(_import_seconds(body, cwd))
    return min(base), {name: min(t) for name, t in times.items()}


def measure(rounds: int) -> tuple[Result, list[Result]]:
    """The target: each function's imports against the all-routes entry's."""
    subjects = {name: (_routes_of(name), REPO) for name in FUNCTIONS}
    base, times = _interleaved(("import claros.api.lambda_entry", REPO), subjects, rounds)
    return Result("import claros.api.lambda_entry", base, 1), [
        Result(name, seconds, 1) for name, seconds in times.items()
    ]


def measure_with_handler(rounds: int) -> tuple[Result, list[Result]]:
    """Beside it, the whole entry module with its handler built (Powertools' Tracer then
    imports the X-Ray SDK, which patches botocore): functions/check/app.py against the
    same handler built on the all-routes entry, as functions/check/app.py was."""
    old = "from claros.api.lambda_entry import handler_for\nhandler_for('check')"
    subjects = {"check": ("import app", REPO / "functions" / "check")}
    base, times = _interleaved((old, REPO), subjects, rounds)
    return Result("all routes + handler_for('check')", base, 1), [
        Result("functions/check/app.py", times["check"], 1)
    ]


def _print(base: Result, results: list[Result], target: float | None) -> float:
    print(f"  {base.name:<36} {base.seconds * 1000:8.1f} ms  (baseline)")
    worst = 0.0
    for result in results:
        ratio = result.seconds / base.seconds
        worst = max(worst, ratio)
        flag = "" if target is None or ratio <= target else f"  over {target:.0%}"
        print(f"  {result.name:<36} {result.seconds * 1000:8.1f} ms  {ratio:6.1%}{flag}")
    return worst


def main() -> None:
    rounds = int(os.environ.get("BENCH_COLDSTART_ROUNDS", "7"))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"cold start imports, best of {rounds} fresh interpreters each, one run "
          f"(load average {load}):")  # fmt: skip
    worst = _print(*measure(rounds), TARGET)
    print(f"  worst ratio {worst:.1%} (target at most {TARGET:.0%})")
    print("with the handler built (Tracer, Logger, Metrics), check function:")
    _print(*measure_with_handler(rounds), None)


if __name__ == "__main__":
    main()
