"""Faults leave nothing broken (THREATS.md section 6): a full or read-only disk answers 503
with the reason and recovers, a key file is never half written and a bad one never becomes
the active key, a report whose request died mid-way is retried rather than dropped, and a
running server signs with the key ``rotate-key`` made.

Each test was first run on the code before the fix and seen to fail (the fault broke
something); the faults are real: SQLite's own SQLITE_FULL and SQLITE_READONLY, the
kernel's ENOSPC (/dev/full) and EROFS at the key file's open, a real server process
killed with SIGKILL mid-request (tests/security/faults.py, hanging_server.py).
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from claros import jsonutil
from claros.auth import Principal, create_key
from claros.clock import now_ms
from claros.config import Settings
from claros.evidence.verify import verify_workspace
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.base import GLOBAL, Store
from claros.store.sqlite import SqliteStore
from claros.wiring import Services
from claros_guard.api import HttpClarosApi, Report
from claros_guard.spool import Spool, flush
from tests.api.conftest import bearer, check_body
from tests.api.seed import install_clock
from tests.security.faults import KeyDirFault, SqliteDiskFault

WS = "acme"
ROOT = Path(__file__).resolve().parents[2]


# --- a real local server on a SQLite file the faults can reach ----------------------------
@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def disk(data: Path, monkeypatch: pytest.MonkeyPatch) -> SqliteDiskFault:
    return SqliteDiskFault(data / "claros.db", monkeypatch)


@pytest.fixture
def key_disk(data: Path, monkeypatch: pytest.MonkeyPatch) -> KeyDirFault:
    return KeyDirFault(data / "ledger-keys", monkeypatch)


@pytest.fixture
def store(data: Path, disk: SqliteDiskFault) -> Iterator[SqliteStore]:
    found = SqliteStore(data / "claros.db")
    yield found
    found.close()


@pytest.fixture
def keys(store: SqliteStore) -> dict[str, str]:
    return {
        "admin": create_key(store, WS, "admin", person="admin@acme.test"),
        "agent": create_key(store, WS, "agent", person="dana@acme.test"),
    }


def _server(store: Store, data: Path) -> LocalServer:
    settings = Settings(data_dir=data, checkpoint_every=1000, checkpoint_max_age_s=3600)
    return LocalServer(Services(settings, store, FileSigner(data)), "127.0.0.1", 0).start()


@pytest.fixture
def http(store: SqliteStore, data: Path, keys: dict[str, str]) -> Iterator[httpx.Client]:
    server = _server(store, data)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client
    finally:
        server.stop()


def _check(http: httpx.Client, keys: dict[str, str], **headers: str) -> httpx.Response:
    return http.post("/v1/check", json=check_body(), headers=bearer(keys["agent"]) | headers)


def _checkpoint(http: httpx.Client, keys: dict[str, str]) -> httpx.Response:
    return http.post("/v1/ledger/checkpoints", headers=bearer(keys["admin"]))


def _key_files(data: Path) -> list[Path]:
    return sorted((data / "ledger-keys" / WS).glob("*"))


def _assert_503(response: httpx.Response, *reason: str) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["error"] == "unavailable" and int(response.headers["Retry-After"]) >= 1
    for words in reason:
        assert words in body["message"], body["message"]


# --- key files -----------------------------------------------------------------------------
def test_disk_full_at_first_signing_leaves_no_empty_key(
    http: httpx.Client, keys: dict[str, str], key_disk: KeyDirFault, data: Path
) -> None:
    assert _check(http, keys).status_code == 200
    key_disk.error = errno.ENOSPC
    for _ in range(2):
        _assert_503(_checkpoint(http, keys), "cannot sign", "No space left on device")
    assert key_disk.hits >= 1
    assert _key_files(data) == []  # no empty key, no temp file left behind
    key_disk.error = None  # space is back
    signed = _checkpoint(http, keys)
    assert signed.status_code == 201, signed.text
    [key_file] = _key_files(data)
    assert len(bytes.fromhex(key_file.read_text())) == 32
    listed = http.get("/v1/ledger/pubkey", headers=bearer(keys["admin"])).json()
    assert signed.json()["key_id"] in jsonutil.dumps(listed)


def _bad_key_file(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, text.encode())
    os.close(fd)
    return path


def test_zero_length_key_file_is_never_the_active_key(
    http: httpx.Client,
    keys: dict[str, str],
    data: Path,
    store: SqliteStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "claros.signing")
    old = FileSigner(data).active_key(WS)
    directory = data / "ledger-keys" / WS
    # The newest key file is empty (a crash while it was written, by an older version).
    empty = _bad_key_file(directory / f"{old.created_at + 1000}.key", "")
    assert _check(http, keys).status_code == 200
    signed = _checkpoint(http, keys)
    assert signed.status_code == 201, signed.text
    first = signed.json()["key_id"]
    # Not the empty file, and not the key it followed either (that one was rotated away
    # from): a new key, newer than both, registered in the store.
    assert first != old.key_id and first in {k.key_id for k in store.public_keys(WS)}
    assert empty.read_bytes() == b""  # kept as it was, for the operator
    assert f"{empty.name} skipped: the file is empty" in caplog.text
    # A corrupt file, newer than that key, is skipped the same way.
    newest = max(int(p.stem) for p in directory.glob("*.key"))
    corrupt = _bad_key_file(directory / f"{newest + 1}.key", "not a key")
    assert _check(http, keys).status_code == 200
    second = _checkpoint(http, keys).json()["key_id"]
    assert second not in (first, old.key_id) and corrupt.read_text() == "not a key"
    assert f"{corrupt.name} skipped: the file does not hold a hex-encoded key" in caplog.text
    # The new key stays the active one: no key is made at every signature.
    files = len(_key_files(data))
    assert _check(http, keys).status_code == 200
    assert _checkpoint(http, keys).json()["key_id"] == second
    assert len(_key_files(data)) == files
    assert [k.key_id for k in FileSigner(data).all_keys(WS)] == [old.key_id, first, second]


def test_signing_failure_is_a_503_not_a_500(
    http: httpx.Client, keys: dict[str, str], key_disk: KeyDirFault, data: Path
) -> None:
    assert _check(http, keys).status_code == 200
    key_disk.error = errno.EROFS  # the data directory went read-only
    _assert_503(_checkpoint(http, keys), "cannot sign", "Read-only file system")
    export = http.get("/api/evidence/export", headers=bearer(keys["admin"]))
    _assert_503(export, "cannot sign", "Read-only file system")
    key_disk.error = None
    assert _checkpoint(http, keys).status_code == 201


# --- the database ------------------------------------------------------------------------
def test_full_disk_answers_503_and_recovers(
    http: httpx.Client, keys: dict[str, str], disk: SqliteDiskFault, store: SqliteStore
) -> None:
    assert _check(http, keys).status_code == 200
    before = store.head(WS)
    big = check_body(arguments={"order": "1187", "amount": "$1.00", "note": "x" * 200_000})
    headers = bearer(keys["agent"]) | {"Idempotency-Key": "full-1"}
    disk.fill()
    for _ in range(2):
        answer = http.post("/v1/check", json=big, headers=headers)
        _assert_503(answer, "storage is full", "database or disk is full")
    # Nothing half written: the chain is as it was and verifies.
    assert store.head(WS) == before
    disk.free()
    assert verify_workspace(store, WS).ok
    again = http.post("/v1/check", json=big, headers=headers)
    assert again.status_code == 200, again.text
    head = store.head(WS)
    assert head is not None and before is not None and head.seq == before.seq + 1
    assert verify_workspace(store, WS).ok


def test_read_only_data_dir_answers_503(
    data: Path, disk: SqliteDiskFault, store: SqliteStore, keys: dict[str, str]
) -> None:
    store.close()
    disk.read_only = True  # as a filesystem remounted read-only gives SQLite
    read_only = SqliteStore(data / "claros.db")
    server = _server(read_only, data)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            _assert_503(_check(client, keys), "read-only", "readonly database")
            entries = client.get("/v1/ledger/entries", headers=bearer(keys["admin"]))
            assert entries.status_code == 200  # reads still work
    finally:
        server.stop()
        read_only.close()
    disk.read_only = False
    writable = SqliteStore(data / "claros.db")
    try:
        assert writable.head(WS) is None  # nothing was written
    finally:
        writable.close()


# --- an Idempotency-Key whose request died mid-way -----------------------------------------
def _kill_mid_report(data: Path, report: Report, agent_key: str) -> None:
    """A real server process takes the report's Idempotency-Key and is killed with SIGKILL
    before it answers."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.security.hanging_server", str(data)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        port = int(lines.get(timeout=60).split()[1])
        body = jsonutil.dumps(report.body).encode()
        request = (
            f"POST {report.route} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {agent_key}\r\nIdempotency-Key: {report.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(request)
            assert lines.get(timeout=60).strip() == "holding"
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        stdout.close()


def _unchecked_report(key: str) -> Report:
    body = {"app": "shop", "tool": "refund_create", "arguments": {"order": "1187"},
            "agent": {"name": "claude-code", "session": "s1", "call_id": "c9"},
            "reason": "claros unreachable", "status": "ok"}  # fmt: skip
    return Report("/v1/unchecked", body, key, "unchecked write")


def _recorded(store: Store) -> int:
    return sum(1 for e in store.entries(WS) if e.kind == "unchecked")


def test_in_progress_idempotency_key_is_retried_not_dropped(
    data: Path, store: SqliteStore, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _unchecked_report("spooled-1")
    _kill_mid_report(data, report, keys["agent"])
    clock = install_clock(monkeypatch, now_ms())
    spool = Spool(data.parent / "state", keys["agent"])
    spool.append([report])
    server = _server(store, data)

    async def send() -> Any:
        api = HttpClarosApi(server.url, keys["agent"])
        try:
            return await flush(spool, api, limit=10)
        finally:
            await api.aclose()

    try:
        first = anyio.run(send)
        # "in progress" is not "delivered": the report stays in the spool, not recorded.
        assert first.sent == 0 and first.unavailable is not None, first
        assert "in progress" in first.unavailable
        assert spool.has_work() and _recorded(store) == 0
        clock.ms += 120_000  # the dead server's hold on the key has ended
        second = anyio.run(send)
        assert second.sent == 1 and second.unavailable is None, second
        assert not spool.has_work() and _recorded(store) == 1
    finally:
        server.stop()


def test_a_hook_keeps_an_in_progress_report_in_the_spool(
    data: Path, store: SqliteStore, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hooks send the spool through the same shared code: a real ``claros hook``
    process, at its start, finds the report's key still held and keeps the report."""
    report = _unchecked_report("hooked-1")
    _kill_mid_report(data, report, keys["agent"])
    install_clock(monkeypatch, now_ms())  # the server's clock: the lease holds meanwhile
    state = data.parent / "state"
    spool = Spool(state, keys["agent"])
    spool.append([report])
    server = _server(store, data)
    peers = data.parent / "peers"
    peers.mkdir(mode=0o700)
    event = {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash",
             "tool_input": {"command": "make deploy"}, "tool_use_id": "toolu_r1",
             "tool_response": {"stdout": "done"}}  # fmt: skip
    env = dict(os.environ, CLAROS_URL=server.url, CLAROS_KEY=keys["agent"],
               CLAROS_STATE_DIR=str(state), CLAROS_PEER_DIR=str(peers))  # fmt: skip
    try:
        done = subprocess.run(
            [sys.executable, "-m", "claros_guard.cli", "hook", "post"],
            input=jsonutil.dumps(event), env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert spool.has_work() and _recorded(store) == 0, done.stderr
    finally:
        server.stop()


def test_in_progress_record_of_a_dead_process_expires(
    data: Path, store: SqliteStore, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _unchecked_report("dead-1")
    _kill_mid_report(data, report, keys["agent"])
    clock = install_clock(monkeypatch, now_ms())
    server = _server(store, data)
    headers = bearer(keys["agent"]) | {"Idempotency-Key": report.key}
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            held = client.post(report.route, json=report.body, headers=headers)
            assert held.status_code == 409, held.text
            assert held.json()["error"] == "idempotency_in_progress"
            wait = int(held.headers["Retry-After"])
            assert 1 <= wait <= 60
            clock.ms += wait * 1000 + 1000
            taken = client.post(report.route, json=report.body, headers=headers)
            assert taken.status_code == 201, taken.text
            again = client.post(report.route, json=report.body, headers=headers)
            assert again.status_code == 201 and again.json() == taken.json()
            assert _recorded(store) == 1
            # "Already recorded" is another 409, told apart by its code: that one is
            # delivered.
            check_id = _check(client, keys).json()["check_id"]
            outcome = f"/v1/check/{check_id}/outcome"
            assert client.post(outcome, json={"status": "ok"}, headers=bearer(keys["agent"]))
            twice = client.post(outcome, json={"status": "ok"}, headers=bearer(keys["agent"]))
            assert twice.status_code == 409 and twice.json()["error"] == "conflict"
    finally:
        server.stop()


class _Killed(BaseException):
    """The process dies mid-request: no cleanup code runs."""


def test_a_dead_holders_lease_expires_on_both_stores(
    store_any: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claros.api.idempotency import IdempotencyInProgressError, run_idempotently

    clock = install_clock(monkeypatch, now_ms())
    who = Principal(WS, "agent", "dana@acme.test", "k" * 16)
    headers = {"idempotency-key": "lease-1"}
    runs: list[int] = []

    def run() -> tuple[int, Any]:
        runs.append(clock.ms)
        return 201, {"n": len(runs)}

    def dies() -> tuple[int, Any]:
        raise _Killed

    with pytest.raises(_Killed):
        run_idempotently(store_any, who, "POST /v1/unchecked", headers, "{}", dies)
    with pytest.raises(IdempotencyInProgressError) as held:
        run_idempotently(store_any, who, "POST /v1/unchecked", headers, "{}", run)
    assert held.value.status == 409 and held.value.code == "idempotency_in_progress"
    clock.ms += held.value.retry_after_s * 1000
    answer = run_idempotently(store_any, who, "POST /v1/unchecked", headers, "{}", run)
    assert answer.status_code == 201 and runs == [clock.ms]
    replay = run_idempotently(store_any, who, "POST /v1/unchecked", headers, "{}", run)
    assert replay.body == answer.body and len(runs) == 1
    [doc] = store_any.query_docs(GLOBAL, "idempotency")
    assert doc.value["status"] == "COMPLETED"


@pytest.fixture(params=["sqlite", "dynamodb"])
def store_any(request: pytest.FixtureRequest) -> Store:
    name = "dynamo_store" if request.param == "dynamodb" else "sqlite_store"
    found: Store = request.getfixturevalue(name)
    return found


# --- key rotation while the server runs ------------------------------------------------------
def test_running_server_signs_with_the_rotated_key(
    http: httpx.Client, keys: dict[str, str], data: Path, store: SqliteStore
) -> None:
    assert _check(http, keys).status_code == 200
    old = _checkpoint(http, keys).json()["key_id"]
    rotated = subprocess.run(
        [sys.executable, "-m", "claros.ledger", "rotate-key", "--workspace", WS,
         "--data", str(data)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.split("->")[1].strip()
    assert new != old and old in rotated.stdout
    assert _check(http, keys).status_code == 200
    signed = _checkpoint(http, keys)
    assert signed.status_code == 201 and signed.json()["key_id"] == new
    export = http.get("/api/evidence/export", headers=bearer(keys["admin"]))
    last = jsonutil.loads(export.text.strip().splitlines()[-1])
    assert last["key_id"] == new, "the export was signed with the retired key"
    assert verify_workspace(store, WS).ok
