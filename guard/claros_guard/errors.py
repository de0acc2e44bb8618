"""The guard's errors: one family, each saying what went wrong and what to do.

``blocks_unless_fail_open`` marks the failures ``--fail-open`` forwards anyway (Claros
unreachable, a read that failed); a refusal by Claros itself (a 4xx), a need naming a tool
that is not a read, and a rule's decision are never overridden.
"""

from __future__ import annotations

__all__ = [
    "ClarosOverloadedError",
    "ClarosRefusedError",
    "ClarosUnavailableError",
    "ConfigError",
    "GuardError",
    "NotAReadError",
    "PeerError",
    "ReadFailedError",
    "RecordTooLargeError",
    "UpstreamError",
]


class GuardError(Exception):
    """Base of the guard's errors; the message is meant for the agent or the user."""

    blocks_unless_fail_open = False


class ConfigError(GuardError):
    """A usage or configuration problem: the command exits 2."""


class ClarosUnavailableError(GuardError):
    """Claros could not be reached, timed out or answered 5xx."""

    blocks_unless_fail_open = True


class ClarosOverloadedError(ClarosUnavailableError):
    """Claros answered 503 with ``Retry-After``: too busy now, nothing was written (the
    API says so only then), so the same request may be sent again after the wait."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ClarosRefusedError(GuardError):
    """Claros answered 4xx: the request itself was refused (bad key, bad request, ...).
    ``what`` names the request: the check, the outcome, ..."""

    def __init__(self, status: int, message: str, what: str = "check") -> None:
        super().__init__(f"Claros refused the {what} ({status}): {message}")
        self.status = status
        self.reason = message


class ReadFailedError(GuardError):
    """A read Claros needed failed, or its result held no usable record or rows."""

    blocks_unless_fail_open = True


class NotAReadError(ReadFailedError):
    """Claros asked for a tool the guard does not consider a read; it is never run.

    Always blocks, even with ``--fail-open``: that option is for outages, and a need naming
    a write is a wrong (or hostile) mapping, not an outage."""

    blocks_unless_fail_open = False


class RecordTooLargeError(ReadFailedError):
    """What the reads gave is larger than Claros takes for one check. Always blocks, as
    Claros's own refusal of it (a 400) did: the record is the app's, not an outage."""

    blocks_unless_fail_open = False


class PeerError(ReadFailedError):
    """The guard of another app could not be reached, or refused the read."""


class UpstreamError(GuardError):
    """The wrapped server is not running or broke the connection."""
