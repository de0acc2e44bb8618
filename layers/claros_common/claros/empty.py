"""Default factories for pydantic fields: ``Field(default_factory=new_dict)``, not
``default_factory=dict``.

Pydantic asks ``inspect.signature`` of every default factory when it builds a model (does
it take the validated data?). A builtin's signature is parsed from its text signature with
``tokenize``, whose first use compiles its large regex: 10 ms of the check and admin
functions' cold start, for ``dict`` and ``list``. A Python function's signature is read
from its code object."""

from __future__ import annotations

from typing import Any

__all__ = ["new_dict", "new_list"]


def new_dict() -> dict[str, Any]:
    return {}


def new_list() -> list[Any]:
    return []
