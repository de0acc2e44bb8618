"""Claude Code hooks: ``claros hooks install`` and ``claros hook pre|post``.

``install`` adds a ``PreToolUse`` hook (``claros hook pre``), and ``PostToolUse`` and
``PostToolUseFailure`` hooks (``claros hook post``), matching every tool, to
``.claude/settings.json`` (``--project``, the default) or ``~/.claude/settings.json``
(``--user``). The command is one every teammate's machine can run: ``claros hook pre``
when ``claros`` is on PATH, else ``npx getclaros hook pre``; never a path into this
machine's virtualenv. Existing hooks and settings are kept; a Claros hook installed
before (by a path, or ``python -m claros_guard.cli``) is replaced, not duplicated;
installing twice changes nothing (the file is not rewritten).

``hook pre`` reads the hook's JSON on stdin and answers in Claude Code's format, and never
loosens Claude Code: it never answers ``allow`` (which would skip Claude Code's own
permission prompt). ``claros_guard.hook_gate`` runs first and lets every call Claros never
checks pass without loading this module.

* Shell commands (``Bash``, ``PowerShell``, ``Monitor``) and file edits (``Edit``,
  ``Write``, ``MultiEdit``, ``NotebookEdit``) are writes of app ``claude-code``
  (``$CLAROS_HOOK_APP``), and so is any built-in tool not known to run nothing (a tool a
  later Claude Code adds is checked, not waved through); the tools that run no command
  and edit no file (``Read``, ``Grep``, ``Glob``, ``WebFetch``, ...:
  ``hook_gate.PASSING_TOOLS``) pass without a word. An MCP tool
  ``mcp__<server>__<tool>`` is tool ``<tool>`` of app ``<server>``: a write unless that
  server's guard (over its peer socket), or else the tool's name, says it is a read. The
  reads a check needs run on that server's guard. When that guard itself serves Claude
  Code (it wraps this very connection) it checks the call, and the hook stays out of the
  way.
* allow → no output (exit 0: Claude Code's own permission flow runs as before); nudge →
  the rule's message as ``additionalContext``, no decision; stop → ``deny`` naming the
  rule; ask → waits for the person asked, as the guard does (``Policy``, the guard's
  budget ``policy.ASK_WAIT``; ``$CLAROS_ASK_WAIT`` may shorten it): no decision on
  approval, ``deny`` when denied or still unanswered, saying who was asked and how to
  retry.
* Claros unreachable or a read failing: ``deny`` (fail closed), unless
  ``CLAROS_FAIL_OPEN=1``: then no decision (Claude Code's own permissions decide; one
  line on stderr), and the call is kept (``Spool.hold``, by its ``tool_use_id``) for
  ``hook post`` to report to ``/v1/unchecked`` with how it ended. A need naming a tool
  that is not a read is denied even then. The key is ``$CLAROS_KEY``, else the one
  ``claros login`` saved.
* Any other failure of the hook itself: one line on stderr and, for ``pre``, ``deny`` (or
  with ``CLAROS_FAIL_OPEN=1`` no decision, kept for ``post`` as unchecked); never a
  traceback or a non-zero exit, which Claude Code takes as "run the tool anyway,
  unchecked".

``hook post`` reports the outcome (``ok`` or ``error``, a short summary): of the unchecked
call ``pre`` kept, else by the call's ``tool_use_id`` (``POST /v1/outcomes``); it never
blocks and prints nothing.

A report Claros cannot take goes to the spool (``claros_guard.spool``); every hook run
that gets that far first sends what the spool holds, at most ``_FLUSH_LINES`` reports and
``_FLUSH_SECONDS``, so a hook never stalls the agent for long.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

from claros_guard import VERSION
from claros_guard.api import HttpClarosApi, Report, call_outcome_report, unchecked_report
from claros_guard.classify import by_name
from claros_guard.errors import (
    ClarosRefusedError,
    ClarosUnavailableError,
    ConfigError,
    GuardError,
)
from claros_guard.files import FileProblem, parse_json, read_text, write_file
from claros_guard.hook_gate import (
    PASSING_TOOLS,
    WRITE_TOOLS,
    context_answer,
    deny_answer,
    mcp_parts,
    passes_at_once,
)
from claros_guard.keykind import ApprovingKeyError, KindCheckedApi
from claros_guard.login import CredentialsError, resolve_connection
from claros_guard.needs import NeedResolver
from claros_guard.peers import PeerClient, ensure_private_dir, peer_dir
from claros_guard.policy import ASK_WAIT, Call, Policy
from claros_guard.spool import Spool, deliver, flush, state_dir
from claros_guard.stdio_peer import stdout_peer

__all__ = [
    "HOOK_EVENTS",
    "WRITE_TOOLS",
    "ask_wait",
    "hook_command",
    "hook_main",
    "install",
    "passes_at_once",
    "run_event",
    "settings_path",
]

HOOK_EVENTS = {"PreToolUse": "pre", "PostToolUse": "post", "PostToolUseFailure": "post"}
# Claude Code kills a hook at its timeout and then runs the tool as if the hook had said
# nothing: the pre hook's timeout leaves a minute beyond the longest wait for an answer
# (the check before it, the repeat after the approval).
_TIMEOUTS = {"pre": int(ASK_WAIT) + 60, "post": 15}
# What runs Claros in an installed hook command: ``claros`` itself, ``npx getclaros``, or
# ``python -m claros_guard.cli`` (older installs), by any path.
_RUNNERS = frozenset({"claros", "getclaros", "claros_guard.cli"})
_ASKS_FILE = "hook-asks.json"
_FLUSH_LINES = 100
_FLUSH_SECONDS = 2.0
_UNCHECKED_SUMMARY = "allowed unchecked by the hook"


# -- install ---------------------------------------------------------------------------------


def settings_path(scope: str) -> Path:
    if scope == "user":
        return Path.home() / ".claude" / "settings.json"
    root = os.environ.get("CLAUDE_PROJECT_DIR") or Path.cwd()
    return Path(root) / ".claude" / "settings.json"


def hook_command(kind: str) -> str:
    """The command the settings name, one that runs on every teammate's machine (the
    settings file is shared): ``claros`` on PATH, else the npm launcher."""
    runner = "claros" if shutil.which("claros") else "npx getclaros"
    return f"{runner} hook {kind}"


def _is_claros_hook(hook: Mapping[str, Any], kind: str) -> bool:
    """A Claros ``hook KIND`` command, whichever way it names Claros (this install's, or
    an older one's path into some virtualenv)."""
    command = hook.get("command")
    if hook.get("type", "command") != "command" or not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return any(
        Path(word).name.split("@")[0] in _RUNNERS and words[i + 1 : i + 3] == ["hook", kind]
        for i, word in enumerate(words)
    )


def _place(entries: list[Any], kind: str) -> bool:
    """Make ``entries`` hold exactly one Claros ``hook KIND``, with today's command: a hook
    with that command is kept as it is (its timeout may be the user's), an older one is
    rewritten in place, any others are dropped. True when anything changed."""
    command = hook_command(kind)
    found = [
        hook
        for entry in entries
        for hook in entry.get("hooks") or []
        if _is_claros_hook(hook, kind)
    ]
    keep = next((h for h in found if h.get("command") == command), None)
    changed = keep is None
    if keep is None and found:
        keep = found[0]
        keep.update({"type": "command", "command": command, "timeout": _TIMEOUTS[kind]})
    elif keep is None:
        hook = {"type": "command", "command": command, "timeout": _TIMEOUTS[kind]}
        entries.append({"matcher": "*", "hooks": [hook]})
    drop = [h for h in found if h is not keep]
    for entry in list(entries):
        inner = entry.get("hooks") or []
        if any(h is d for h in inner for d in drop):
            entry["hooks"] = [h for h in inner if not any(h is d for d in drop)]
            if not entry["hooks"]:
                entries.remove(entry)
            changed = True
    return changed


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
    """Add the hooks; returns the settings file and the events whose hooks it added or
    replaced (none: the file was left as it was, byte for byte). A
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
        if _place(entries, kind):
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


async def _target(
    event: Mapping[str, Any], peers: PeerClient | None
) -> tuple[str, str, bool] | None:
    """(app, tool, whether the hook checks it), or None for a call that passes."""
    name = str(event.get("tool_name") or "")
    mcp = mcp_parts(name)
    if mcp is None:
        if name in PASSING_TOOLS:
            return None
        return os.environ.get("CLAROS_HOOK_APP", "claude-code"), name, True
    server, tool = mcp
    read = await peers.classify(server, tool) if peers is not None else None
    if read if read is not None else by_name(tool):
        return None
    status = await peers.status(server) if peers is not None else None
    return server, tool, not _serves_this_claude_code(status)


def _serves_this_claude_code(status: Mapping[str, Any] | None) -> bool:
    """Whether the guard (its peer status) serves the Claude Code that runs this hook: its
    agent is ``claude-code`` and the process at the other end of its stdio is the one at
    the other end of this hook's. A guard serving another session (its server wrapped
    there, not here) does not see this call: the hook checks it."""
    if not status or status.get("agent") != "claude-code":
        return False
    client = status.get("client")
    if not isinstance(client, int) or isinstance(client, bool):
        return False  # a guard that does not say: it may serve any session
    return client == stdout_peer(1)


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


def ask_wait(env: Mapping[str, str]) -> float:
    """How long a hook waits for the answer to an ask: the guard's budget
    (``policy.ASK_WAIT``), or less when ``CLAROS_ASK_WAIT`` says so. Never more: the
    installed hook's timeout is sized for it, and Claude Code runs the tool once a hook
    has timed out. ValueError for a setting that is not a number of seconds."""
    text = env.get("CLAROS_ASK_WAIT") or ""
    if not text:
        return ASK_WAIT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # NaN too
        raise ValueError(f"CLAROS_ASK_WAIT={text!r} is not a number of seconds")
    return min(seconds, ASK_WAIT)


def _load_asks(path: Path) -> dict[str, Any]:
    try:
        if path.is_symlink():
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_asks(path: Path, asks: dict[str, Any], before: Mapping[str, Any] | None = None) -> None:
    """Keep this hook's changes to the asks file, and nobody else's lost.

    Claude Code runs the hooks of parallel calls at once: under a lock, the file is read
    again, the asks this hook ended (in ``before``, the file as it read it, but not in
    ``asks``) are dropped, ``asks`` are added, expired ones go; then the file is replaced
    whole (a temporary file, then a rename; 0600). A failure (a full disk) leaves the file
    as it was: the asks it holds are never lost to half a write."""
    ended = {k for k in before or {} if k not in asks}
    try:
        lock = path.with_name(path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        now = time.time() * 1000
        merged = {k: v for k, v in _load_asks(path).items() if k not in ended}
        merged.update(asks)
        live = {k: v for k, v in merged.items() if _expires_at(v) > now}
        if path.is_symlink():  # never written through: the rename replaces the link
            path.unlink()
        with contextlib.suppress(FileProblem):
            write_file(path, json.dumps(live), mode=0o600)
    except OSError:
        pass
    finally:
        os.close(fd)


def _expires_at(ask: Any) -> float:
    try:
        return float(ask["expires_at"])
    except (KeyError, TypeError, ValueError):
        return 0.0


async def pre(
    event: Mapping[str, Any],
    target: tuple[str, str],
    api: HttpClarosApi,
    peers: PeerClient,
    spool: Spool | None,
) -> dict[str, Any] | None:
    app, tool = target
    fail_open = os.environ.get("CLAROS_FAIL_OPEN") == "1"
    policy = Policy(
        api,
        NeedResolver(_HookReader(peers, app)),
        fail_open=fail_open,
        ask_wait=ask_wait(os.environ),
        poll_interval=float(os.environ.get("CLAROS_ASK_POLL", "1.0")),
    )
    asks_path: Path | None = peers.directory / _ASKS_FILE
    try:
        ensure_private_dir(peers.directory)
    except ConfigError as exc:
        # Not the user's own (another user made /tmp/claros-<uid> first): nothing is read
        # from it or written there. The call is checked all the same; an ask is not
        # remembered, so its retry asks again.
        print(f"claros hook pre: open asks are not remembered: {exc}", file=sys.stderr)
        asks_path = None
    asks_before = _load_asks(asks_path) if asks_path else {}
    policy.import_asks(asks_before)
    tool_input = event.get("tool_input")
    # Whole, as Claude Code runs them: a rule decides (and an approval is bound to) exactly
    # these. A call too large for the check API is refused by it (413), and so blocked.
    arguments = dict(tool_input) if isinstance(tool_input, Mapping) else {}
    agent = {"name": "claude-code", "via": {"guard": "claros-hooks", "version": VERSION}}
    for field, value in (
        ("session", event.get("session_id")),
        ("call_id", event.get("tool_use_id")),
    ):
        if isinstance(value, str) and value:
            agent[field] = value[:256]
    call = Call(app, tool, arguments, agent)
    verdict = await policy.decide(call)
    if asks_path:
        _save_asks(asks_path, policy.export_asks(), asks_before)
    if not verdict.forward:
        return deny_answer(verdict.message or "Blocked by Claros.")
    if verdict.unchecked:
        report = policy.report_for(call, verdict, None, _UNCHECKED_SUMMARY)
        if report is not None:
            await _keep_for_post(event, report, spool, lambda: api)
        _say_unchecked(verdict.unchecked)
        return None
    # Allowed, nudged or approved: Claros has no objection, and Claude Code's own
    # permissions still decide (its prompt, its deny and ask rules), as without Claros.
    context = "\n".join(verdict.notes)
    return context_answer(context) if context else None


def _say_unchecked(reason: str) -> None:
    print(
        f"claros hook pre: Claros could not check this call and CLAROS_FAIL_OPEN=1 leaves it "
        f"to Claude Code's own permissions: {' '.join(reason.split())[:500]}",
        file=sys.stderr,
    )


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


async def post(event: Mapping[str, Any], api: HttpClarosApi, spool: Spool | None) -> None:
    tool_use_id = event.get("tool_use_id")
    if not isinstance(tool_use_id, str):
        return
    status, summary = _post_outcome(event)
    report = call_outcome_report(tool_use_id, status, summary)
    try:
        await api.send_report(report)
    except ClarosRefusedError as exc:
        # 404: no check was made for it (pre kept it as unchecked, reported long ago);
        # 409: its outcome is recorded already.
        if exc.status not in (404, 409):
            print(f"claros hook post: {exc}", file=sys.stderr)
    except ClarosUnavailableError as exc:
        _spool_or_say("post", report, spool, str(exc))
    except GuardError as exc:
        print(f"claros hook post: cannot report the outcome: {exc}", file=sys.stderr)


def _claim(event: Mapping[str, Any], spool: Spool | None) -> Report | None:
    """The unchecked call ``pre`` kept for this one, with how it ended."""
    tool_use_id = event.get("tool_use_id")
    if spool is None or not isinstance(tool_use_id, str) or not tool_use_id:
        return None
    try:
        held = spool.claim(tool_use_id)
    except (OSError, GuardError) as exc:
        print(f"claros hook post: cannot read the report spool: {exc}", file=sys.stderr)
        return None
    return held.with_outcome(*_post_outcome(event)) if held is not None else None


# -- reports that cannot wait, and the spool ---------------------------------------------------


async def _keep_for_post(
    event: Mapping[str, Any],
    report: Report,
    spool: Spool | None,
    client: Callable[[], HttpClarosApi],
) -> None:
    """A call let through unchecked: kept for its ``hook post``, which reports it with how
    it ended. Without a tool_use_id or a usable spool no post can find it, so it is
    reported now, how it ends not known."""
    call_id = event.get("tool_use_id")
    if spool is not None and isinstance(call_id, str) and call_id:
        try:
            spool.hold(call_id, report)
            return
        except (OSError, GuardError) as exc:
            print(
                f"claros hook pre: cannot keep the unchecked call for its outcome: {exc}",
                file=sys.stderr,
            )
    try:
        await deliver(client(), report)
    except ClarosUnavailableError as exc:
        _spool_or_say("pre", report, spool, str(exc))


def _spool_or_say(kind: str, report: Report, spool: Spool | None, reason: str) -> None:
    """Claros could not take the report: into the spool, sent by the next hook or guard."""
    if spool is not None:
        try:
            if spool.append([report]):
                print(
                    f"claros hook {kind}: Claros is unreachable ({reason}); the {report.what} "
                    f"is kept in {spool.path} and sent later",
                    file=sys.stderr,
                )
            return  # or dropped by a full spool, which said so
        except (OSError, GuardError) as exc:
            reason = f"{reason}; and it cannot be kept: {exc}"
    print(f"claros hook {kind}: cannot report the {report.what}: {reason}", file=sys.stderr)


async def _flush_spool(kind: str, spool: Spool, api: HttpClarosApi) -> None:
    """What earlier hooks or guards could not send: a few reports, briefly."""
    try:
        with anyio.move_on_after(_FLUSH_SECONDS):
            await flush(spool, api, limit=_FLUSH_LINES)
    except (OSError, GuardError) as exc:
        print(f"claros hook {kind}: cannot send the report spool: {exc}", file=sys.stderr)


def _spool_for(key: str | None) -> Spool | None:
    return Spool(state_dir(), key) if key else None


def _has_work(spool: Spool | None) -> bool:
    try:
        return spool is not None and spool.has_work()
    except (OSError, GuardError):
        return False


# -- entry -----------------------------------------------------------------------------------


def _env_seconds(name: str, default: str) -> float:
    """A timeout from the environment: seconds > 0, finite; ValueError otherwise, as for
    ``CLAROS_ASK_WAIT`` (a NaN deadline made every read fail, which fail-open let through)."""
    text = os.environ.get(name) or default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ValueError(f"{name}={text!r} is not a number of seconds > 0")
    return value


async def _run(kind: str, event: Mapping[str, Any]) -> dict[str, Any] | None:
    # The key as every command finds it: $CLAROS_KEY, else the one `claros login` saved
    # (for the server it was made for). The peer sockets are named after that same key.
    try:
        url, key = resolve_connection(None, None)
    except CredentialsError as exc:
        raise ConfigError(str(exc)) from None
    read_timeout = _env_seconds("CLAROS_READ_TIMEOUT", "30")
    peers = PeerClient(peer_dir(), key, timeout=read_timeout) if key else None
    spool = _spool_for(key)
    made: list[HttpClarosApi] = []

    def client() -> HttpClarosApi:  # made when needed: most runs never talk to Claros
        if not made:
            timeout = _env_seconds("CLAROS_TIMEOUT", "10")
            # Asks Claros what the key is before its first request: never an approving key.
            made.append(KindCheckedApi(url, key, timeout=timeout))
        return made[0]

    try:
        if spool is not None and _has_work(spool):
            await _flush_spool(kind, spool, client())
        if kind == "post":
            held = _claim(event, spool)
            if held is not None:
                await _send_or_spool("post", client(), held, spool)
                return None
        target = await _target(event, peers)
        if target is None or not target[2]:
            return None
        if kind == "pre":
            if peers is None:  # not reached: without a key HttpClarosApi raised ConfigError
                raise ConfigError("no Claros key: set CLAROS_KEY or run claros login")
            return await pre(event, target[:2], client(), peers, spool)
        await post(event, client(), spool)
        return None
    finally:
        for api in made:
            await api.aclose()


async def _send_or_spool(
    kind: str, api: HttpClarosApi, report: Report, spool: Spool | None
) -> None:
    try:
        await deliver(api, report)
    except ClarosUnavailableError as exc:
        _spool_or_say(kind, report, spool, str(exc))


def _plain_target(event: Mapping[str, Any]) -> tuple[str, str]:
    """(app, tool) of a call, from its name alone (no guard asked): for reporting a call
    the hook let through after failing."""
    name = str(event.get("tool_name") or "")
    mcp = mcp_parts(name)
    return mcp if mcp is not None else (os.environ.get("CLAROS_HOOK_APP", "claude-code"), name)


async def _report_unchecked(event: Mapping[str, Any], reason: str) -> None:
    """The hook failed and CLAROS_FAIL_OPEN=1 lets the call run: keep it for its post, as
    a call let through while Claros was unreachable (as little as can fail here)."""
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
        "arguments": dict(tool_input) if isinstance(tool_input, Mapping) else {},
        "agent": agent,
        "reason": reason[:500],
        "summary": _UNCHECKED_SUMMARY,
    }
    report = unchecked_report(body, f"unchecked call to {app} {tool}")
    url, key = resolve_connection(None, None)
    made: list[HttpClarosApi] = []

    def client() -> HttpClarosApi:
        made.append(HttpClarosApi(url, key, timeout=float(os.environ.get("CLAROS_TIMEOUT", "10"))))
        return made[-1]

    try:
        await _keep_for_post(event, report, _spool_for(key), client)
    finally:
        for api in made:
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
        except Exception as report_exc:  # the allow stands; say that Claros may not hear
            print(
                f"claros hook pre: cannot report the unchecked call: {report_exc}",
                file=sys.stderr,
            )
        _say_unchecked(reason)
        return 0, ""
    return 0, json.dumps(
        deny_answer(
            f"Blocked: Claros could not check this call, the hook failed unexpectedly ({what}). "
            "The call was not run."
        )
    )


def hook_main(kind: str, stdin: str | bytes) -> tuple[int, str]:
    """(exit code, stdout) for ``claros hook pre|post`` given the hook's JSON."""
    from claros_guard.hook_gate import run

    return run(kind, stdin)


def run_event(kind: str, event: Mapping[str, Any]) -> tuple[int, str]:
    """(exit code, stdout) for a hook's event that may need a check (``hook_gate`` let
    the others pass)."""
    # The spool's log lines (a report dropped, a line skipped), one line each on stderr.
    logging.basicConfig(
        level=logging.WARNING, format=f"claros hook {kind}: %(message)s", stream=sys.stderr
    )
    try:
        answer = anyio.run(_run, kind, event)
    except ApprovingKeyError as exc:  # exit 2: Claude Code blocks the call (claros_guard.keykind)
        print(f"claros hook {kind}: {exc}", file=sys.stderr)
        return 2, ""
    except ConfigError as exc:
        if kind != "pre":
            return 0, ""
        if os.environ.get("CLAROS_FAIL_OPEN") == "1":
            _say_unchecked(str(exc))
            return 0, ""
        return 0, json.dumps(deny_answer(f"Claros cannot check this call: {exc}"))
    except Exception as exc:
        return _unexpected(kind, event, exc)
    return 0, json.dumps(answer) if answer is not None else ""
