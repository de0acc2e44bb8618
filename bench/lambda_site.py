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
    """The lock's distribution names, and the runtime's (from layers/lock.py)."""
    spec = importlib.util.spec_from_file_location("layer_lock", REPO / "layers" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lines = module.LOCK.read_text(encoding="utf-8").splitlines()
    names = [line.split("==", 1)[0].strip() for line in lines if "==" in line]
    return names, module.RUNTIME


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
    names, runtime = _lock()
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
