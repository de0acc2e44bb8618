"""claros.lazy_packages: Powertools' event handler package, made lazy, is still the real
package (every public name, the same objects), loads only what is asked for, runs its
``__init__`` once under threads, and refuses what it cannot make lazy. Each check runs in
a fresh interpreter, since the point is what a first import does."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "aws_lambda_powertools.event_handler"
# Resolvers we do not use, which the package's __init__ imports (with asyncio).
UNUSED = (
    f"{PACKAGE}.appsync",
    f"{PACKAGE}.bedrock_agent",
    f"{PACKAGE}.bedrock_agent_function",
    f"{PACKAGE}.events_appsync",
    f"{PACKAGE}.http_resolver",
    f"{PACKAGE}.lambda_function_url",
    f"{PACKAGE}.vpc_lattice",
    "asyncio",
)

# The package's public names, each as (defining module, qualified name, id in-process).
NAMES = """
import json, sys, types
import aws_lambda_powertools.event_handler as package

def where(value):
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__, value is sys.modules[value.__name__]]
    home = sys.modules[value.__module__]
    same = getattr(home, value.__qualname__, None) is value
    return [value.__module__, value.__qualname__, same]

names = {n: where(getattr(package, n)) for n in dir(package) if not n.startswith("_")}
print(json.dumps({"all": package.__all__, "names": names, "file": package.__file__,
                  "path": list(package.__path__), "spec": package.__spec__.name}))
"""


def _run(code: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def test_the_lazy_package_has_every_public_name_of_the_real_one_as_the_same_objects() -> None:
    eager = _run(NAMES)
    lazy = _run("from claros import lazy_packages\nlazy_packages.install()\n" + NAMES)
    assert lazy == eager
    assert "APIGatewayHttpResolver" in lazy["names"] and "AppSyncResolver" in lazy["all"]
    # Every name is the object its own module defines (not a copy, not a stand-in).
    assert all(same for _, _, same in lazy["names"].values())


def test_a_submodule_import_loads_only_that_submodule_and_the_package_still_answers() -> None:
    found = _run(f"""
        import json, sys
        from claros import lazy_packages
        lazy_packages.install()
        from {PACKAGE}.api_gateway import APIGatewayHttpResolver, Response
        from {PACKAGE} import content_types  # a submodule, as api_gateway asks for it
        before = sorted(m for m in {list(UNUSED)!r} if m in sys.modules)
        import {PACKAGE} as package
        lazy_until_asked = "__getattr__" in vars(package)
        from {PACKAGE} import APIGatewayHttpResolver as again, AppSyncResolver
        from {PACKAGE}.appsync import AppSyncResolver as direct
        print(json.dumps({{
            "before": before, "lazy_until_asked": lazy_until_asked,
            "same": again is APIGatewayHttpResolver and AppSyncResolver is direct,
            "content_types": content_types is sys.modules["{PACKAGE}.content_types"],
            "parent": sys.modules["aws_lambda_powertools"].event_handler is package,
            "hooks_left": [h for h in ("__getattr__", "__dir__") if h in vars(package)],
            "after": sorted(m for m in {list(UNUSED)!r} if m in sys.modules),
        }}))
    """)
    assert found["before"] == []
    assert found["lazy_until_asked"] and found["same"] and found["content_types"]
    assert found["parent"]
    assert found["hooks_left"] == []  # once run, the module is the plain package
    assert set(found["after"]) >= {f"{PACKAGE}.appsync", f"{PACKAGE}.http_resolver"}


def test_threads_asking_at_once_run_the_init_body_once_and_get_the_same_object() -> None:
    found = _run(f"""
        import importlib.machinery, json, threading
        runs = []
        exec_module = importlib.machinery.SourceFileLoader.exec_module
        def counted(loader, module):
            if module.__name__ == "{PACKAGE}":
                runs.append(threading.get_ident())
            return exec_module(loader, module)
        importlib.machinery.SourceFileLoader.exec_module = counted
        from claros import lazy_packages
        lazy_packages.install()
        barrier, got = threading.Barrier(8), []
        def ask():
            barrier.wait(timeout=30)
            from {PACKAGE} import AppSyncResolver, BedrockAgentResolver
            got.append((id(AppSyncResolver), id(BedrockAgentResolver)))
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join(timeout=60)
        print(json.dumps({{"runs": len(runs), "got": len(got), "distinct": len(set(got))}}))
    """)
    assert found == {"runs": 1, "got": 8, "distinct": 1}


def test_a_name_the_package_does_not_have_is_an_attribute_error() -> None:
    found = _run(f"""
        import json
        from claros import lazy_packages
        lazy_packages.install()
        import {PACKAGE} as package
        try:
            package.NoSuchResolver
        except AttributeError as e:
            message = str(e)
        try:
            from {PACKAGE} import NoSuchResolver
        except ImportError as e:
            imported = str(e)
        print(json.dumps({{"message": message, "imported": imported,
                           "has": hasattr(package, "NoSuchResolver")}}))
    """)
    assert found["message"] == f"module '{PACKAGE}' has no attribute 'NoSuchResolver'"
    assert "cannot import name 'NoSuchResolver'" in found["imported"]
    assert found["has"] is False


def test_a_package_already_imported_is_left_as_it_is() -> None:
    found = _run(f"""
        import json, sys
        import {PACKAGE} as eager
        from claros import lazy_packages
        print(json.dumps({{"same": lazy_packages.lazy_package("{PACKAGE}") is eager,
                           "hook": "__getattr__" in vars(eager)}}))
    """)
    assert found == {"same": True, "hook": False}


@pytest.mark.parametrize("name", ["this", "no_such_package_here"])  # a module; nothing
def test_what_is_not_a_package_is_refused(name: str) -> None:
    from claros.lazy_packages import lazy_package

    assert name not in sys.modules
    with pytest.raises(ImportError, match=f"{name} is not a package that can be loaded lazily"):
        lazy_package(name)
    assert name not in sys.modules  # nothing half registered


DATA_CLASSES = "aws_lambda_powertools.utilities.data_classes"
# Every public name of a package (submodules too), each as where() says, asked one by one
# (no dir(), no __all__: they would run the body); "ran": the __init__ body has run.
ASKED = """
import json, sys, types
from claros import lazy_packages
lazy_packages.install()
import {package} as package

def where(value):
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__, value is sys.modules[value.__name__]]
    home = sys.modules[value.__module__]
    same = getattr(home, value.__qualname__, None) is value
    return [value.__module__, value.__qualname__, same]

names = {{n: where(getattr(package, n)) for n in {names!r}}}
print(json.dumps({{"names": names, "ran": "__getattr__" not in vars(package),
                  "loaded": sorted(m for m in sys.modules if m.startswith("{package}."))}}))
"""


def test_data_classes_answer_every_public_name_from_its_submodule_without_the_init() -> None:
    """Powertools' data_classes: each name the real package has is the same object when
    asked through the lazy one, and asking for one loads only its submodule."""
    eager = _run(NAMES.replace(PACKAGE, DATA_CLASSES))
    public = sorted(eager["names"])
    assert "APIGatewayProxyEventV2" in public and "event_source" in public
    lazy = _run(ASKED.format(package=DATA_CLASSES, names=public))
    assert lazy["names"] == eager["names"]
    assert lazy["ran"] is False  # every name answered from its submodule, no body run
    # event_source: the function the submodule of that name defines, not the submodule
    assert eager["names"]["event_source"][0] == f"{DATA_CLASSES}.event_source"
    # dir() and __all__ run the real body: then it is the plain package, every name there
    install = "from claros import lazy_packages\nlazy_packages.install()\n"
    assert _run(install + NAMES.replace(PACKAGE, DATA_CLASSES)) == eager
    plain = _run(install + f"import json, {DATA_CLASSES} as p\np.__all__\n"
                 "print(json.dumps(type(p).__name__))")  # fmt: skip
    assert plain == "module"
    one = _run(ASKED.format(package=DATA_CLASSES, names=["APIGatewayProxyEventV2"]))
    assert f"{DATA_CLASSES}.ses_event" not in one["loaded"]  # the others stay unloaded
    assert one["names"]["APIGatewayProxyEventV2"][0] == f"{DATA_CLASSES}.api_gateway_proxy_event"


def test_a_name_that_is_also_its_submodule_stays_the_name_when_the_submodule_is_imported() -> None:
    """``from .event_source import event_source``: the eager package's attribute is the
    function; importing the submodule directly must not leave the module there."""
    probe = f"""
        import importlib, json, sys
        INSTALL
        importlib.import_module("{DATA_CLASSES}.event_source")  # the submodule, first
        package = sys.modules["{DATA_CLASSES}"]
        submodule = sys.modules["{DATA_CLASSES}.event_source"]
        print(json.dumps({{
            "attribute": type(package.event_source).__name__,
            "the submodule's": package.event_source is submodule.event_source,
            "ran": "__getattr__" not in vars(package),
        }}))
    """
    eager = _run(probe.replace("INSTALL", ""))
    lazy = _run(
        probe.replace("INSTALL", "from claros import lazy_packages; lazy_packages.install()")
    )
    assert eager == {"attribute": "function", "the submodule's": True, "ran": True}
    assert lazy == {**eager, "ran": False}


def test_importlib_metadata_lazy_is_the_real_one_and_pydantic_leaves_it_unrun() -> None:
    eager = _run(NAMES.replace(PACKAGE, "importlib.metadata"))
    lazy = _run("from claros import lazy_packages\nlazy_packages.install()\n"
                + NAMES.replace(PACKAGE, "importlib.metadata"))  # fmt: skip
    assert lazy == eager and "version" in lazy["names"]
    found = _run("""
        import json, os, sys
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
        from claros import lazy_packages
        lazy_packages.install(lazy_packages.STDLIB)
        import pydantic
        class Model(pydantic.BaseModel):  # building a model is when plugins are looked up
            x: int
        before = "importlib.metadata._adapters" in sys.modules
        from importlib.metadata import version
        print(json.dumps({"before": before, "version": version("pydantic") == pydantic.VERSION,
                          "powertools": "aws_lambda_powertools" in sys.modules}))
    """)
    assert found == {"before": False, "version": True, "powertools": False}


def _init_map(tmp_path: Path, body: str) -> dict[str, tuple[str, str]] | None:
    import importlib.util

    from claros.lazy_packages import _from_imports

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(
        "pkg", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    return _from_imports(spec.loader, "pkg")


def test_an_init_of_only_relative_from_imports_maps_each_name_to_its_submodule(
    tmp_path: Path,
) -> None:
    body = '''
        """Doc."""
        from .a import x, y as z
        from .b import b
        __all__ = ["x", "z", "b"]
    '''
    assert _init_map(tmp_path, body) == {"x": ("a", "x"), "z": ("a", "y"), "b": ("b", "b")}


@pytest.mark.parametrize(
    "body",
    [
        "from .a import x\nprint('side effect')\n",  # anything else in the body
        "from .a import x\nfrom .b import x\n",  # a name bound twice
        "from .a import b\nfrom .b import y\n",  # a submodule's name bound from another
        "from .a import *\n",
        "from os import path\n",  # not relative
        "from . import a\n",
        "import os\n",
    ],
)
def test_an_init_with_anything_else_gets_no_map(tmp_path: Path, body: str) -> None:
    assert _init_map(tmp_path, body) is None
