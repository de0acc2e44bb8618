"""Cold start: what each function's entry module imports (claros.api.entry and the
function's own routes; the authorizer: claros.api.authorizer) against importing the
all-routes ``claros.api.lambda_entry``, each in a fresh interpreter, interleaved in one run
(A B f1 f2 ... A B f1 f2 ...). Two baselines: ``lambda_entry`` as it is now, and as it was
"today" in issue 16 (rev ``ISSUE_BASELINE``, main before the issue's first merge: what
every function imported then). Target (issue 16 item 5): each function at most 40% of
the issue's baseline. Both tables import from the layer's packages alone (the site
below), not the development venv's: there click, rich and pygments are installed, and
httpx's package imports its command line with them when they are (``httpx._main``), ~80
ms of the baseline at ``ISSUE_BASELINE`` that no Lambda spends (until stop 35 this table
ran in the venv, and its shares were that much too low). Beside it, each function's whole
entry module with its handler built (``functions/<name>/app.py``) against the same handler
built on the all-routes entry, now and at that rev (and at BENCH_COLDSTART_ALSO's), as
Lambda runs it (bench/lambda_site.py: the layer's packages and the runtime's boto3 alone,
Lambda's environment, so the X-Ray SDK takes its Lambda sampler and the Tracer patches
what it is told to), with the Tracer alone below them (``TRACER_ROWS``): the handler's
Tracer imports the X-Ray SDK and botocore, a cost the route split does not change and
boto3 (the first request's DynamoDB client) would mostly pay anyway.

``python -m bench coldstart``; BENCH_COLDSTART_ROUNDS sets the rounds (default 7; a
figure wants at least 3, the smoke test runs 1); BENCH_COLDSTART_BEFORE=<git rev> measures
another rev as the "before" baseline (default ``ISSUE_BASELINE``; ``none``: no before
baseline); BENCH_COLDSTART_ALSO=<git rev> adds every function's imports at that rev as rows
of the same run (a change's before and after); BENCH_COLDSTART_PYTHON=<interpreter> runs
both tables on another Python, such as Lambda's (template.yaml: python3.13; the development
venv's may be older), in a venv of it holding the layer's lock and the runtime's boto3 set
alone (bench/lambda_site.py's ``runtime_site``: pip installs them the first time, then the
venv is kept in bench/results). Every module is compiled to .pyc first
(``compileall``, as the layer's build does: in an environment with PYTHONDONTWRITEBYTECODE
the claros modules were compiled from source in every interpreter, and the figures were
partly the compiler's). Each import is
timed inside its own fresh interpreter, wall clock and that process's CPU time; the rows
show the fastest run, the median, and the least CPU time, each as a share of each
baseline's (CPU time moves less with the load of the machine's other work). boto3 is
counted where an import needs it (the routes create their clients on first use, so none
does today).

Below the functions, the floor the functions that validate a request body stand on, timed
the same way: ``floor: powertools`` (what claros.api.entry imports of Powertools: Logger,
Metrics, Tracer, the API Gateway resolver and its event class, with
claros.lazy_packages), ``floor: pydantic`` (``BaseModel`` and ``Field``, plugins off, as
the entry sets) and ``floor: both`` (the two in one interpreter: the standard library
modules they share counted once). A function's row less ``floor: both`` is what its own
code costs on top (claros's modules, its models' definitions, the standard library they
alone pull in); the functions that validate no body import no pydantic, so theirs is the
Powertools row.
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

from bench import lambda_site
from bench.harness import Result
from bench.lambda_site import Site, lambda_env

REPO = Path(__file__).resolve().parent.parent
FUNCTIONS = (
    "check", "outcome", "evidence", "checkpoint", "admin", "web", "export", "prune", "authorizer",
)  # fmt: skip
TARGET = 0.40
# "Today's" lambda_entry in issue 16: main before the merge of the issue's first work
# (4bcd34e, merged in 7f3d6ca): ``git rev-parse 7f3d6ca^1``.
ISSUE_BASELINE = "59f62c2"

_TIMER = (
    "import sys, time\n"
    "n, t, c = len(sys.modules), time.perf_counter(), time.process_time()\n"
    "{body}\n"
    "wall, cpu = time.perf_counter() - t, time.process_time() - c\n"
    "sys.stdout.write(repr((wall, cpu, len(sys.modules) - n)))\n"
)
# The floor rows (module docstring): the packages' imports alone.
_POWERTOOLS = (
    "from claros import lazy_packages\nlazy_packages.install()\n"
    "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
    "from aws_lambda_powertools.metrics import MetricUnit\n"
    "from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver\n"
    "from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2"
)
_PYDANTIC = (
    "import os\nos.environ.setdefault('PYDANTIC_DISABLE_PLUGINS', '__all__')\n"
    "from pydantic import BaseModel, Field"
)
FLOORS = {
    "floor: powertools": _POWERTOOLS,
    "floor: pydantic": _PYDANTIC,
    "floor: both": f"{_POWERTOOLS}\n{_PYDANTIC}",
}
# The handler's share of that, timed the same way: the X-Ray Tracer as the functions build
# it (botocore patched), as Powertools' default builds it (every installed library the
# X-Ray SDK knows patched: in the layer, httpx and sqlite3 too), and boto3, which the
# first request imports anyway (its DynamoDB client).
TRACER_ROWS = {
    "floor: Tracer, botocore": (
        "from aws_lambda_powertools import Tracer\nTracer(patch_modules=('botocore',))"
    ),
    "floor: Tracer, default": "from aws_lambda_powertools import Tracer\nTracer()",
    "floor: boto3": "import boto3",
}
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


def compile_all(python: str = sys.executable) -> None:
    """.pyc for every module imported, as the layer ships them (by the interpreter that
    imports them: a .pyc is kept per Python version)."""
    subprocess.run(
        [python, "-m", "compileall", "-q", *map(str, COMPILED)],
        env=_env(), capture_output=True, timeout=300, check=True,
    )  # fmt: skip


def _import_seconds(
    body: str, cwd: Path, site: Site | None = None, in_lambda: bool = True
) -> tuple[float, float, int]:
    """(wall, CPU) seconds of ``body`` in a fresh interpreter, timed inside it, and how many
    modules it imported (a count the machine's load does not move); with ``site``, the
    site's interpreter and packages, in the environment of a function in Lambda unless not
    ``in_lambda`` (bench/lambda_site.py)."""
    python, env = sys.executable, _env()
    if site is not None:
        python = site.python
        env = lambda_env(env, site, cwd) if in_lambda else {**env, "PYTHONPATH": site.path}
    done = subprocess.run(
        [python, "-c", _TIMER.format(body=body)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=True,
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


Runs = list[tuple[float, float, int]]
Subject = tuple[str, Path]  # the timed body, the directory it runs in


def _interleaved(
    baselines: dict[str, Subject],
    subjects: dict[str, Subject],
    rounds: int,
    site: Site | None = None,
    in_lambda: bool = True,
) -> tuple[list[Result], list[Result]]:
    """Every baseline, then every subject, once a round: the machine's drift hits all alike."""
    everything = {**baselines, **subjects}
    for body, cwd in everything.values():  # warm-up: the disk cache holds every module
        _import_seconds(body, cwd, site, in_lambda)
    times: dict[str, Runs] = {name: [] for name in everything}
    for _ in range(rounds):
        for name, (body, cwd) in everything.items():
            times[name].append(_import_seconds(body, cwd, site, in_lambda))
    return [_result(n, times[n]) for n in baselines], [_result(n, times[n]) for n in subjects]


def _before(rev: str, where: Path, python: str = sys.executable) -> Path | None:
    """The layer's code at git revision ``rev`` unpacked in ``where`` and compiled by
    ``python`` (its directory, to put first on sys.path), or None (and why, printed) when
    git cannot."""
    try:
        archive = subprocess.run(
            ["git", "archive", rev, "layers/claros_common/claros"],
            cwd=REPO, capture_output=True, timeout=120, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"  (no before baseline: git archive {rev} failed: {e})")
        return None
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(where, filter="data")
    layer = where / "layers" / "claros_common"
    subprocess.run(
        [python, "-m", "compileall", "-q", str(layer)],
        env=_env(), capture_output=True, timeout=300, check=True,
    )  # fmt: skip
    return layer


def _baselines(body: str, layer: Path | None, rev: str) -> dict[str, Subject]:
    """``body`` on the all-routes entry now, and at ``rev`` (its layer first on sys.path)."""
    out = {"lambda_entry now": (body, REPO)}
    if layer is not None:
        out[f"lambda_entry at {rev}"] = (f"sys.path.insert(0, {str(layer)!r})\n{body}", REPO)
    return out


def measure(
    rounds: int,
    layer: Path | None,
    rev: str,
    also: tuple[str, Path] | None = None,
    site: Site | None = None,
) -> tuple[list[Result], list[Result]]:
    """The target: each function's imports against the all-routes entry's; ``also``: (rev,
    its layer), every function's imports at that rev too, in the same run (a change's
    before and after); ``site``: on its interpreter and packages (BENCH_COLDSTART_PYTHON),
    not this venv's."""
    subjects = {name: (_routes_of(name), REPO) for name in FUNCTIONS}
    if also is not None:
        at, where = also
        entry = (where / "claros" / "api" / "entry.py").read_text(encoding="utf-8")
        for name in FUNCTIONS:
            if name != "authorizer" and f'"{name}":' not in entry:
                continue  # a function that rev does not have (its routes were another's)
            body = f"import sys\nsys.path.insert(0, {str(where)!r})\n{_routes_of(name)}"
            subjects[f"{name} at {at}"] = (body, REPO)
    subjects.update({name: (body, REPO) for name, body in FLOORS.items()})
    baselines = _baselines("import claros.api.lambda_entry", layer, rev)
    return _interleaved(baselines, subjects, rounds, site, in_lambda=False)


def measure_with_handler(
    rounds: int,
    layer: Path | None,
    rev: str,
    also: tuple[str, Path] | None = None,
    site: Site | None = None,
) -> tuple[list[Result], list[Result]]:
    """Beside it, each function's whole entry module with its handler built (Powertools'
    Tracer then imports the X-Ray SDK and patches botocore), against the check function's
    handler built on the all-routes entry, as functions/check/app.py was; with ``site``,
    as Lambda runs them (bench/lambda_site.py). ``also``: each function's at that rev.
    Below, the Tracer alone (``TRACER_ROWS``)."""
    old = "from claros.api.lambda_entry import handler_for\nhandler_for('check')"
    subjects = {name: ("import app", REPO / "functions" / name) for name in FUNCTIONS}
    if also is not None:
        at, where = also
        for name in FUNCTIONS:
            body = f"import sys\nsys.path.insert(0, {str(where)!r})\nimport app"
            subjects[f"{name} at {at}"] = (body, REPO / "functions" / name)
    subjects.update({name: (body, REPO) for name, body in TRACER_ROWS.items()})
    return _interleaved(_baselines(old, layer, rev), subjects, rounds, site)


def _ms(seconds: float | None) -> str:
    return f"{(seconds or 0.0) * 1000:8.1f}"


def _shares(result: Result, base: Result) -> tuple[float, float, float]:
    """min wall, median wall and min CPU of ``result`` as shares of ``base``'s."""
    return (
        result.seconds / base.seconds,
        (result.median_seconds or 0.0) / (base.median_seconds or 1.0),
        (result.cpu_seconds or 0.0) / (base.cpu_seconds or 1.0),
    )


def _a_function_now(name: str) -> bool:
    """Not a row of BENCH_COLDSTART_ALSO's rev, nor a floor row."""
    return " at " not in name and not name.startswith("floor")


def _print(bases: list[Result], results: list[Result], target: float | None) -> dict[str, float]:
    """Rows: min wall, median wall, min CPU (ms), modules imported, then min wall, median
    wall and CPU as shares of each baseline's; returns each baseline's worst min-wall
    share among the functions (flagged over ``target`` against the last baseline, the
    issue's)."""
    head = "".join(f"  {'vs ' + b.name.removeprefix('lambda_entry '):>23}" for b in bases)
    print(f"  {'':<24} {'min ms':>8} {'median':>8} {'cpu ms':>8} {'modules':>7}{head}")
    print(f"  {'':<24} {'':>8} {'':>8} {'':>8} {'':>7}" + "  {:>7} {:>7} {:>7}".format(
        "min", "median", "cpu") * len(bases))  # fmt: skip
    for base in bases:
        print(f"  {base.name:<24} {_ms(base.seconds)} {_ms(base.median_seconds)} "
              f"{_ms(base.cpu_seconds)} {base.items:7}  (baseline)")  # fmt: skip
    worst = {base.name: 0.0 for base in bases}
    for result in results:
        cells = ""
        for base in bases:
            shares = _shares(result, base)
            if _a_function_now(result.name):
                worst[base.name] = max(worst[base.name], shares[0])
            cells += "  " + " ".join(f"{x:7.1%}" for x in shares)
        over = (
            target is not None
            and _a_function_now(result.name)
            and _shares(result, bases[-1])[0] > target
        )
        times = f"{_ms(result.seconds)} {_ms(result.median_seconds)} {_ms(result.cpu_seconds)}"
        flag = f"  over {target:.0%}" if over and target is not None else ""
        print(f"  {result.name:<24} {times} {result.items:7}{cells}{flag}")
    return worst


def _runtime_site() -> Site | None:
    """BENCH_COLDSTART_PYTHON's site (bench/lambda_site.py's runtime_site), or None when it
    is not set; a site that cannot be built ends the bench with the reason (exit 2)."""
    python = os.environ.get("BENCH_COLDSTART_PYTHON", "")
    if not python:
        return None
    try:
        return lambda_site.runtime_site(python)
    except lambda_site.SiteError as e:
        print(f"bench coldstart: BENCH_COLDSTART_PYTHON={python}: {e}", file=sys.stderr)
        raise SystemExit(2) from e


def main() -> None:
    rounds = max(1, int(os.environ.get("BENCH_COLDSTART_ROUNDS", "7")))
    rev = os.environ.get("BENCH_COLDSTART_BEFORE", ISSUE_BASELINE)
    runtime = _runtime_site()
    python = runtime.python if runtime is not None else sys.executable
    compile_all(python)
    with tempfile.TemporaryDirectory(prefix="coldstart-before-") as where:
        layer = None if rev.lower() in ("", "none") else _before(rev, Path(where), python)
        also_rev = os.environ.get("BENCH_COLDSTART_ALSO", "")
        also_layer = _before(also_rev, Path(where) / "also", python) if also_rev else None
        also = (also_rev, also_layer) if also_layer is not None else None
        on = lambda_site.python_version(python)
        site = runtime or lambda_site.build(Path(where) / "lambda")
        packages = (
            "with the layer's packages and the runtime's boto3 alone, as Lambda has them"
            if site
            else "with this venv's packages (no Lambda-like site; more than the layer has)"
        )
        print(f"cold start imports, {rounds} fresh interpreters each, interleaved, one run, "
              f"on Python {on}, {packages} (load average {_load()}):")  # fmt: skip
        worst = _print(*measure(rounds, layer, rev, also, site), TARGET)
        print("  worst min-wall share: " + ", ".join(
            f"{w:.1%} of {name}" for name, w in worst.items()
        ) + f" (target at most {TARGET:.0%} of the issue's); load average {_load()}")  # fmt: skip
        where_run = "as Lambda runs it" if site else "in this venv, outside Lambda's environment"
        print("with the handler built (functions/<name>/app.py: Tracer, Logger, Metrics), "
              f"{where_run} (the layer's packages and the runtime's boto3 alone, Lambda's "
              "environment), against handler_for('check') on the all-routes entry:")  # fmt: skip
        _print(*measure_with_handler(rounds, layer, rev, also, site), None)
        print(f"  load average {_load()}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
