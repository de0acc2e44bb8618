"""The local server itself: keep-alive, concurrent requests, limits at the socket."""

from __future__ import annotations

import http.client
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from claros.ledger import verify_entries
from claros.local import LocalServer
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def _read_until_closed(sock: socket.socket) -> str:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_keep_alive_serves_many_requests_on_one_connection(server: LocalServer, keys: Keys) -> None:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.connect()
        sock = conn.sock
        for _ in range(5):
            conn.request("GET", "/v1/ledger/pubkey", headers=bearer(keys.agent))
            response = conn.getresponse()
            assert response.status == 200
            response.read()
            assert conn.sock is sock, "the server closed a keep-alive connection"
    finally:
        conn.close()


def test_concurrent_checks_make_one_unbroken_chain(
    server: LocalServer, keys: Keys, services: Services
) -> None:
    def worker(n: int) -> list[int]:
        seqs = []
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for i in range(25):
                body = check_body(agent={"name": "bench", "call_id": f"{n}-{i}"})
                response = client.post("/v1/check", json=body, headers=bearer(keys.agent))
                assert response.status_code == 200, response.text
                seqs.append(response.json()["seq"])
        return seqs

    with ThreadPoolExecutor(8) as pool:
        seqs = [s for part in pool.map(worker, range(8)) for s in part]
    assert sorted(seqs) == list(range(1, 201))
    store = services.store
    report = verify_entries(
        WORKSPACE,
        store.entries_with_records(WORKSPACE),
        store.checkpoints(WORKSPACE),
        store.public_keys(WORKSPACE),
        compare_records=True,
    )
    assert report.ok, report.failures
    # checkpoint_every is 5 in these tests: one checkpoint per five entries, signed inline.
    assert report.checkpoints_verified == 40


def test_oversized_body_is_refused_before_it_is_read(server: LocalServer, keys: Keys) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + keys.agent.encode() + b"\r\n"
            b"Content-Length: 50000000\r\n\r\n"
        )
        reply = _read_until_closed(sock)
    assert reply.startswith("HTTP/1.1 413")
    assert "limit is 1000000" in reply


def test_chunked_body_is_refused(server: LocalServer, keys: Keys) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\n{}\r\n0\r\n\r\n"
        )
        reply = _read_until_closed(sock)
    assert reply.startswith("HTTP/1.1 411")


def test_unknown_route_is_a_json_404(http: httpx.Client) -> None:
    response = http.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": "no route GET /v1/nothing-here"}
