"""``claros guard`` as a subprocess spoken to in raw JSON-RPC lines (no SDK client in
front, so the test can send what no well-behaved client would), in front of
``servers/raw_upstream.py``, with Claros (the real local server) behind ``CheckLog``, which
notes every ``POST /v1/check`` and when it arrived."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from tests.guard.conftest import Workspace
from tests.guard.http_fakes import Answer, HttpFake, Request, relay

RAW_UPSTREAM = Path(__file__).resolve().parent / "servers" / "raw_upstream.py"
WAIT = 20.0  # seconds any one answer may take; a test that waits longer has failed


class CheckLog(HttpFake):
    """Claros behind a port of its own, noting each check (``monotonic_ns``, body).
    ``hold`` keeps checks waiting until ``release`` is set (then they go on)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.checks: list[tuple[int, dict[str, Any]]] = []
        self.hold = False
        self.held = threading.Event()
        self._checks_lock = threading.Lock()
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.method == "POST" and request.path == "/v1/check":
            with self._checks_lock:
                self.checks.append((time.monotonic_ns(), json.loads(request.body)))
            if self.hold:
                self.held.set()
                self.release.wait(WAIT)
        return relay(self.target, request)

    def checked(self) -> list[tuple[int, dict[str, Any]]]:
        with self._checks_lock:
            return list(self.checks)


class RawGuard:
    """The guard process; ``send`` writes a line, ``answer`` waits for the reply to an id."""

    def __init__(
        self,
        ws: Workspace,
        claros_url: str,
        tmp: Path,
        *args: str,
        upstream: Path = RAW_UPSTREAM,
        **env: str,
    ) -> None:
        self.upstream_log = tmp / "upstream.jsonl"
        self.stderr_path = tmp / "guard.stderr"
        params = ws.guard(
            "shop",
            [sys.executable, str(upstream)],
            "--url",
            claros_url,
            *args,
            RAW_UPSTREAM_LOG=str(self.upstream_log),
            **env,
        )
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [params.command, *params.args],
            env=params.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.received: list[Any] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                message = {"not json": line.decode(errors="replace")}
            with self._cond:
                self.received.append(message)
                self._cond.notify_all()

    # -- sending -------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode())

    def request(self, id: Any, method: str, params: Any = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.answer(id)

    def call(self, id: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request(id, "tools/call", {"name": name, "arguments": arguments})

    def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        """The guard's answer to ``initialize`` (the agent says it can do
        ``capabilities``), once the agent said it is initialized."""
        answer = self.request(
            "init",
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities or {},
                "clientInfo": {"name": "raw-agent", "version": "1"},
            },
        )
        assert "result" in answer, answer
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return dict(answer["result"])

    # -- receiving -----------------------------------------------------------------------

    def answers(self, id: Any) -> list[dict[str, Any]]:
        with self._cond:
            return [m for m in self.received if isinstance(m, dict) and _same_id(m, id)]

    def answer(self, id: Any, n: int = 1, timeout: float = WAIT) -> dict[str, Any]:
        """The ``n``-th answer to ``id`` (a request's id, or ``None`` for errors the
        guard could not tie to a request), waiting for it."""
        return self._nth(
            lambda m: _same_id(m, id), n, timeout, f"answer #{n} to id {id!r}", "answered"
        )

    def asked(self, method: str, n: int = 1, timeout: float = WAIT) -> dict[str, Any]:
        """The ``n``-th request ``method`` the guard sent the agent, waiting for it."""
        return self._nth(
            lambda m: m.get("method") == method and "id" in m, n, timeout,
            f"request #{n} {method}", "sent",
        )  # fmt: skip

    def _nth(
        self,
        matches: Callable[[dict[str, Any]], bool],
        n: int,
        timeout: float,
        what: str,
        verb: str,
    ) -> dict[str, Any]:
        """The ``n``-th message from the guard that ``matches``, waiting up to ``timeout``
        (or until the guard exits) for it to arrive."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [m for m in self.received if isinstance(m, dict) and matches(m)]
                if len(found) >= n:
                    return found[n - 1]
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise AssertionError(
                        f"no {what} within {timeout}s; the guard said: "
                        f"{self.stderr()[-2000:]}; it {verb} {self.received[-5:]}"
                    )
                self._cond.wait(min(left, 0.2))

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def upstream_lines(self) -> list[tuple[int, str]]:
        """Every line the wrapped server received: (monotonic_ns, line)."""
        if not self.upstream_log.exists():
            return []
        entries = [json.loads(x) for x in self.upstream_log.read_text().splitlines() if x]
        return [(e["ns"], e["line"]) for e in entries]

    def upstream_saw(self, marker: str) -> list[str]:
        return [line for _, line in self.upstream_lines() if marker in line]

    def still_serves(self, check_log: CheckLog, marker: str) -> None:
        """A read goes straight through and a write is checked, then goes through."""
        read = self.call(f"read-{marker}", "order_read", {"id": marker})
        assert read.get("result", {}).get("content"), read
        before = len(check_log.checked())
        write = self.call(f"write-{marker}", "refund_create", {"order": marker})
        assert "ran" in json.dumps(write.get("result")), write
        assert any(
            body.get("tool") == "refund_create" and body.get("arguments") == {"order": marker}
            for _, body in check_log.checked()[before:]
        )

    # -- the end -------------------------------------------------------------------------

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=WAIT)
        self._reader.join(timeout=WAIT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _same_id(message: dict[str, Any], id: Any) -> bool:
    if "id" not in message or not ("result" in message or "error" in message):
        return False
    return bool(message["id"] == id and type(message["id"]) is type(id))
