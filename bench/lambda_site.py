"""An interpreter that imports what a function in Lambda imports: the layer's locked
packages and the runtime's boto3 set, nothing else, with Lambda's environment markers.

Why: a function's init builds Powertools' Tracer, and what that costs depends on both.
Outside Lambda the X-Ray SDK takes its centralized sampler, which builds two botocore
X-Ray clients at import (~200 ms of CPU Lambda never spends), and the Tracer is off, so
it patches nothing. Inside, the SDK takes its Lambda sampler and the Tracer patches what
it is told to, importing each library it patches that is installed. The development
venv has more installed than the layer (requests, rich, click, awscrt, ...): its
``patch_all`` and botocore import those too. So the site here is the lock's
distributions and the runtime's (``layers/lock.py``'s ``RUNTIME``), each linked from the
development venv (the same versions: the Makefile installs with the lock as its
constraints), in a venv of the base interpreter without pip. What Lambda's bootstrap has
imported before the handler's module is not modelled: the figures count those stdlib
modules too, on both sides of a ratio.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
LAYER_SOURCE = REPO / "layers" / "claros_common"

# What Lambda's environment has and a shell's lacks; LAMBDA_TASK_ROOT is the function's
# folder (lambda_env). No trace header: a run that serves a request sets one.
MARKERS = {"AWS_LAMBDA_FUNCTION_NAME": "bench", "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13"}
# A sampled trace, as Lambda passes it to an invocation: the Tracer's subsegments go to
# the X-Ray daemon's address over UDP (nothing listens here; a UDP send does not wait).
TRACE_HEADER = "Root=1-6750a1b2-0123456789abcdef01234567;Parent=0123456789abcdef;Sampled=1"


class Site(NamedTuple):
    python: str  # the bare venv's interpreter
    path: str  # PYTHONPATH: the linked packages, then the layer's source


def _lock() -> tuple[list[str], frozenset[str]]:
    """The lock's pins (``name==version``), and the runtime's names (layers/lock.py)."""
    spec = importlib.util.spec_from_file_location("layer_lock", REPO / "layers" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = module.LOCK.read_text(encoding="utf-8").splitlines()
    pins = [line.strip() for line in lines if "==" in line and not line.startswith("#")]
    return pins, module.RUNTIME


def _tops(dist: metadata.Distribution) -> set[str]:
    """The distribution's top-level files and folders in site-packages."""
    tops = set()
    for file in dist.files or ():
        top = file.parts[0]
        if top not in ("..", "__pycache__") and not top.endswith((".dist-info", ".pth")):
            tops.add(top)
    return tops


def build(where: Path) -> Site | None:
    """The site in ``where``, or None (and why, printed) when a distribution is missing."""
    pins, runtime = _lock()
    names = [pin.split("==", 1)[0] for pin in pins]
    packages = where / "site-packages"
    packages.mkdir(parents=True)
    for name in (*names, *sorted(runtime)):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            print(f"  (no Lambda-like site: {name} is not installed in this venv)")
            return None
        for top in _tops(dist):
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (packages / top).exists():
                (packages / top).symlink_to(source)
    venv = where / "python"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return Site(str(venv / "bin" / "python"), f"{packages}:{LAYER_SOURCE}")


def lambda_env(env: dict[str, str], site: Site, function_root: Path) -> dict[str, str]:
    """``env`` with Lambda's markers and the site's path, for the function in ``function_root``."""
    return {**env, **MARKERS, "LAMBDA_TASK_ROOT": str(function_root), "PYTHONPATH": site.path}


# Where runtime_site keeps its venvs between runs (gitignored): one per interpreter version.
RUNTIME_SITES = REPO / "bench" / "results" / "runtime-sites"


class SiteError(Exception):
    """A runtime site that cannot be built, with the reason (the bench prints it, exits 2)."""


def _pins() -> list[str]:
    """``name==version`` for the lock's distributions (as the layer ships them) and the
    runtime's boto3 set (at this venv's versions: the ones the tests ran with)."""
    pins, runtime = _lock()
    for name in sorted(runtime):
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError as e:
            raise SiteError(f"{name} is not installed in this venv") from e
    return pins


def python_version(python: str) -> str:
    """The version the interpreter ``python`` (a path or a command on PATH) runs, such as
    ``3.13.0``: what a figure was measured on (Lambda runs 3.13)."""
    try:
        done = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except OSError as e:
        raise SiteError(f"cannot run {python!r}: {e.strerror or e}") from e
    version = done.stdout.strip()
    if done.returncode != 0 or not version:
        raise SiteError(f"{python!r} is not a Python interpreter: {done.stderr.strip()[-200:]}")
    return version


def _version_of(python: str) -> str:
    """``major.minor`` of the interpreter ``python``, one Claros runs on (3.11+)."""
    full = python_version(python)
    try:
        major, minor = (int(part) for part in full.split(".")[:2])
    except ValueError as e:
        raise SiteError(f"{python!r} printed {full[:40]!r} for its version") from e
    if (major, minor) < (3, 11):
        raise SiteError(f"{python!r} is Python {major}.{minor}; Claros needs 3.11+")
    return f"{major}.{minor}"


def runtime_site(python: str, where: Path = RUNTIME_SITES) -> Site:
    """A site like build()'s on another interpreter, such as Lambda's (template.yaml:
    python3.13): a venv of ``python`` with the lock's packages and the runtime's boto3 set
    alone, installed by pip (the development venv's compiled packages are built for its own
    Python, so they cannot be linked). Built once in ``where`` and kept while the pins hold
    (a stamp file lists them); pip takes its cache or the package index."""
    version = _version_of(python)
    pins = _pins()
    venv = where / f"python{version}"
    stamp = venv / "claros-pins.json"
    site = Site(str(venv / "bin" / "python"), str(LAYER_SOURCE))
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) == pins:
        return site
    subprocess.run(
        [python, "-m", "venv", "--clear", str(venv)], capture_output=True, timeout=300, check=True
    )
    done = subprocess.run(
        [site.python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", *pins],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise SiteError(f"pip could not install the layer's packages for Python {version}: "
                        f"{done.stderr.strip()[-500:]}")  # fmt: skip
    stamp.write_text(json.dumps(pins), encoding="utf-8")
    return site
