"""Claude Code hooks: ``claros hooks install`` and ``claros hook pre|post``.

``install`` adds a ``PreToolUse`` hook (``claros hook pre``), and ``PostToolUse`` and
``PostToolUseFailure`` hooks (``claros hook post``), matching every tool, to
``.claude/settings.json`` (``--project``, the default) or ``~/.claude/settings.json``
(``--user``). Existing hooks and settings are kept; installing twice changes nothing.

``hook pre`` reads the hook's JSON on stdin and answers in Claude Code's format::

    {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                            "permissionDecision": "allow" | "deny",
                            "permissionDecisionReason": "...",
                            "additionalContext": "..."}}

* Shell commands (``Bash``) and file edits (``Edit``, ``Write``, ``MultiEdit``,
  ``NotebookEdit``) are writes of app ``claude-code`` (``$CLAROS_HOOK_APP``); other
  built-in tools (``Read``, ``Grep``, ``Glob``, ``LS``, ``WebFetch``, ...) pass without a
  word. An MCP tool ``mcp__<server>__<tool>`` is tool ``<tool>`` of app ``<server>``: a
  write unless that server's guard (over its peer socket), or else the tool's name, says
  it is a read. The reads a check needs run on that server's guard. When that guard
  itself serves Claude Code (it wraps this very connection) it checks the call, and the
  hook stays out of the way.
* allow → ``allow``; nudge → ``allow`` with the rule's message as ``additionalContext``;
  stop → ``deny`` naming the rule; ask → waits up to ``$CLAROS_ASK_WAIT`` seconds
  (default 60) for the person asked: ``allow`` on approval, else ``deny`` saying who was
  asked and how to retry.
* Claros unreachable or a read failing: ``deny`` (fail closed), unless
  ``CLAROS_FAIL_OPEN=1``: then ``allow``, reported to ``/v1/unchecked``. A need naming a
  tool that is not a read is denied even then. The key is ``$CLAROS_KEY``, else the one
  ``claros login`` saved.
* Any other failure of the hook itself: one line on stderr and, for ``pre``, ``deny`` (or
  with ``CLAROS_FAIL_OPEN=1`` ``allow``, reported as unchecked); never a traceback or a
  non-zero exit, which Claude Code takes as "run the tool anyway, unchecked".

``hook post`` reports the outcome (``ok`` or ``error``, a short summary) by the call's
``tool_use_id`` (``POST /v1/outcomes``); it never blocks and prints nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from claros_guard import VERSION
from claros_guard.api import HttpClarosApi, new_idempotency_key
from claros_guard.classify import by_name
from claros_guard.errors import ClarosRefusedError, ConfigError, GuardError
from claros_guard.files import FileProblem, parse_json, read_text, write_file
from claros_guard.login import CredentialsError, resolve_connection
from claros_guard.needs import NeedResolver
from claros_guard.peers import PeerClient, ensure_private_dir, peer_dir
from claros_guard.policy import Call, Policy

__all__ = [
    "HOOK_EVENTS",
    "WRITE_TOOLS",
    "hook_main",
    "install",
    "passes_at_once",
    "settings_path",
]

WRITE_TOOLS = frozenset({"Bash", "Edit", "Write", "MultiEdit", "NotebookEdit"})
HOOK_EVENTS = {"PreToolUse": "pre", "PostToolUse": "post", "PostToolUseFailure": "post"}
_TIMEOUTS = {"pre": 120, "post": 15}
_MAX_STRING = 2000
_ASKS_FILE = "hook-asks.json"


# -- install ---------------------------------------------------------------------------------


def settings_path(scope: str) -> Path:
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    root = os.environ.get("CLAUDE_PROJECT_DIR") or Path.cwd()
    return Path(root) / ".claude" / "settings.json"


def _command(kind: str) -> str:
    found = shutil.which("claros")
    if found:
        return f"{shlex.quote(str(Path(found).resolve()))} hook {kind}"
    return f"{shlex.quote(sys.executable)} -m claros_guard.cli hook {kind}"


def _ours(entry: dict[str, Any], kind: str) -> bool:
    return any(
        "claros" in str(h.get("command", "")) and f"hook {kind}" in str(h.get("command", ""))
        for h in entry.get("hooks") or []
    )


def _shape_problem(path: Path, event: str, entries: list[Any]) -> ConfigError | None:
    """A hooks list not shaped as Claude Code writes it: ``[{"matcher", "hooks": [{...}]}]``."""
    for i, entry in enumerate(entries):
        where = f"hooks.{event}[{i}]"
        inner = entry.get("hooks") if isinstance(entry, dict) else None
        if not isinstance(entry, dict):
            problem = f"{where} is not an object"
        elif inner is not None and not isinstance(inner, list):
            problem = f"{where}.hooks is not a list"
        elif any(not isinstance(h, dict) for h in inner or []):
            problem = f"{where}.hooks holds something that is not an object"
        else:
            continue
        return ConfigError(
            f"{path}: {problem}, which is not how Claude Code writes its settings; "
            "nothing was changed"
        )
    return None


def install(scope: str) -> tuple[Path, list[str]]:
    """Add the hooks; returns the settings file and the events it added hooks for. A
    file that cannot be read, or is not shaped as Claude Code writes it, is a
    ConfigError naming it, and is left as it is."""
    path = settings_path(scope)
    try:
        text = read_text(path) if path.exists() else "{}"
        settings = parse_json(text or "{}", path)
    except FileProblem as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    unlike = "which is not how Claude Code writes its settings; nothing was changed"
    if not isinstance(settings, dict):
        raise ConfigError(f"{path} does not hold a JSON object, {unlike}")
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: hooks is not an object, {unlike}")
    added = []
    for event, kind in HOOK_EVENTS.items():
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise ConfigError(f"{path}: hooks.{event} is not a list, {unlike}")
        problem = _shape_problem(path, event, entries)
        if problem is not None:
            raise problem
        if any(_ours(e, kind) for e in entries):
            continue
        hook = {"type": "command", "command": _command(kind), "timeout": _TIMEOUTS[kind]}
        entries.append({"matcher": "*", "hooks": [hook]})
        added.append(event)
    if added:
        try:
            text = json.dumps(settings, indent=2) + "\n"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path, text)
        except FileProblem as exc:
            raise ConfigError(str(exc)) from None
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path, added


# -- what a tool call is ---------------------------------------------------------------------


def _trimmed(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_STRING:
        return value[:_MAX_STRING] + f"…[{len(value) - _MAX_STRING} more characters]"
    if isinstance(value, dict):
        return {str(k): _trimmed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trimmed(v) for v in value]
    return value


def mcp_parts(tool_name: str) -> tuple[str, str] | None:
    if not tool_name.startswith("mcp__"):
        return None
    server, sep, tool = tool_name[5:].partition("__")
    return (server, tool) if sep and server and tool else None


def passes_at_once(event: Mapping[str, Any]) -> bool:
    """A built-in tool that is not a write: nothing to check, nothing to load."""
    name = str(event.get("tool_name") or "")
    return mcp_parts(name) is None and name not in WRITE_TOOLS


async def _target(
    event: Mapping[str, Any], peers: PeerClient | None
) -> tuple[str, str, bool] | None:
    """(app, tool, whether the hook checks it), or None for a call that passes."""
    name = str(event.get("tool_name") or "")
    mcp = mcp_parts(name)
    if mcp is None:
        if name not in WRITE_TOOLS:
            return None
        return os.environ.get("CLAROS_HOOK_APP", "claude-code"), name, True
    server, tool = mcp
    read = await peers.classify(server, tool) if peers is not None else None
    if read if read is not None else by_name(tool):
        return None
    status = await peers.status(server) if peers is not None else None
    return server, tool, not (status and status.get("agent") == "claude-code")


# -- pre -------------------------------------------------------------------------------------


class _HookReader:
    def __init__(self, peers: PeerClient, app: str) -> None:
        self.peers = peers
        self.app = app

    async def read(
        self, app: str | None, tool: str, arguments: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        # The kind lets that guard cache lookups: this process is gone after one call.
        return await self.peers.read(app or self.app, tool, arguments, kind=kind)


def _answer(decision: str, reason: str, context: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
        "permissionDecisionReason": reason,
    }
    if context:
        out["additionalContext"] = context
    return {"hookSpecificOutput": out}


def _load_asks(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_asks(path: Path, asks: dict[str, Any]) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asks, fh)
    except OSError:
        pass


async def pre(
    event: Mapping[str, Any], target: tuple[str, str], api: HttpClarosApi, peers: PeerClient
) -> dict[str, Any] | None:
    app, tool = target
    fail_open = os.environ.get("CLAROS_FAIL_OPEN") == "1"
    policy = Policy(
        api,
        NeedResolver(_HookReader(peers, app)),
        fail_open=fail_open,
        ask_wait=float(os.environ.get("CLAROS_ASK_WAIT", "60")),
        poll_interval=float(os.environ.get("CLAROS_ASK_POLL", "1.0")),
    )
    asks_path = peers.directory / _ASKS_FILE
    with contextlib.suppress(ConfigError):
        ensure_private_dir(peers.directory)
    policy.import_asks(_load_asks(asks_path))
    tool_input = event.get("tool_input")
    arguments = _trimmed(dict(tool_input)) if isinstance(tool_input, Mapping) else {}
    agent = {"name": "claude-code", "via": {"guard": "claros-hooks", "version": VERSION}}
    for field, value in (
        ("session", event.get("session_id")),
        ("call_id", event.get("tool_use_id")),
    ):
        if isinstance(value, str) and value:
            agent[field] = value[:256]
    call = Call(app, tool, arguments, agent)
    verdict = await policy.decide(call)
    _save_asks(asks_path, policy.export_asks())
    if not verdict.forward:
        return _answer("deny", verdict.message or "Blocked by Claros.")
    if verdict.unchecked:
        job = policy.report_job(call, verdict, "ok", "allowed unchecked by the hook")
        if job is not None:
            try:
                await job()
            except GuardError as exc:
                print(f"claros hook: cannot report the unchecked call: {exc}", file=sys.stderr)
        return _answer(
            "allow",
            f"Claros could not check this call and CLAROS_FAIL_OPEN=1 "
            f"lets it run: {verdict.unchecked}",
        )
    context = "\n".join(verdict.notes) or None
    return _answer("allow", f"Claros: {verdict.result} (check {verdict.check_id})", context)


# -- post ------------------------------------------------------------------------------------


def _post_outcome(event: Mapping[str, Any]) -> tuple[str, str]:
    response = event.get("tool_response")
    if event.get("hook_event_name") == "PostToolUseFailure":
        error = event.get("error") or (response if isinstance(response, str) else "failed")
        return "error", str(error)[:300]
    if isinstance(response, Mapping):
        failed = bool(
            response.get("is_error") or response.get("isError") or response.get("interrupted")
        )
        code = response.get("exit_code", response.get("returnCode"))
        if isinstance(code, int) and code != 0:
            failed = True
        text = next(
            (
                str(response[k])
                for k in ("stdout", "output", "content", "filePath", "file_path", "message")
                if response.get(k)
            ),
            "done",
        )
        return ("error" if failed else "ok"), text.strip()[:300] or "done"
    return "ok", str(response or "done")[:300]


async def post(event: Mapping[str, Any], api: HttpClarosApi) -> None:
    tool_use_id = event.get("tool_use_id")
    if not isinstance(tool_use_id, str):
        return
    status, summary = _post_outcome(event)
    try:
        await api.outcome_by_call(tool_use_id, status, summary)
    except ClarosRefusedError as exc:
        if exc.status != 404:  # 404: no check was made for it (e.g. let through unchecked)
            print(f"claros hook post: {exc}", file=sys.stderr)
    except GuardError as exc:
        print(f"claros hook post: cannot report the outcome: {exc}", file=sys.stderr)


# -- entry -----------------------------------------------------------------------------------


async def _run(kind: str, event: Mapping[str, Any]) -> dict[str, Any] | None:
    # The key as every command finds it: $CLAROS_KEY, else the one `claros login` saved
    # (for the server it was made for). The peer sockets are named after that same key.
    try:
        url, key = resolve_connection(None, None)
    except CredentialsError as exc:
        raise ConfigError(str(exc)) from None
    read_timeout = float(os.environ.get("CLAROS_READ_TIMEOUT", "30"))
    peers = PeerClient(peer_dir(), key, timeout=read_timeout) if key else None
    target = await _target(event, peers)
    if target is None or not target[2]:
        return None
    api = HttpClarosApi(url, key, timeout=float(os.environ.get("CLAROS_TIMEOUT", "10")))
    try:
        if kind == "pre":
            if peers is None:  # not reached: without a key HttpClarosApi raised ConfigError
                raise ConfigError("no Claros key: set CLAROS_KEY or run claros login")
            return await pre(event, target[:2], api, peers)
        await post(event, api)
        return None
    finally:
        await api.aclose()


def _plain_target(event: Mapping[str, Any]) -> tuple[str, str]:
    """(app, tool) of a call, from its name alone (no guard asked): for reporting a call
    the hook let through after failing."""
    name = str(event.get("tool_name") or "")
    mcp = mcp_parts(name)
    return mcp if mcp is not None else (os.environ.get("CLAROS_HOOK_APP", "claude-code"), name)


async def _report_unchecked(event: Mapping[str, Any], reason: str) -> None:
    app, tool = _plain_target(event)
    tool_input = event.get("tool_input")
    agent: dict[str, Any] = {
        "name": "claude-code",
        "via": {"guard": "claros-hooks", "version": VERSION},
    }
    call_id = event.get("tool_use_id")
    if isinstance(call_id, str) and call_id:
        agent["call_id"] = call_id[:256]
    body = {
        "app": app,
        "tool": tool,
        "arguments": _trimmed(dict(tool_input)) if isinstance(tool_input, Mapping) else {},
        "agent": agent,
        "reason": reason[:500],
        "status": "ok",
        "summary": "allowed unchecked by the hook",
    }
    api = HttpClarosApi(None, None, timeout=float(os.environ.get("CLAROS_TIMEOUT", "10")))
    try:
        await api.unchecked(body, new_idempotency_key())
    finally:
        await api.aclose()


def _unexpected(kind: str, event: Mapping[str, Any], exc: Exception) -> tuple[int, str]:
    """A bug or a broken setting: one line on stderr, never a traceback, and for a write a
    clear deny (Claude Code runs the tool anyway on a non-zero exit, unchecked)."""
    cause: BaseException = exc
    while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
        cause = cause.exceptions[0]  # a task group's wrapper says nothing of the cause
    what = f"{type(cause).__name__}: {' '.join(str(cause).split())}"[:500]
    print(f"claros hook {kind}: unexpected error: {what}", file=sys.stderr)
    if kind != "pre":
        return 0, ""
    if os.environ.get("CLAROS_FAIL_OPEN") == "1":
        reason = f"the hook failed unexpectedly ({what})"
        try:
            anyio.run(_report_unchecked, event, reason)
        except Exception as report_exc:  # the allow stands; say that Claros did not hear
            print(
                f"claros hook pre: cannot report the unchecked call: {report_exc}",
                file=sys.stderr,
            )
        return 0, json.dumps(
            _answer(
                "allow",
                f"Claros could not check this call and CLAROS_FAIL_OPEN=1 lets it run: {reason}",
            )
        )
    return 0, json.dumps(
        _answer(
            "deny",
            f"Blocked: Claros could not check this call, the hook failed unexpectedly ({what}). "
            "The call was not run.",
        )
    )


def _parse_event(stdin: str | bytes) -> dict[str, Any]:
    """The hook's JSON object; ValueError saying what is wrong with it."""
    if isinstance(stdin, bytes):
        try:
            stdin = stdin.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    try:
        event = json.loads(stdin or "{}")
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(event, dict):
        raise ValueError("not an object")
    return event


def hook_main(kind: str, stdin: str | bytes) -> tuple[int, str]:
    """(exit code, stdout) for ``claros hook pre|post`` given the hook's JSON."""
    try:
        event = _parse_event(stdin)
    except ValueError as exc:
        reason = f"claros hook {kind}: the hook input is not JSON Claude Code sends ({exc})"
        print(reason, file=sys.stderr)
        return (0, json.dumps(_answer("deny", reason))) if kind == "pre" else (0, "")
    if passes_at_once(event):
        return 0, ""
    try:
        answer = anyio.run(_run, kind, event)
    except ConfigError as exc:
        if kind != "pre":
            return 0, ""
        if os.environ.get("CLAROS_FAIL_OPEN") == "1":
            return 0, ""
        return 0, json.dumps(_answer("deny", f"Claros cannot check this call: {exc}"))
    except Exception as exc:
        return _unexpected(kind, event, exc)
    return 0, json.dumps(answer) if answer is not None else ""
