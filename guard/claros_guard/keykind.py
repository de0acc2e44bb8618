"""The guard and the hooks never run with a key that can approve.

An agent's environment must never hold a credential that can answer an ask (THREATS.md
§1): a person key (a member's own sign-in key) or an admin key. So before the guard or a
hook sends anything else with a key, it asks Claros what the key is: ``GET /v1/me``
(``{"kind", "workspace", "person", "key_id"}``). That is one small request, on the
keep-alive connection the check then reuses, asked once per process: once when a guard
starts, at most once per hook run, and never by a hook that does not talk to Claros (a
read tool). The key's own answer is the only source: a kind written in a file next to the
key could be wrong.

With a person or admin key the guard and the hooks stop: one line on stderr, exit 2 (for
a ``PreToolUse`` hook, exit 2 is Claude Code's "block this call"; the call never runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from claros_guard.api import HttpClarosApi, Report
from claros_guard.errors import ClarosRefusedError, ClarosUnavailableError, GuardError

__all__ = ["APPROVING_KINDS", "ApprovingKeyError", "KindCheckedApi", "approving_key_in"]

APPROVING_KINDS = frozenset({"admin", "person"})


class ApprovingKeyError(Exception):
    """The key can approve asks, so no agent may hold it. Deliberately not a GuardError:
    nothing turns it into a verdict or a fail-open forward; it stops the command."""


def refusal(kind: str, person: str | None) -> str:
    whose = f" ({person}'s)" if person else ""
    what = "a person's sign-in key" if kind == "person" else f"an {kind} key"
    return (
        f"refusing to run with {'an' if kind[0] in 'aeiou' else 'a'} {kind} key{whose}: "
        f"{what} can approve asks, so an agent must never hold it; give the agent an agent "
        "key (claros login, or CLAROS_KEY) or a service key"
    )


class KindCheckedApi(HttpClarosApi):
    """``HttpClarosApi`` that learns what its key is before its first request, and sends
    nothing with a key that can approve (``ApprovingKeyError``). Claros unreachable while
    asking: ``ClarosUnavailableError``, as the request itself would have failed."""

    _me: Mapping[str, Any] | None = None

    async def key_kind(self, what: str = "key check") -> str:
        """The key's kind (asked once); ``what`` names the request it is asked for, in the
        refusal when Claros refuses the key itself (a revoked key: the check is refused)."""
        if self._me is None:
            try:
                answer = await super()._send("GET", "/v1/me", what=what)
            except ClarosRefusedError as exc:
                if exc.status != 404:
                    raise
                raise ClarosRefusedError(
                    404, f"Claros at {self.url} does not say what kind of key this is "
                    "(GET /v1/me); update the server", what
                ) from None  # fmt: skip
            if not isinstance(answer, Mapping) or not isinstance(answer.get("kind"), str):
                raise ClarosUnavailableError(
                    f"Claros at {self.url} did not say what kind of key this is"
                )
            self._me = dict(answer)
        kind = str(self._me["kind"])
        if kind in APPROVING_KINDS:
            person = self._me.get("person")
            raise ApprovingKeyError(refusal(kind, str(person) if person else None))
        return kind

    async def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        what: str = "check",
    ) -> Any:
        await self.key_kind(what)
        return await super()._send(method, path, body, headers, what=what)

    async def send_reports(self, reports: Sequence[Report]) -> list[GuardError | None]:
        # The pipelined reports do not go through _send: the key's kind is asked first here
        # (ApprovingKeyError goes up, as from _send: the guard stops).
        try:
            await self.key_kind(reports[0].what if reports else "report")
        except GuardError as exc:
            return [exc] * len(reports)
        return await super().send_reports(reports)


def approving_key_in(exc: BaseException) -> ApprovingKeyError | None:
    """The ApprovingKeyError behind ``exc`` (a task group wraps what its tasks raise)."""
    if isinstance(exc, ApprovingKeyError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = approving_key_in(inner)
            if found is not None:
                return found
    return None
