"""Attack: hold the local server's connections so nobody else is served.

Slowloris: the server's timeout was per read (30 s of silence), not per request, so a
client sending one header byte every few seconds held its connection, and its thread,
for ever. Many connections: every connection got a thread and a file descriptor, with no
bound; an attacker opening more connections than the server's open-file limit allows
made ``accept`` fail (EMFILE), and a legitimate check waited in the listen queue until
some of the attacker's connections timed out (never, with slowloris).

What must hold (THREATS.md §5): slow or many connections do not stop others being
served. A request must arrive whole (request line, headers, body) within the connection
timeout of its first byte, or it is answered 408 and closed; at most
``max_connections`` are open (one thread each); when full, the connection that has
waited longest on its client is closed to make room, so a new client is served.

The tests bound how long they wait for each of these (generously); none asserts speed."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from claros.auth import create_key
from claros.config import Settings
from claros.local import LocalServer, connection_cap
from claros.wiring import Services, build_services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)
HEAD = b"GET /v1/ledger/pubkey HTTP/1.1\r\nHost: x\r\nX-Slow: "


@pytest.fixture
def quick_server(services: Services) -> Iterator[LocalServer]:
    """A server whose connection timeout is one second, with room for 8 connections."""
    srv = LocalServer(services, "127.0.0.1", 0, connection_timeout_s=1.0, max_connections=8).start()
    try:
        yield srv
    finally:
        srv.stop()


def _slow_head(server: LocalServer) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.sendall(HEAD)
    return sock


@SQLITE
def test_a_request_head_sent_a_byte_at_a_time_is_cut_off_with_a_408(
    quick_server: LocalServer,
) -> None:
    # One byte every 0.25 s: never silent for the 1 s timeout. The request's 1 s runs out
    # after a few bytes; the drip goes on for up to 20 s (80 bytes) waiting for the close.
    with _slow_head(quick_server) as sock:
        sock.settimeout(0.25)
        answer = b""
        for _ in range(80):
            with contextlib.suppress(OSError):  # the server may have closed its side
                sock.sendall(b"a")
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
            answer += chunk
            if not chunk:
                break
        else:
            pytest.fail("a header sent a byte at a time held the connection for 20 s")
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"did not arrive whole within 1 s" in answer


@SQLITE
def test_a_check_is_served_while_slow_heads_fill_the_server(
    quick_server: LocalServer, keys: Keys
) -> None:
    # Three times as many slow heads as the server holds: each new one closes the one
    # that waited longest; the check (a new connection) is served, never refused.
    slow = [_slow_head(quick_server) for _ in range(24)]
    try:
        with httpx.Client(base_url=quick_server.url, timeout=10) as http:
            answer = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"] == "allow"
        assert quick_server.httpd.open_connections <= 8
    finally:
        for sock in slow:
            sock.close()


@SQLITE
def test_idle_keep_alive_connections_make_room_for_a_new_one(
    quick_server: LocalServer, keys: Keys
) -> None:
    clients = [httpx.Client(base_url=quick_server.url, timeout=10) for _ in range(8)]
    try:
        for client in clients:  # each holds a kept-alive connection after its answer
            assert client.get("/v1/ledger/pubkey", headers=bearer(keys.agent)).status_code == 200
        with httpx.Client(base_url=quick_server.url, timeout=10) as http:
            answer = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
        assert answer.status_code == 200, answer.text
    finally:
        for client in clients:
            client.close()


def test_the_cap_follows_the_open_file_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
        assert connection_cap() == 64
        resource.setrlimit(resource.RLIMIT_NOFILE, (10, hard))
        assert connection_cap() == 8
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _limit_open_files() -> None:  # pragma: no cover - runs in the child
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads: line")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_claros_serve_keeps_serving_past_its_open_file_limit(tmp_path: Path) -> None:
    """The real ``claros serve`` with 128 open files allowed, and 300 slow connections."""
    data = tmp_path / "data"
    services = build_services(Settings(data_dir=data))
    agent = create_key(services.store, WORKSPACE, "agent", person="dana@acme.test")
    services.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claros_guard.cli", "serve", "--data", str(data),
             "--port", str(port)],
            env={**env, "CLAROS_LOG": "WARNING"}, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=_limit_open_files,
        )  # fmt: skip
        slow: list[socket.socket] = []
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    httpx.get(f"http://127.0.0.1:{port}/v1/me", timeout=2)
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, "claros serve did not start in 60 s"
                    time.sleep(0.1)
            for n in range(300):
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                except TimeoutError:
                    pytest.fail(f"claros serve stopped accepting connections after {n}")
                with contextlib.suppress(OSError):
                    sock.sendall(HEAD)
                slow.append(sock)
            try:
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/v1/check",
                    json=check_body(),
                    headers=bearer(agent),
                    timeout=15,
                )
            except httpx.TimeoutException:
                pytest.fail("a check was not served while 300 slow connections were open")
            assert answer.status_code == 200, answer.text
            assert _threads(proc.pid) <= 64 + 16  # the cap (half of 128), and a few more
        finally:
            for sock in slow:
                sock.close()
            proc.terminate()
            proc.wait(timeout=30)
    assert "Traceback" not in log.read_text()
