"""The guard, tested as users run it: ``claros guard`` as a subprocess, the real MCP SDK
client in front, real MCP servers behind (the examples, a misbehaving lab server, the npm
reference servers), a real local Claros server on SQLite, real Unix sockets.

One Claros server per module; each test gets its own workspace (and so its own keys).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import StdioServerParameters

from claros import local
from claros.auth import create_key
from claros.config import Settings
from claros.local import LocalServer
from claros.wiring import Services, build_services
from tests.guard.scripted_http import Script, Scripted

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LAB = Path(__file__).resolve().parent / "servers" / "lab_server.py"
PERSON = "dana@example.com"
ADMIN = "admin@example.com"
EVERYTHING = ["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"]
FILESYSTEM = ["npx", "-y", "@modelcontextprotocol/server-filesystem"]


@dataclass
class Claros:
    server: LocalServer
    services: Services

    @property
    def url(self) -> str:
        return self.server.url

    def records(self, workspace: str, kind: str) -> list[dict[str, Any]]:
        return [
            rec
            for entry, rec in self.services.store.entries_with_records(workspace)
            if entry.kind == kind and rec is not None
        ]


@pytest.fixture(scope="module")
def claros(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Claros]:
    data = tmp_path_factory.mktemp("claros")
    services = build_services(Settings(data_dir=data, checkpoint_every=1000))
    server = LocalServer(services, "127.0.0.1", 0).start()
    try:
        yield Claros(server, services)
    finally:
        server.stop()
        services.close()


@dataclass
class Workspace:
    """A fresh workspace: keys, a private peer directory, a state directory of its own
    (the report spool) and a call log."""

    claros: Claros
    name: str
    agent: str
    admin: str
    peers: Path
    log: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> Path:
        """Where the guards and hooks keep reports Claros could not take (not made yet)."""
        return Path(self.env["CLAROS_STATE_DIR"])

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.claros.url, timeout=30)

    def push(
        self,
        rules: list[dict[str, Any]] | None = None,
        mappings: list[dict[str, Any]] | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {self.admin}"}
        with self.http() as http:
            for rule in rules or []:
                body = {"workflow_id": "tests", "title": rule["id"], **rule}
                answer = http.put(
                    f"/api/rules/{rule['id']}",
                    headers=headers,
                    json={"rule": body, "made_by": "manual"},
                )
                assert answer.status_code == 200, answer.text
            for mapping in mappings or []:
                answer = http.put(
                    f"/api/mappings/{mapping['app']}/{mapping['tool']}",
                    headers=headers,
                    json={"mapping": mapping},
                )
                assert answer.status_code == 200, answer.text

    def calls(self) -> list[dict[str, Any]]:
        """What reached the wrapped servers, in order."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def records(self, kind: str) -> list[dict[str, Any]]:
        return self.claros.records(self.name, kind)

    def guard(self, app: str, command: list[str], *args: str, **env: str) -> StdioServerParameters:
        """``claros guard --app APP ARGS -- COMMAND`` as the MCP client starts it."""
        argv = ["-m", "claros_guard.cli", "guard", "--app", app, *args]
        argv += ["--", *command] if command else []
        return StdioServerParameters(command=sys.executable, args=argv, env={**self.env, **env})


@pytest.fixture
def workspace(claros: Claros, tmp_path: Path) -> Iterator[Workspace]:
    name = f"w{uuid.uuid4().hex[:10]}"
    store = claros.services.store
    admin = create_key(store, name, "admin", person=ADMIN)
    agent = create_key(store, name, "agent", person=PERSON)
    peers = Path(tempfile.mkdtemp(prefix="cg"))  # short: socket paths are limited
    log = tmp_path / "calls.jsonl"
    env = {
        **os.environ,
        "CLAROS_URL": claros.url,
        "CLAROS_KEY": agent,
        "CLAROS_PEER_DIR": str(peers),
        "CLAROS_STATE_DIR": str(tmp_path / "state"),
        "CLAROS_ASK_POLL": "0.05",
        "CLAROS_LOG": "WARNING",
        "EXAMPLE_CALL_LOG": str(log),
    }
    try:
        yield Workspace(claros, name, agent, admin, peers, log, env)
    finally:
        shutil.rmtree(peers, ignore_errors=True)


def example(name: str) -> list[str]:
    return [sys.executable, str(EXAMPLES / f"{name}_server.py")]


def lab() -> list[str]:
    return [sys.executable, str(LAB)]


requires_npx = pytest.mark.skipif(
    shutil.which("npx") is None, reason="needs Node.js and npx (the npm reference servers)"
)


@pytest.fixture(scope="session")
def npm_servers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Fetch the npm reference servers once (npx caches them), before any guard's clock
    runs: each starts, sees stdin closed and exits. Session scope is once per xdist
    worker: the workers take turns (a lock in the run's shared tmp root), so two npx
    never fill the one npm cache at once, and after the first the fetch is a cache hit."""
    shared = tmp_path_factory.getbasetemp().parent  # the run's root, above each worker's
    with (shared / "npm-servers.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _fetch_npm_servers(tmp_path_factory.mktemp("npx"))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fetch_npm_servers(root: Path) -> None:
    for argv in (EVERYTHING, [*FILESYSTEM, str(root)]):
        try:
            done = subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(argv)}` did not start within 300 s (npm registry?)")
        if done.returncode != 0:
            pytest.fail(f"`{' '.join(argv)}` failed: {done.stderr.decode()[-500:]}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# A scripted HTTP/1.1 server per test (tests/guard/scripted_http.py), closed after it.
@pytest.fixture
async def scripted() -> AsyncIterator[Callable[[Script], Awaitable[Scripted]]]:
    servers: list[asyncio.Server] = []

    async def start(script: Script) -> Scripted:
        fake = Scripted(script)
        server = await asyncio.start_server(fake._serve, "127.0.0.1", 0)
        servers.append(server)
        fake.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return fake

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The client address of every connection the local Claros server accepts from now on
    (its request handler's ``setup`` counted), for tests of the guard's kept connection."""
    seen: list[object] = []
    setup = local._Handler.setup

    def counting(handler: local._Handler) -> None:
        seen.append(handler.client_address)
        setup(handler)

    monkeypatch.setattr(local._Handler, "setup", counting)
    return seen
