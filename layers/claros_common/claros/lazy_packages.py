"""Packages whose ``__init__`` runs only when a name of its own is asked for.

Why: Powertools' ``aws_lambda_powertools/event_handler/__init__.py`` imports every
resolver it has (AppSync, AppSync events, Bedrock agents, VPC Lattice, the local
``http_resolver`` which pulls in asyncio, ...), about three times what the API Gateway
resolver we use costs, and Python runs a package's ``__init__`` before any of its
submodules can be imported. A Lambda cold start paid for all of it.

``install()`` puts ``aws_lambda_powertools.event_handler`` in ``sys.modules`` as the real
package module (its own ``__spec__``, ``__path__``, ``__file__``, ``__loader__``, made by
``importlib.util.module_from_spec``) whose ``__init__`` body has not run yet. Then:

- ``from aws_lambda_powertools.event_handler.api_gateway import Response`` imports only
  ``api_gateway`` and what it imports (the package's ``__path__`` is all a submodule
  import needs from its parent);
- a submodule asked for as an attribute (``from aws_lambda_powertools.event_handler import
  content_types``, which ``api_gateway`` itself does) is imported as the submodule, as the
  import system would after the ``__init__``;
- any other name the module does not have yet (``from aws_lambda_powertools.event_handler
  import AppSyncResolver``, ``dir()``, ``__all__``) runs the real ``__init__`` body, once,
  on that same module object (PEP 562 module ``__getattr__``; the loader's public
  ``exec_module``), under a lock, so every name of the real package is there and is the
  same object an eager import gives.

Only public import-system APIs (``importlib.util.find_spec``, ``module_from_spec``,
``Loader.exec_module``, ``PathFinder.find_spec``), the same from Python 3.11 to 3.13 (the
Lambda runtime). The top-level ``aws_lambda_powertools`` package is left eager: its
``__init__`` installs Powertools' package log handler and user agent (side effects a lazy
body would skip) and imports Logger, Metrics and Tracer, which every HTTP function builds
at init anyway. Nothing here is lazy once imported eagerly: ``install()`` after the package
is in ``sys.modules`` does nothing.

A package whose ``__init__`` is nothing but relative ``from .sub import name`` statements
(and a docstring and ``__all__``), as Powertools' ``utilities.data_classes`` (every event
class Powertools has, ~30 ms of CPU, of which ``api_gateway`` needs five), also answers
each of those names from the submodule the ``__init__`` takes it from, without the rest:
the map is read from the ``__init__``'s own source (``ast``), so it is the real one for the
installed version, and a body with anything else (or no source) gets no map (every name
runs the body). Only the packages of ``FROM_SUBMODULES`` are read so (parsing
``importlib.metadata``'s would cost more than it saves). A name that is also the
submodule it is taken from (``from .event_source import event_source``: the eager
package's ``event_source`` is the function, the import of the submodule having set the
attribute first, and nothing sets it back) stays the name: the import system sets a
loaded submodule on its parent with ``setattr``, and the lazy module's ``__setattr__``
puts the submodule's own ``event_source`` there instead, so importing
``...data_classes.event_source`` before asking for the name leaves what the eager package
has (binding it at install instead would import Powertools' middleware factory and
tracing, more than the whole saving).

``importlib.metadata`` (stdlib) is lazy too: pydantic imports it only for its plugin
loader, which never touches it when ``PYDANTIC_DISABLE_PLUGINS`` says no plugins (the
functions set it: claros.api.entry), and importing it costs email, zipfile, csv, ...
Anything that asks it for a name (``pydantic.networks`` imports ``version``) runs it.

Call it before anything imports the package: each function's entry module
(``functions/<name>/app.py``) and ``claros.api.entry`` / ``claros.api.lambda_entry`` do.
The authorizer, which imports no Powertools (finding a subpackage's spec imports the
top-level package), installs ``STDLIB`` only.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importlib.abc imports importlib.resources: not at run time
    import ast
    from importlib.abc import Loader

__all__ = ["LAZY", "STDLIB", "install", "lazy_package"]

# The standard library's packages made lazy (what the authorizer installs).
STDLIB = ("importlib.metadata",)
# Packages whose __init__ only takes names from its submodules: each name from its own.
FROM_SUBMODULES = ("aws_lambda_powertools.utilities.data_classes",)
# The packages made lazy by install().
LAZY = (*STDLIB, "aws_lambda_powertools.event_handler", *FROM_SUBMODULES)


def install(names: tuple[str, ...] = LAZY) -> None:
    """Make every package of ``names`` lazy, if it is not imported yet."""
    for name in names:
        lazy_package(name)


def lazy_package(name: str) -> types.ModuleType:
    """``sys.modules[name]``: the package itself when already imported, else the package
    module with its ``__init__`` body deferred to the first name it does not have."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)  # imports the parent package, as an import would
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not a package that can be loaded lazily", name=name)
    module = importlib.util.module_from_spec(spec)
    names = _from_imports(spec.loader, name) if name in FROM_SUBMODULES else None
    _Deferred(module, spec.loader, names or {})
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:  # what the import system sets on the parent after loading a submodule
        setattr(sys.modules[parent], child, module)
    return module


def _from_imports(loader: Loader, name: str) -> dict[str, tuple[str, str]] | None:
    """``{name: (submodule, its attribute)}`` bound by the package's ``__init__`` when
    that body is only a docstring, relative ``from .sub import a [as b]`` statements and
    ``__all__ = [...]``; None when it has anything else, binds a name twice, binds a
    submodule's name from another submodule, or its source is not there."""
    import ast  # here: the authorizer, which installs STDLIB only, never parses one

    get_source = getattr(loader, "get_source", None)
    source = get_source(name) if get_source is not None else None
    if source is None:
        return None
    names: dict[str, tuple[str, str]] = {}
    for i, node in enumerate(ast.parse(source).body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and [_target(t) for t in node.targets] == ["__all__"]:
            continue
        if not (isinstance(node, ast.ImportFrom) and node.level == 1 and node.module):
            return None
        for alias in node.names:
            bound = alias.asname or alias.name
            if bound in names or alias.name == "*":
                return None
            names[bound] = (node.module, alias.name)
    submodules = {sub for sub, _ in names.values()}
    # A submodule's own name bound by the body: only ``from .x import x`` (then the
    # attribute, not the submodule, is what the eager package has: _Shadowing).
    if any(bound in submodules and sub != bound for bound, (sub, _) in names.items()):
        return None
    return names


def _target(node: ast.expr) -> str | None:
    import ast

    return node.id if isinstance(node, ast.Name) else None


def _shadowing(shadowed: dict[str, str]) -> type[types.ModuleType]:
    """A module class whose ``__setattr__`` keeps each name of ``shadowed`` (``from .x
    import x``) the name: when the import system sets the loaded submodule ``x`` on its
    package, the submodule's attribute goes there instead, as the eager body leaves it."""

    def __setattr__(self: types.ModuleType, attr: str, value: Any) -> None:
        if (
            attr in shadowed
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{attr}"
        ):
            value = getattr(value, shadowed[attr])
        types.ModuleType.__setattr__(self, attr, value)

    return type("LazyPackage", (types.ModuleType,), {"__setattr__": __setattr__})


class _Deferred:
    """The deferred ``__init__`` of one package module: its PEP 562 ``__getattr__`` and
    ``__dir__``, which run the body once and then leave the module's dict."""

    def __init__(
        self, module: types.ModuleType, loader: Loader, names: dict[str, tuple[str, str]]
    ) -> None:
        self.module, self.loader = module, loader
        self.names = names  # what the body binds from its submodules (_from_imports)
        self.lock = threading.RLock()  # another thread waits on it while the body runs
        self.running = False  # the body is running (then a missing name is just missing)
        module.__dict__["__getattr__"] = self.getattr
        module.__dict__["__dir__"] = self.dir
        shadowed = {bound: attr for bound, (sub, attr) in names.items() if bound == sub}
        if shadowed:
            module.__class__ = _shadowing(shadowed)

    def load(self) -> None:
        """Run the real ``__init__`` body on the module, once."""
        with self.lock:
            if self.running or self.module.__dict__.get("__getattr__") != self.getattr:
                return  # the body itself is asking (partly initialised), or done already
            self.running = True
            try:
                self.loader.exec_module(self.module)
            finally:
                self.running = False
            if type(self.module) is not types.ModuleType:  # _shadowing: not needed now
                self.module.__class__ = types.ModuleType
            # The body's own __getattr__/__dir__, if it defines them, replaced ours.
            for hook, ours in (("__getattr__", self.getattr), ("__dir__", self.dir)):
                if self.module.__dict__.get(hook) == ours:
                    del self.module.__dict__[hook]

    def from_submodule(self, bound: str) -> Any:
        """The name ``bound`` from the submodule the body takes it from, kept as the
        module's attribute (from then on the dict answers, not ``__getattr__``)."""
        sub, attr = self.names[bound]
        value = getattr(importlib.import_module(f"{self.module.__name__}.{sub}"), attr)
        self.module.__dict__[bound] = value
        return value

    def getattr(self, attr: str) -> Any:
        name = self.module.__name__
        if not self.running and attr in self.names:
            return self.from_submodule(attr)
        if not self.running and not attr.startswith("__"):
            # A submodule is imported as the submodule (what the import system does for
            # ``from package import submodule``), without the __init__ body.
            full = f"{name}.{attr}"
            if importlib.machinery.PathFinder.find_spec(full, list(self.module.__path__)):
                return importlib.import_module(full)
        self.load()
        try:
            return self.module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    def dir(self) -> list[str]:
        self.load()
        return sorted(self.module.__dict__)
