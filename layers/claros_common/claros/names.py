"""The shapes of names that travel between the guard, the API and the ledger, in one
place so every side accepts exactly the same ones."""

from __future__ import annotations

__all__ = ["EMAIL", "NAME", "RULE_ID"]

# An app or tool name, as MCP servers spell them.
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$"
# A rule or workflow id.
RULE_ID = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
# A person, by email: loose on purpose (the address is an identity, not a mailbox check).
EMAIL = r"^[^@\s]{1,64}@[^@\s]{1,190}$"
