"""The all-routes Lambda entry: every function's routes in one resolver.

The functions use ``claros.api.entry`` (each imports only its own routes); this module
stays as the baseline of bench/coldstart.py and for tools that want one handler for
everything. The handler itself is ``claros.api.entry.make_handler``'s.
"""

from __future__ import annotations

from claros import lazy_packages

lazy_packages.install()  # first, as claros.api.entry does (claros/lazy_packages.py)

from claros.api.app import build_resolver  # noqa: E402
from claros.api.entry import LambdaHandler, make_handler  # noqa: E402

__all__ = ["handler_for"]


def handler_for(name: str) -> LambdaHandler:
    return make_handler(lambda services: build_resolver(services, [name]))
