"""An agent opens ask after ask while the workspace's ask webhook is slow.

Every check that answers "ask" posts the new ask to the workspace's webhook "on its own
thread, retried after 1, 5 and 30 s" (docs/rules.md): one new thread per ask, each living
through its four attempts (10 s timeout each) and waits, up to ~76 s. Nothing bounded
them, so an agent with its own key, making checks a rule asks about, made the server start
threads as fast as it could ask: 60 asks, 60 threads at once; at a few hundred checks a
second, tens of thousands, until the process could start no more (and every connection
of the local server needs one). A webhook that answers slowly or not at all (or one the
flood itself slows) is all it takes.

Now deliveries go through a few worker threads per process and a bounded queue: a flood
of asks costs at most that many threads, a retry waits in the queue rather than on a
thread, and past the queue's bound a new ask's delivery is dropped and logged (the ask is
in the asks queue all the same). One workspace holds a share of the queue and of the
workers, so its flood (or its silent receiver) never drops or stalls another's."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest

from claros import webhook
from tests.api.conftest import Keys, bearer, check_body, put_rule

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

SECRET = "s3cret-s3cret-s3cret"
BOUND = getattr(webhook, "WORKERS", 4)  # the delivery threads a process may run at once


@pytest.fixture
def silent_hook() -> Iterator[str]:
    """A webhook that takes each connection and never answers (until the test ends)."""
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(1024)
    held: list[socket.socket] = []
    stop = threading.Event()

    def hold() -> None:
        sink.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(sink.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sink.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        sink.close()


def _delivery_threads() -> int:
    return sum(t.name.startswith("claros-ask-webhook") for t in threading.enumerate())


def _flood(http: httpx.Client, keys: Keys, url: str, asks: int) -> None:
    put = http.put("/api/settings/ask-webhook", json={"url": url, "secret": SECRET},
                   headers=bearer(keys.admin))  # fmt: skip
    assert put.status_code == 200, put.text
    put_rule(http, keys.admin, owners=[])
    for _ in range(asks):
        got = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
        assert got.status_code == 200 and got.json()["result"] == "ask", got.text


def test_a_flood_of_asks_starts_a_bounded_number_of_threads(
    http: httpx.Client, keys: Keys, silent_hook: str
) -> None:
    _flood(http, keys, silent_hook, 60)
    assert _delivery_threads() <= BOUND, (
        f"{_delivery_threads()} webhook delivery threads for 60 asks"
    )


def test_past_the_queue_a_delivery_is_dropped_and_logged(
    http: httpx.Client,
    keys: Keys,
    silent_hook: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(webhook, "MAX_QUEUED", 10, raising=False)
    with caplog.at_level(logging.WARNING, logger="claros.webhook"):
        _flood(http, keys, silent_hook, 30)
    assert _delivery_threads() <= BOUND
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped, "no delivery was said to be dropped"
    assert "the ask is in the asks queue" in dropped[0].getMessage()


class _Taken(BaseHTTPRequestHandler):
    got = threading.Event()

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        type(self).got.set()

    def log_message(self, *args: object) -> None:
        pass


def test_one_workspaces_flood_never_stalls_anothers_deliveries(
    http: httpx.Client, keys: Keys, silent_hook: str
) -> None:
    _flood(http, keys, silent_hook, 60)  # acme: 60 asks for a receiver that never answers
    handler = type("Taken", (_Taken,), {"got": threading.Event()})
    receiver = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        other = keys.other_workspace_admin
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        put = http.put("/api/settings/ask-webhook", json={"url": url, "secret": SECRET},
                       headers=bearer(other))  # fmt: skip
        assert put.status_code == 200, put.text
        put_rule(http, other, owners=[])
        got = http.post("/v1/check", json=check_body(), headers=bearer(other))
        assert got.json()["result"] == "ask", got.text
        # Delivered while every acme delivery still waits on its silent receiver.
        assert handler.got.wait(8), "the other workspace's ask was not delivered"
    finally:
        receiver.shutdown()
        receiver.server_close()
