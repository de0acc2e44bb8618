"""The guard's lean HTTP/1.1 client (claros_guard.keepalive) against real sockets: a
scripted asyncio server answers each request as the test says, and counts connections."""

from __future__ import annotations

import asyncio
import json

import anyio
import httpx
import pytest

from claros_guard.api import HttpClarosApi
from claros_guard.errors import ClarosUnavailableError
from claros_guard.keepalive import KeepAlivePool, proxied
from tests.guard.scripted_http import ok

pytestmark = pytest.mark.anyio


def pool(url: str, timeout: float = 5.0) -> KeepAlivePool:
    return KeepAlivePool(url, {"Authorization": "Bearer ck_test"}, timeout=timeout,
                         connect_timeout=timeout)  # fmt: skip


async def test_requests_share_one_connection_and_go_in_one_piece(scripted) -> None:  # type: ignore[no-untyped-def]
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(ok())
        return True

    fake = await scripted(answer)
    client = pool(fake.url + "/prefix/")
    try:
        for n in range(3):
            response = await client.request("POST", "/v1/check", {"n": n, "é": "ü"},
                                            {"Idempotency-Key": f"k{n}"})  # fmt: skip
            assert response.status_code == 200 and response.json() == {"ok": True}
    finally:
        await client.aclose()
    assert fake.connections == 1
    head, _, body = fake.requests[2].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /prefix/v1/check HTTP/1.1"
    assert "Authorization: Bearer ck_test" in lines and "Idempotency-Key: k2" in lines
    assert "Content-Type: application/json" in lines
    assert json.loads(body) == {"n": 2, "é": "ü"}


async def test_a_connection_the_server_closed_while_idle_is_replaced(scripted) -> None:  # type: ignore[no-untyped-def]
    async def answer_then_close(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(ok())  # HTTP/1.1 and no "Connection: close": the client keeps it
        await w.drain()
        return False  # ... and the server closes it, as an idle timeout does

    fake = await scripted(answer_then_close)
    client = pool(fake.url)
    try:
        for _ in range(3):
            assert (await client.request("GET", "/v1/me")).status_code == 200
    finally:
        await client.aclose()
    assert fake.connections == 3 and len(fake.requests) == 3


async def test_chunked_and_close_delimited_answers(scripted) -> None:  # type: ignore[no-untyped-def]
    count = 0

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        nonlocal count
        count += 1
        if count == 1:
            interim = b"HTTP/1.1 100 Continue\r\n\r\n"
            chunks = b'4\r\n{"a"\r\n3;x=1\r\n:1}\r\n0\r\n\r\n'
            w.write(
                interim + b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
            )
            return True
        w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n[1,2]")
        return False

    fake = await scripted(answer)
    client = pool(fake.url)
    try:
        first = await client.request("GET", "/a")
        assert first.status_code == 201 and first.json() == {"a": 1}
        second = await client.request("GET", "/b")
        assert second.json() == [1, 2]
        third = await client.request("GET", "/c")  # the last one said close: a new one
        assert third.json() == [1, 2]
    finally:
        await client.aclose()
    assert fake.connections == 2


async def test_an_answer_cut_off_half_way_is_an_error_not_sent_again(scripted) -> None:  # type: ignore[no-untyped-def]
    async def cut(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"half')
        return False

    fake = await scripted(cut)
    api = HttpClarosApi(fake.url, "ck_test")
    try:
        with pytest.raises(ClarosUnavailableError, match="cannot reach Claros"):
            await api.check({"app": "a"})
    finally:
        await api.aclose()
    assert len(fake.requests) == 1


async def test_garbage_is_not_an_answer(scripted) -> None:  # type: ignore[no-untyped-def]
    async def garbage(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        return True

    fake = await scripted(garbage)
    client = pool(fake.url)
    try:
        with pytest.raises(httpx.RemoteProtocolError, match="not an HTTP/1.1 answer"):
            await client.request("GET", "/v1/me")
    finally:
        await client.aclose()


async def test_a_silent_server_times_out_and_leaves_no_connection_kept(scripted) -> None:  # type: ignore[no-untyped-def]
    held = anyio.Event()

    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        if n == 1:
            await held.wait()
            return False
        w.write(ok())
        return True

    fake = await scripted(silent)
    api = HttpClarosApi(fake.url, "ck_test", timeout=0.2)
    try:
        with pytest.raises(ClarosUnavailableError, match="did not answer in time"):
            await api.check({"app": "a"})
        held.set()
        # The timed-out connection was dropped: the next request opens a new one.
        assert await api.ask("ask_1") == {"ok": True}
    finally:
        await api.aclose()
    assert fake.connections == 2


async def test_a_request_cancelled_mid_way_drops_its_connection(scripted) -> None:  # type: ignore[no-untyped-def]
    arrived = anyio.Event()

    async def slow_first(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        if n == 1:
            arrived.set()
            await asyncio.sleep(30)  # the client gives up first (cancelled below)
        w.write(ok())
        return True

    fake = await scripted(slow_first)
    client = pool(fake.url)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.request, "GET", "/slow")
            await arrived.wait()
            tg.cancel_scope.cancel()
        assert (await client.request("GET", "/next")).status_code == 200
    finally:
        await client.aclose()
    assert fake.connections == 2  # never a half-read connection reused


async def test_nothing_listening_is_unreachable() -> None:
    with anyio.fail_after(10):
        async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
        api = HttpClarosApi(f"http://127.0.0.1:{port}", "ck_test")
        try:
            with pytest.raises(ClarosUnavailableError, match="cannot reach Claros"):
                await api.check({"app": "a"})
        finally:
            await api.aclose()


def test_a_proxy_in_the_environment_goes_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "localhost")
    assert proxied("https://claros.example")
    assert not proxied("https://localhost:8443")
    assert not proxied("http://claros.example")
    api = HttpClarosApi("https://claros.example", "ck_test")
    assert api._pool is None and api._http is not None


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="not an http"):
        pool("ftp://claros.example")
