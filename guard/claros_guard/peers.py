"""Guards answering each other's reads over Unix sockets, on one machine, for one user.

Where: ``$CLAROS_PEER_DIR``, else ``$XDG_RUNTIME_DIR/claros``, else ``/tmp/claros-<uid>``;
the directory is the user's own, mode 0700, and each socket is 0600. A guard of app
``shop`` listens on ``shop.<tag>.sock``, where ``tag`` is derived from its Claros key, so
guards of two workspaces never even find each other.

Proof, without sending the key (``k = sha256(key)``, ``H`` = HMAC-SHA256 keyed by ``k``):

1. server → ``{"claros": "claros-peer/1", "app", "nonce": Ns}``
2. client → ``{"nonce": Nc, "proof": H("claros-peer/1\\nclient\\n{app}\\n{Ns}\\n{Nc}")}``
3. server → ``{"ok": true, "proof": H("claros-peer/1\\nserver\\n{app}\\n{Nc}\\n{Ns}")}``
   (or ``{"ok": false, "error"}`` and the connection closes)

Both sides prove the key, so a process squatting on the socket cannot feed facts either.
Then one request, answered, and the connection closes:

* ``{"op": "read", "tool", "arguments", "kind"}`` → ``{"ok": true, "result":
  CallToolResult}``; refused (``{"ok": false, "error", "not_a_read": true}``) unless the
  answering guard considers the tool a read. ``kind`` is the need's (``fetch``,
  ``lookup``, ``query``; missing counts as ``fetch``): the answering guard caches lookups
  for 60 s, so one-shot hook processes and other guards share one read per value, and a
  lookup's result says how many of those seconds are left (``_meta`` ``claros/fresh_for``):
  the asking guard keeps it no longer;
* ``{"op": "classify", "tool"}`` → ``{"ok": true, "read": bool}``;
* ``{"op": "status"}`` → ``{"ok": true, "app", "agent", "tools"}``, and ``"client"``:
  the pid at the other end of the agent's stdio, when known (``stdio_peer``; a hook stays
  out of a call only when it is its own Claude Code).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import logging
import os
import re
import secrets
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc

from claros_guard.errors import (
    ConfigError,
    GuardError,
    NotAReadError,
    PeerError,
    ReadFailedError,
)
from claros_guard.wire import LineChannel

__all__ = [
    "PROTOCOL",
    "READ_KINDS",
    "PeerClient",
    "PeerServer",
    "ReadSource",
    "ensure_private_dir",
    "peer_dir",
    "socket_path",
]

log = logging.getLogger("claros_guard.peers")

PROTOCOL = "claros-peer/1"
READ_KINDS = frozenset({"fetch", "lookup", "query"})
_REQUEST_LINE = 1024 * 1024
_HANDSHAKE_TIMEOUT = 5.0


def peer_dir() -> Path:
    override = os.environ.get("CLAROS_PEER_DIR")
    if override:
        return Path(override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "claros"
    return Path(tempfile.gettempdir()) / f"claros-{os.getuid()}"


def ensure_private_dir(
    path: Path, what: str = "the guards' sockets", setting: str = "CLAROS_PEER_DIR"
) -> Path:
    """The directory, made if needed: a real directory, owned by this user, mode 0700.
    ``what`` goes there and ``setting`` names another place, for the messages."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise ConfigError(f"cannot use {path} for {what}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path} is not a directory ({what} go there)")
    if info.st_uid != os.getuid():
        raise ConfigError(f"{path} belongs to another user; set {setting} to a private directory")
    if info.st_mode & 0o077:
        path.chmod(0o700)
    return path


def _secret(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def socket_path(directory: Path, app: str, key: str) -> Path:
    tag = hmac.new(_secret(key), f"{PROTOCOL}\nsocket\n{app}".encode(), "sha256").hexdigest()
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", app)[:40]
    return directory / f"{safe}.{tag[:16]}.sock"


def _proof(secret: bytes, role: str, app: str, first: str, second: str) -> str:
    text = f"{PROTOCOL}\n{role}\n{app}\n{first}\n{second}"
    return hmac.new(secret, text.encode(), "sha256").hexdigest()


def _is_live(path: Path) -> bool:
    """Whether a process answers on the socket (a stale file does not count)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


class ReadSource(Protocol):
    """What a guard offers its peers."""

    name: str

    def is_read_tool(self, tool: str) -> bool: ...

    async def read_for_peer(
        self, tool: str, arguments: dict[str, Any], *, kind: str
    ) -> dict[str, Any]: ...

    def peer_status(self) -> dict[str, Any]: ...


class PeerServer:
    """Listens for the app's peers. When another guard of the same app and key holds the
    socket already, it leaves it alone and tries again every ``retry_every`` seconds."""

    def __init__(
        self, source: ReadSource, directory: Path, key: str, *, retry_every: float = 10.0
    ) -> None:
        self.source = source
        self.directory = directory
        self.secret = _secret(key)
        self.path = socket_path(directory, source.name, key)
        self.retry_every = retry_every
        self.listening = anyio.Event()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        ensure_private_dir(self.directory)
        if len(os.fsencode(self.path)) > 100:
            raise ConfigError(
                f"the socket path {self.path} is too long; set CLAROS_PEER_DIR to "
                "a shorter directory"
            )
        task_status.started()
        while True:
            if not _is_live(self.path):
                listener = await anyio.create_unix_listener(self.path, mode=0o600)
                break
            log.info("another guard of %s answers peers at %s", self.source.name, self.path)
            await anyio.sleep(self.retry_every)
        inode = self.path.stat().st_ino
        self.listening.set()
        try:
            async with listener:
                await listener.serve(self._handle)
        finally:
            with contextlib.suppress(OSError):
                if self.path.stat().st_ino == inode:
                    self.path.unlink()

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        channel = LineChannel(stream, _REQUEST_LINE)
        try:
            with anyio.fail_after(_HANDSHAKE_TIMEOUT):
                if not await self._handshake(channel):
                    return
                request = await channel.receive()
            await channel.send(await self._answer(request))
        except (EOFError, ValueError, TimeoutError, OSError, anyio.BrokenResourceError):
            pass
        finally:
            await channel.aclose()

    async def _handshake(self, channel: LineChannel) -> bool:
        nonce = secrets.token_hex(16)
        await channel.send({"claros": PROTOCOL, "app": self.source.name, "nonce": nonce})
        hello = await channel.receive()
        theirs = hello.get("nonce") if isinstance(hello, dict) else None
        proof = hello.get("proof") if isinstance(hello, dict) else None
        if not isinstance(theirs, str) or not isinstance(proof, str) or len(theirs) < 16:
            await channel.send({"ok": False, "error": "expected a nonce and a proof"})
            return False
        expected = _proof(self.secret, "client", self.source.name, nonce, theirs)
        if not hmac.compare_digest(expected, proof):
            await channel.send(
                {
                    "ok": False,
                    "error": f"the guard of {self.source.name} uses a different Claros key",
                }
            )
            return False
        mine = _proof(self.secret, "server", self.source.name, theirs, nonce)
        await channel.send({"ok": True, "proof": mine})
        return True

    async def _answer(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            return {"ok": False, "error": "a request is a JSON object"}
        op = request.get("op")
        if op == "status":
            return {"ok": True, **self.source.peer_status()}
        tool = request.get("tool")
        if not isinstance(tool, str):
            return {"ok": False, "error": "the request names no tool"}
        if op == "classify":
            return {"ok": True, "read": self.source.is_read_tool(tool)}
        if op != "read":
            return {"ok": False, "error": f"unknown op {op!r}"}
        if not self.source.is_read_tool(tool):
            return {
                "ok": False,
                "error": f"{tool} is not a read tool of {self.source.name}; "
                "the guard runs only reads for other guards",
                "not_a_read": True,
            }
        arguments = request.get("arguments") or {}
        if not isinstance(arguments, dict):
            return {"ok": False, "error": "arguments must be an object"}
        # A peer that sends no kind (an older guard) gets a fresh read: never a stale one.
        kind = request.get("kind") or "fetch"
        if kind not in READ_KINDS:
            return {"ok": False, "error": f"unknown read kind {kind!r}"}
        try:
            result = await self.source.read_for_peer(tool, arguments, kind=kind)
        except NotAReadError as exc:
            return {"ok": False, "error": str(exc), "not_a_read": True}
        except GuardError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "result": result}


class PeerClient:
    """Asks other apps' guards (one connection per request; they are local and cheap)."""

    def __init__(self, directory: Path, key: str, *, timeout: float = 30.0) -> None:
        self.directory = directory
        self.key = key
        self.secret = _secret(key)
        self.timeout = timeout

    def path_of(self, app: str) -> Path:
        return socket_path(self.directory, app, self.key)

    async def _connect(self, app: str) -> LineChannel:
        path = self.path_of(app)
        try:
            stream = await anyio.connect_unix(path)
        except OSError as exc:
            missing = exc.errno in (errno.ENOENT, errno.ECONNREFUSED)
            raise PeerError(
                f"no guard of {app} is running on this machine (nothing answers at {path}); "
                f"start one with `claros guard --app {app} ...`"
                if missing
                else f"cannot reach the guard of {app} at {path}: {exc}"
            ) from exc
        channel = LineChannel(stream, _REQUEST_LINE * 64)
        try:
            hello = await channel.receive()
            theirs = hello.get("nonce") if isinstance(hello, dict) else None
            if not isinstance(theirs, str) or hello.get("claros") != PROTOCOL:
                raise PeerError(f"what answers at {path} is not a Claros guard")
            nonce = secrets.token_hex(16)
            await channel.send(
                {"nonce": nonce, "proof": _proof(self.secret, "client", app, theirs, nonce)}
            )
            answer = await channel.receive()
            if not isinstance(answer, dict) or not answer.get("ok"):
                error = answer.get("error") if isinstance(answer, dict) else None
                raise PeerError(str(error or f"the guard of {app} refused the connection"))
            expected = _proof(self.secret, "server", app, nonce, theirs)
            if not hmac.compare_digest(expected, str(answer.get("proof", ""))):
                raise PeerError(f"what answers at {path} does not hold this Claros key")
        except BaseException:
            await channel.aclose()
            raise
        return channel

    async def request(self, app: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            with anyio.fail_after(self.timeout):
                channel = await self._connect(app)
                try:
                    await channel.send(body)
                    answer = await channel.receive()
                finally:
                    await channel.aclose()
        except TimeoutError as exc:
            raise PeerError(f"the guard of {app} did not answer within {self.timeout:g} s") from exc
        except (EOFError, ValueError, OSError, anyio.BrokenResourceError) as exc:
            raise PeerError(f"the guard of {app} broke the connection: {exc}") from exc
        if not isinstance(answer, dict):
            raise PeerError(f"the guard of {app} answered with no object")
        return answer

    async def read(
        self, app: str, tool: str, arguments: dict[str, Any], *, kind: str = "fetch"
    ) -> dict[str, Any]:
        body = {"op": "read", "tool": tool, "arguments": arguments, "kind": kind}
        answer = await self.request(app, body)
        if not answer.get("ok"):
            message = f"the guard of {app} did not read {tool}: {answer.get('error')}"
            # Not a read is a bad mapping, not an outage: it must block even with --fail-open.
            if answer.get("not_a_read"):
                raise NotAReadError(message)
            raise PeerError(message)
        result = answer.get("result")
        if not isinstance(result, dict):
            raise ReadFailedError(f"the guard of {app} returned no result for {tool}")
        return result

    async def classify(self, app: str, tool: str) -> bool | None:
        """Whether the app's guard considers ``tool`` a read (None: no guard answers)."""
        try:
            answer = await self.request(app, {"op": "classify", "tool": tool})
        except PeerError:
            return None
        return bool(answer.get("read")) if answer.get("ok") else None

    async def status(self, app: str) -> dict[str, Any] | None:
        try:
            answer = await self.request(app, {"op": "status"})
        except PeerError:
            return None
        return answer if answer.get("ok") else None
