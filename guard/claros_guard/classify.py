"""Which tools are reads. Only writes are checked; reads pass straight through.

In order, the first that speaks decides:

1. the tool's own ``readOnlyHint`` annotation (true: a read, false: a write);
2. ``--read TOOL`` / ``--write TOOL`` on the command line (or ``read:`` / ``write:`` in a
   config file);
3. the name. The name is split into words (``getOrder``, ``get-order``, ``get.order`` and
   ``get_order`` all give ``get order``); it is a read when its first word is one of
   ``READ_VERBS`` (``get_order``, ``list_invoices``, ``search_files``), or when its last
   word is one of ``READ_SUFFIXES`` and no word is one of ``WRITE_WORDS``
   (``invoice_read``, ``order_list``, but not ``cancel_order_list``);
4. anything else is a write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "READ_SUFFIXES",
    "READ_VERBS",
    "WRITE_WORDS",
    "Classifier",
    "by_name",
    "words",
]

READ_VERBS = frozenset(
    """
    get list read search find query fetch show describe view lookup count browse retrieve
    inspect preview peek
    """.split()
)
READ_SUFFIXES = frozenset(
    """
    get read list search find query show view lookup count describe info details history
    """.split()
)
WRITE_WORDS = frozenset(
    """
    create update delete remove set add put post send submit write edit modify insert
    upsert cancel approve reject pay refund move rename run execute start stop close merge
    push publish deploy import upload trigger transfer issue grant revoke reset archive
    restore clear drop kill
    """.split()
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def words(name: str) -> list[str]:
    return [w for w in _SEPARATORS.split(_CAMEL.sub("_", name).lower()) if w]


def by_name(name: str) -> bool:
    """Whether a tool's name alone says it is a read (rule 3 above)."""
    parts = words(name)
    if not parts:
        return False
    if parts[0] in READ_VERBS:
        return True
    return parts[-1] in READ_SUFFIXES and not WRITE_WORDS.intersection(parts)


@dataclass
class Classifier:
    """Classifies an app's tools; ``reads``/``writes`` come from the command line."""

    reads: frozenset[str] = field(default_factory=frozenset)
    writes: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, reads: Iterable[str] = (), writes: Iterable[str] = ()) -> Classifier:
        return cls(frozenset(reads), frozenset(writes))

    def is_read(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        hint = (annotations or {}).get("readOnlyHint")
        if isinstance(hint, bool):
            return hint
        if name in self.reads:
            return True
        if name in self.writes:
            return False
        return by_name(name)

    def why(self, name: str, annotations: Mapping[str, Any] | None = None) -> str:
        """In words, what decided (for logs and ``--explain``)."""
        hint = (annotations or {}).get("readOnlyHint")
        if isinstance(hint, bool):
            return f"readOnlyHint is {str(hint).lower()}"
        if name in self.reads:
            return "--read"
        if name in self.writes:
            return "--write"
        return "its name" if by_name(name) else "the default (not a read by any rule)"
