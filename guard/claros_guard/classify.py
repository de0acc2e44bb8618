"""Which tools are reads. Only writes are checked; reads pass straight through.

The operator decides; the server only suggests. In order, the first that speaks decides:

1. ``--read TOOL`` / ``--write TOOL`` on the command line (or ``read:`` / ``write:`` in a
   config file): the operator's word is final;
2. the tool's ``readOnlyHint`` annotation: ``false`` makes it a write; ``true`` makes it a
   read only when its name holds no write word (``get_or_delete_user`` and
   ``get_or_create_customer`` stay writes whatever the server says);
3. the name. The name is split into words (``getOrder``, ``get-order``, ``get.order`` and
   ``get_order`` all give ``get order``); it is a read when no word is a write word and
   its first word is one of ``READ_VERBS`` (``get_order``, ``list_invoices``) or its last
   word is one of ``READ_SUFFIXES`` (``invoice_read``, ``order_list``);
4. anything else is a write.

Write words: every word in ``WRITE_WORDS`` (verbs that are only ever actions: ``create``,
``delete``, ``send``, ...), and the words in ``ACTION_NOUNS`` (``refund``, ``transfer``,
``order``, ...: nouns as often as verbs) unless the name reads as one read of that noun:
its first word is a read verb or its last word a read suffix, and no ``CONNECTORS`` word
(``or``, ``and``, ``then``) joins a second action (``refund_list`` and ``get_refund`` are
reads, ``refund_order`` and ``get_or_refund_order`` are not).

The workspace has a say too, but only to be stricter: a tool Claros holds as a write
(it was registered as one and no admin has confirmed the change) stays a write for this
guard (``claros_guard.app``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACTION_NOUNS",
    "CONNECTORS",
    "READ_SUFFIXES",
    "READ_VERBS",
    "WRITE_WORDS",
    "write_worded",
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
# Verbs that are only ever actions: any of them makes a name a write.
WRITE_WORDS = frozenset(
    """
    create update delete remove set add put send submit write edit modify insert upsert
    cancel approve reject pay move rename run execute exec close merge publish deploy
    grant revoke reset restore clear drop kill destroy purge erase wipe truncate replace
    save assign unassign enable disable activate deactivate suspend ban unban unlock
    unblock toggle mark apply revert rollback void withdraw
    """.split()
)
# Nouns as often as verbs (``get_refund``, ``refund_order``): a write unless the name
# reads as one read of the noun (see the module's docstring).
ACTION_NOUNS = frozenset(
    """
    refund transfer order invoice charge payout deposit capture post issue comment reply
    commit patch push import export upload archive invite book return schedule share
    trigger sync start stop lock block resume
    """.split()
)
CONNECTORS = frozenset({"or", "and", "then"})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def words(name: str) -> list[str]:
    return [w for w in _SEPARATORS.split(_CAMEL.sub("_", name).lower()) if w]


def _read_shaped(parts: list[str]) -> bool:
    return parts[0] in READ_VERBS or parts[-1] in READ_SUFFIXES


# Both are pure functions of the name, asked on every call of a tool (~13 us for a read's
# name, its words split by two regular expressions): worked out once per name.
@functools.lru_cache(maxsize=4096)
def write_worded(name: str) -> bool:
    """Whether the name holds a write word: then it is never a read unless the operator
    says so, whatever ``readOnlyHint`` says."""
    parts = words(name)
    if WRITE_WORDS.intersection(parts):
        return True
    if not ACTION_NOUNS.intersection(parts):
        return False
    return not _read_shaped(parts) or bool(CONNECTORS.intersection(parts))


@functools.lru_cache(maxsize=4096)
def by_name(name: str) -> bool:
    """Whether a tool's name alone says it is a read (rule 3 above)."""
    parts = words(name)
    return bool(parts) and _read_shaped(parts) and not write_worded(name)


@dataclass
class Classifier:
    """Classifies an app's tools; ``reads``/``writes`` come from the command line."""

    reads: frozenset[str] = field(default_factory=frozenset)
    writes: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, reads: Iterable[str] = (), writes: Iterable[str] = ()) -> Classifier:
        return cls(frozenset(reads), frozenset(writes))

    def __post_init__(self) -> None:
        both = sorted(self.reads & self.writes)
        if both:
            raise ValueError(f"{', '.join(both)} is listed both as a read and as a write")

    def is_read(self, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        return self._decide(name, annotations)[0]

    def why(self, name: str, annotations: Mapping[str, Any] | None = None) -> str:
        """In words, what decided (for logs and error messages)."""
        return self._decide(name, annotations)[1]

    def _decide(self, name: str, annotations: Mapping[str, Any] | None) -> tuple[bool, str]:
        if name in self.reads:
            return True, "--read"
        if name in self.writes:
            return False, "--write"
        hint = (annotations or {}).get("readOnlyHint")
        if hint is False:
            return False, "readOnlyHint is false"
        if hint is True:
            if write_worded(name):
                return False, "its name holds a write word (readOnlyHint true is not enough)"
            return True, "readOnlyHint is true"
        if by_name(name):
            return True, "its name"
        return False, "the default (not a read by any rule)"
