"""The first thing ``claros hook pre|post`` runs: read the hook's JSON, and let a call that
Claros never checks (``Read``, ``Grep``, ``Glob``, ... the built-in tools known to run no
command and edit no file: ``PASSING_TOOLS``) go at once.

Claude Code runs the hook as a new process for every tool call, so this path is kept to
the standard library's ``json``: no HTTP client, no key lookup, no network, none of the
heavy modules (httpx, pydantic, mcp, anyio). Only a call that may need a check goes on to
``claros_guard.hooks``, which imports those. Whatever is added where the hook first talks
to Claros (the key, its kind) belongs there, not here.

What Claude Code reads on stdout is built here too, and it never loosens Claude Code: the
hook answers ``deny`` (a stop, an unanswered or denied ask, Claros unable to check),
``additionalContext`` alone (a nudge), or nothing at all, so that Claude Code's own
permission flow runs as it would without Claros. No ``permissionDecision`` that skips
Claude Code's prompt is ever printed.
"""

from __future__ import annotations

import json
import os
import sys

from claros.claude_code import WRITE_TOOLS
from claros_guard.surrogates import holds_lone_surrogate, may_hold_lone_surrogate

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (mypy knows it)

if TYPE_CHECKING:  # typing's names cost an import this path does without
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "PASSING_TOOLS",
    "WRITE_TOOLS",
    "context_answer",
    "deny_answer",
    "mcp_parts",
    "parse_event",
    "passes_at_once",
    "run",
    "run_hook",
]

# The built-in tools that run no command and edit no file (they read, search, plan, ask,
# or start subagents whose own calls come through these hooks), today's and the names
# older releases used: only these pass unchecked. A tool not named here, such as one a
# later Claude Code adds, is checked as a write of ``claude-code`` with its input: a list
# of writes would let a new shell or edit tool through unchecked, and unknown must never
# mean allow. Checked, a call no rule names is allowed (Claude Code's own permissions then
# decide) and recorded; it costs the check, and with Claros unreachable it is denied.
PASSING_TOOLS = frozenset({
    "Agent", "AskUserQuestion", "BashOutput", "CronCreate", "CronDelete", "CronList",
    "EnterPlanMode", "EnterWorktree", "ExitPlanMode", "ExitWorktree", "Glob", "Grep",
    "KillBash", "KillShell", "LS", "LSP", "ListMcpResourcesTool", "NotebookRead", "Read",
    "ReadMcpResourceTool", "SendMessage", "Skill", "SlashCommand", "Task", "TaskCreate",
    "TaskGet", "TaskList", "TaskOutput", "TaskStop", "TaskUpdate", "TodoRead", "TodoWrite",
    "ToolSearch", "WebFetch", "WebSearch",
})  # fmt: skip
_EVENT = "PreToolUse"


def deny_answer(reason: str) -> dict[str, Any]:
    """Claude Code does not run the tool, and tells the model why."""
    return {
        "hookSpecificOutput": {
            "hookEventName": _EVENT,
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def context_answer(context: str) -> dict[str, Any]:
    """No decision (Claude Code's own permissions decide), and a note for the model."""
    return {"hookSpecificOutput": {"hookEventName": _EVENT, "additionalContext": context}}


def mcp_parts(tool_name: str) -> tuple[str, str] | None:
    if not tool_name.startswith("mcp__"):
        return None
    server, sep, tool = tool_name[5:].partition("__")
    return (server, tool) if sep and server and tool else None


def passes_at_once(event: Mapping[str, Any]) -> bool:
    """A built-in tool known to run nothing and edit nothing: nothing to check, nothing
    to load."""
    name = event.get("tool_name")
    return isinstance(name, str) and name in PASSING_TOOLS


_INFINITY = float("inf")


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent, refused past a double: Claude Code's
    JSON (JavaScript's) never holds one (it writes Infinity as null), and Python would
    read it as infinity, which no check can be made on."""
    value = float(text)
    if value in (_INFINITY, -_INFINITY):
        raise ValueError(f"a number too large for a double ({text[:24]})")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_event(stdin: str | bytes) -> dict[str, Any]:
    """The hook's JSON object; ValueError saying what is wrong with it."""
    if isinstance(stdin, bytes):
        try:
            stdin = stdin.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        event = json.loads(stdin or "{}", parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(event, dict):
        raise ValueError("not an object")
    name = event.get("tool_name")
    if not isinstance(name, str) or not name:
        # Nothing to pass or check by: denied (pre), as any input that is not Claude Code's.
        raise ValueError("no tool_name, the name of the tool called, as text")
    return event


def run(kind: str, stdin: str | bytes) -> tuple[int, str]:
    """(exit code, stdout) for ``claros hook pre|post`` given the hook's JSON."""
    try:
        event = parse_event(stdin)
    except ValueError as exc:
        reason = f"claros hook {kind}: the hook input is not JSON Claude Code sends ({exc})"
        print(reason, file=sys.stderr)
        return (0, json.dumps(deny_answer(reason))) if kind == "pre" else (0, "")
    if passes_at_once(event):
        return 0, ""
    if kind == "pre" and may_hold_lone_surrogate(stdin) and holds_lone_surrogate(event):
        # Claude Code can send one (a model may write "\ud800" in its tool input), but no
        # check can be asked about it: denied, also failing open (Claros is not down).
        reason = (
            "Blocked: the call holds a string that is not Unicode text (half of a surrogate "
            "pair, such as \\ud800 alone), so Claros cannot be asked about it. The call was "
            "not run."
        )
        print(f"claros hook pre: {reason}", file=sys.stderr)
        return 0, json.dumps(deny_answer(reason))
    try:
        from claros_guard.hooks import run_event  # the HTTP client and the rest, only now
    except Exception as exc:  # a broken install: still an answer, never a traceback
        what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        print(f"claros hook {kind}: cannot load the hooks: {what}", file=sys.stderr)
        if kind != "pre" or os.environ.get("CLAROS_FAIL_OPEN") == "1":
            return 0, ""  # fail-open: no decision, Claude Code's own permissions decide
        reason = f"Blocked: Claros could not check this call ({what}). The call was not run."
        return 0, json.dumps(deny_answer(reason))
    return run_event(kind, event)


def run_hook(kind: str) -> int:
    """``claros hook KIND`` as Claude Code runs it: the JSON on stdin, the answer on
    stdout, exit 0 (a hook exiting non-zero lets Claude Code run the tool unchecked)."""
    try:
        code, out = run(kind, sys.stdin.buffer.read())
    except KeyboardInterrupt:
        return 130
    if out:
        print(out)
    return code
