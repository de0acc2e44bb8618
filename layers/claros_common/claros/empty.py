"""Default factories for pydantic fields: ``Field(default_factory=new_list)``, not
``default_factory=list``.

Pydantic asks ``inspect.signature`` of every default factory when it builds a model (does
it take the validated data?). ``list``'s signature is parsed from its text signature with
``tokenize``, whose first use compiles its large regex: 10 ms of the check and admin
functions' cold start (tests/aws/test_lean_imports.py pins it). A Python function's
signature is read from its code object; ``new_dict`` keeps the fields alike."""

from __future__ import annotations

from typing import Any

__all__ = ["new_dict", "new_list"]


def new_dict() -> dict[str, Any]:
    return {}


def new_list() -> list[Any]:
    return []
