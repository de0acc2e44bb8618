"""The layer is what was tested: its lock file pins exactly the versions installed here (the
test environment), for exactly the packages the layer's requirements need; no botocore or
boto3 (the runtime's); nothing the server code does not import; built by its Makefile
(.pyc compiled, --no-deps)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType

from tests.aws import REPO, load_template

LAYER = REPO / "layers" / "claros_common"


def _lock_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("layer_lock", REPO / "layers" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (LAYER / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.txt: {line!r} is not pinned with =="
            pins[name] = version
    return pins


def test_the_lock_pins_the_versions_the_tests_run_with() -> None:
    lock = _lock_module()
    drifted = {
        name: (pinned, metadata.version(name))
        for name, pinned in _pins().items()
        if metadata.version(name) != pinned
    }
    assert not drifted, f"run `python layers/lock.py` (pinned, installed): {drifted}"
    # Exactly what requirements.in needs, as installed here: nothing missing, nothing extra.
    assert _pins() == lock.closure(lock.top_level()), "run `python layers/lock.py`"
    assert (LAYER / "requirements.txt").read_text() == lock.render(_pins())


def test_the_layer_carries_no_botocore_or_boto3() -> None:
    lock = _lock_module()
    assert not set(_pins()) & lock.RUNTIME
    # aws-xray-sdk asks for botocore: the lock leaves it to the runtime, and the Makefile
    # installs with --no-deps so pip does not bring it back.
    assert "aws-xray-sdk" in _pins()
    assert any("botocore" in r for r in metadata.requires("aws-xray-sdk") or [])
    makefile = (LAYER / "Makefile").read_text()
    assert "--no-deps" in makefile and "-r requirements.txt" in makefile


def _imported_roots(folder: Path) -> set[str]:
    roots: set[str] = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots.add(node.module.split(".")[0])
    return roots


def test_every_direct_requirement_is_imported_by_the_server_code() -> None:
    """Each of the layer's direct requirements is imported by the server code (pyyaml was
    once in the layer unused; the rule editor and the mapper's proposals now read YAML)."""
    lock = _lock_module()
    imported = _imported_roots(LAYER / "claros")
    import_names = {
        "pydantic": "pydantic",
        "pynacl": "nacl",
        "aws-lambda-powertools": "aws_lambda_powertools",
        "httpx": "httpx",
        "jinja2": "jinja2",
        "pyyaml": "yaml",
        "orjson": "orjson",
    }
    for req in lock.top_level():
        name = lock.canonical(req.name)
        assert import_names[name] in imported, f"{name} is in the layer but not imported"
    # And every third-party package the server imports is in the layer (or the runtime:
    # boto3; mypy_boto3 only under TYPE_CHECKING; markupsafe comes with jinja2).
    provided = set(import_names.values()) | {"boto3", "botocore", "mypy_boto3_dynamodb",
                                              "mypy_boto3_kms", "markupsafe"}  # fmt: skip
    third_party = imported - set(sys.stdlib_module_names) - {"claros", "claros_guard"}
    assert third_party <= provided, sorted(third_party - provided)


def test_the_layer_is_built_by_its_makefile_with_pyc() -> None:
    layer = load_template()["Resources"]["ClarosCommonLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    makefile = (LAYER / "Makefile").read_text()
    assert "build-ClarosCommonLayer:" in makefile
    assert "compileall" in makefile and "$(PYTHON313)" in makefile
    assert "--platform manylinux2014_aarch64" in makefile and "--python-version 3.13" in makefile


def test_each_function_entry_names_the_routes_the_function_serves() -> None:
    from claros.api.app import FUNCTIONS
    from claros.api.entry import ROUTE_MODULES

    assert {n: tuple(r.__module__ for r in regs) for n, regs in FUNCTIONS.items()} == ROUTE_MODULES


def test_a_function_imports_only_its_own_routes() -> None:
    """In a fresh interpreter, functions/check/app.py leaves the other functions' route
    modules unimported (the cold start pays for its own)."""
    import os
    import subprocess

    probe = (
        "import sys, app\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('claros.api.'))))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO / "functions" / "check", env=env,
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    loaded = set(done.stdout.split())
    assert "claros.api.check" in loaded
    others = {"claros.api.admin", "claros.api.web", "claros.api.evidence", "claros.api.export",
              "claros.api.prune", "claros.api.lambda_entry", "claros.api.app"}  # fmt: skip
    assert not loaded & others, loaded & others


def test_make_installs_the_locked_versions() -> None:
    """`make run` and `make test` install with the lock as pip constraints, so a fresh clone
    gets the versions the tests ran with and the layer ships, whatever was released since
    (httpx 0.29.0, released after the lock was written, had turned the drift test above red
    on every fresh clone)."""
    makefile = (REPO / "Makefile").read_text()
    assert "LOCK   := layers/claros_common/requirements.txt" in makefile
    [pip] = [line for line in makefile.splitlines() if line.startswith("PIP ")]
    assert "-c $(LOCK)" in pip
    # A changed lock reinstalls: the install stamp depends on it.
    assert "$(RUN_STAMP): pyproject.toml $(LOCK)" in makefile
    assert "$(TEST_STAMP): pyproject.toml $(LOCK)" in makefile  # the tests' one install
