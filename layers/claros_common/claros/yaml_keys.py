"""YAML read as its reviewer reads it: a mapping that says one key twice is refused.

yaml's SafeLoader keeps a repeated key's last value, so a rules file (or the rules editor's
text) with ``response: ask`` and, lower down, ``response: allow`` means ``allow`` while its
reviewer read ``ask`` (tests/security/test_rules_file_says_a_key_twice.py). ``claros rules
push`` / ``mappings push`` (claros_guard.files) and the web app's editor
(claros.api.web_rules) both read with ``unique_key_loader()``. A merge (``<<: *base``) is
not a key said twice. yaml is imported at the first call: the web function's other routes
never need it.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["KeyTwice", "unique_key_loader"]


class KeyTwice(Exception):
    """A mapping says ``key`` twice; ``where`` is `` (line N)`` or empty."""

    def __init__(self, key: Any, where: str) -> None:
        super().__init__(f"the key {key!r} twice{where}")
        self.key = key
        self.where = where


@functools.cache
def unique_key_loader() -> Any:
    """yaml's SafeLoader, raising ``KeyTwice`` for a mapping whose own keys say one key
    twice (pass it as ``yaml.load(text, Loader=...)``)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        twice = key in seen
                    except TypeError:  # an unhashable key: refused by the safe loader anyway
                        continue
                    if twice:
                        mark = key_node.start_mark
                        raise KeyTwice(key, f" (line {mark.line + 1})" if mark else "")
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader
