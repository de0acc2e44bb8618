"""The guard's lean HTTP/1.1 client (claros_guard.keepalive) against real sockets: a
scripted asyncio server answers each request as the test says, and counts connections."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claros_guard.api import MAX_BODY_BYTES, HttpClarosApi, unchecked_report
from claros_guard.errors import ClarosRefusedError, ClarosUnavailableError
from claros_guard.keepalive import (
    Answer,
    KeepAlivePool,
    Outgoing,
    RequestTooLarge,
    loads,
    proxied,
)
from tests.guard.scripted_http import ok

pytestmark = pytest.mark.anyio


async def answer_ok(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
    """A scripted server's answer to every request: 200 with a small JSON body."""
    w.write(ok())
    return True


def pool(url: str, timeout: float = 5.0) -> KeepAlivePool:
    return KeepAlivePool(url, {"Authorization": "Bearer ck_test"}, timeout=timeout,
                         connect_timeout=timeout)  # fmt: skip


async def test_requests_share_one_connection_and_go_in_one_piece(scripted) -> None:  # type: ignore[no-untyped-def]
    fake = await scripted(answer_ok)
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


# The answer as RFC 9112 frames it: what the client reads, and whether it keeps the
# connection (a second request on it tells).
_HEADS = {
    "lf_only": (b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}", {}, True),
    "folded": (b"HTTP/1.1 200 OK\r\nX-A: one\r\n  two\r\nContent-Length: 2\r\n\r\n{}", {}, True),
    "same_length_twice": (b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n{}", {}, True),
    "no_content": (b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", None, True),
    "not_modified": (b"HTTP/1.1 304 Not Modified\r\n\r\n", None, True),
    "http_1_0": (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", {}, False),
    "connection_close": (
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\n{}",
        {},
        False,
    ),  # fmt: skip
    "chunked_with_trailers": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
        b"2 \r\n{}\r\n0\r\nX-Trailer: t\r\n\r\n",
        {},
        True,
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(_HEADS))
async def test_answers_framed_every_way_the_rfc_allows(scripted, case: str) -> None:  # type: ignore[no-untyped-def]
    raw, expected, kept = _HEADS[case]

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(raw if len(fake.requests) == 1 else ok())
        return True

    fake = await scripted(answer)
    client = pool(fake.url)
    try:
        first = await client.request("GET", "/a")
        assert (await client.request("GET", "/b")).json() == {"ok": True}
    finally:
        await client.aclose()
    assert first.json() == expected if expected is not None else first.content == b""
    assert fake.connections == (1 if kept else 2)
    if case == "folded":
        assert first.headers.get("x-a") == "one two"


_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
_NOT_ANSWERS = {
    "both_lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
    "two_lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "bad_length": b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}",
    "gzip_only": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n{}",
    "bad_chunk_size": _CHUNKED + b"zz\r\n{}\r\n0\r\n\r\n",
    "chunk_without_crlf": _CHUNKED + b"2\r\n{}XX0\r\n\r\n",
    "switching": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    "no_colon": b"HTTP/1.1 200 OK\r\nContent-Length 2\r\n\r\n{}",
    "space_before_colon": b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}",
    "huge_head": b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 70_000 + b"\r\n\r\n",
}


# What h11 (the protocol library) cannot take as a whole answer: it says so, or (a status
# line of another version, a body framed both ways, a head that never ends) waits for
# more until the request's time is up. Either way the request fails, is never sent again,
# and its connection is not kept.
_FAILED = (httpx.RemoteProtocolError, httpx.ReadTimeout)


@pytest.mark.parametrize("case", sorted(_NOT_ANSWERS))
async def test_what_is_not_an_answer_fails_and_is_not_kept(scripted, case: str) -> None:  # type: ignore[no-untyped-def]
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        w.write(_NOT_ANSWERS[case] if len(fake.requests) == 1 else ok())
        return True

    fake = await scripted(answer)
    client = pool(fake.url, timeout=1.0)
    try:
        with pytest.raises(_FAILED):
            await client.request("GET", "/a")
        assert (await client.request("GET", "/b")).json() == {"ok": True}
    finally:
        await client.aclose()
    assert fake.connections == 2 and len(fake.requests) == 2  # never sent again


async def test_a_head_request_reads_no_body_and_headers_read_in_any_case(scripted) -> None:  # type: ignore[no-untyped-def]
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        if len(fake.requests) == 1:  # a HEAD answer names the length it would have had
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\nRetry-After: 1\r\n"
                    b"retry-after: 2\r\n\r\n")  # fmt: skip
        else:
            w.write(ok(b'{"n":%d}' % (len(fake.requests) - 1)))
        return True

    fake = await scripted(answer)
    client = pool(fake.url)
    try:
        head = await client.request("HEAD", "/a")
        assert head.content == b"" and head.headers.get("RETRY-AFTER") == "1, 2"
        assert "Retry-After" in head.headers and "Location" not in head.headers
        assert (await client.request("GET", "/b")).json() == {"n": 1}
        assert (await client.request("GET", "/c")).json() == {"n": 2}
    finally:
        await client.aclose()
    assert fake.connections == 1


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("POST", "/v1/a b", None),  # a space in the target
        ("POST", "/v1/é", None),  # not ASCII: percent-encode it (api.segment does)
        ("PO ST", "/v1/a", None),
        ("POST", "/v1/a", {"X-Key": "a\r\nX-Injected: 1"}),
        ("POST", "/v1/a", {"X Key": "a"}),
        ("POST", "/v1/a", {"X-Key": "café"}),
    ],
)
async def test_a_request_that_cannot_be_framed_is_never_sent(  # type: ignore[no-untyped-def]
    scripted, method: str, path: str, headers: dict[str, str] | None
) -> None:
    fake = await scripted(answer_ok)
    client = pool(fake.url)
    try:
        with pytest.raises(httpx.LocalProtocolError, match="cannot send this request"):
            await client.request(method, path, {"a": 1}, headers)
    finally:
        await client.aclose()
    assert fake.requests == []


async def test_a_key_that_cannot_be_a_header_fails_every_request(scripted) -> None:  # type: ignore[no-untyped-def]
    fake = await scripted(answer_ok)
    client = KeepAlivePool(fake.url, {"Authorization": "Bearer ck\r\nX-Injected: 1"},
                           timeout=5, connect_timeout=5)  # fmt: skip
    try:
        for _ in range(2):
            with pytest.raises(httpx.LocalProtocolError, match="illegal header") as caught:
                await client.request("GET", "/v1/me")
            assert "Injected" not in str(caught.value)  # the key is never in an error
    finally:
        await client.aclose()
    assert fake.requests == []


async def test_a_nan_in_a_body_is_refused_not_sent_as_null(scripted) -> None:  # type: ignore[no-untyped-def]
    fake = await scripted(answer_ok)
    client = pool(fake.url)
    try:
        with pytest.raises(ValueError, match="not JSON compliant"):
            await client.request("POST", "/v1/check", {"fetched": {"total": float("nan")}})
    finally:
        await client.aclose()
    assert fake.requests == []


def _same_json(text: bytes) -> None:
    """``loads`` (orjson where it reads alike) gives what ``json.loads`` gives: the same
    value, types and all (an exact big integer, -0.0, NaN), or the same refusal."""
    try:
        expected = json.loads(text)
    except (ValueError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            loads(text)
        return
    got = loads(text)
    assert repr(got) == repr(expected)
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(got, float) and math.isnan(got)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too, where orjson would give a float
    | st.floats()  # NaN and infinities too: json writes and reads them, orjson refuses
    | st.text(),  # lone surrogates, digits, everything
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=1000)
@given(_json_values)
def test_an_answer_reads_as_json_loads_reads_it(value: Any) -> None:
    _same_json(json.dumps(value).encode())
    _same_json(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize(
    "text",
    [b"-9223372036854775809", b"18446744073709551616", b"9223372036854775807", b"-0", b"-0.0",
     b"1e400", b"NaN", b"[Infinity]", b'{"a":1,"a":2}', b'"\\ud800"', b"\xef\xbb\xbf{}",
     b'{"id":"1234567890123456789"}', b"[" * 2000 + b"]" * 2000, b"", b"{", b"\xff"],
    ids=lambda text: repr(text[:30]),
)  # fmt: skip
def test_what_orjson_reads_otherwise_is_read_by_json(text: bytes) -> None:
    _same_json(text)


async def test_a_huge_head_on_a_kept_connection_is_not_taken_for_stale_and_sent_again(  # type: ignore[no-untyped-def]
    scripted,
) -> None:
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, n: int) -> bool:
        first = len(fake.requests) == 1
        w.write(ok() if first else _NOT_ANSWERS["huge_head"])
        return True

    fake = await scripted(answer)
    client = pool(fake.url, timeout=1.0)
    try:
        assert (await client.request("GET", "/a")).status_code == 200  # the connection is kept
        with pytest.raises(_FAILED):
            await client.request("POST", "/v1/check", {"a": 1})
    finally:
        await client.aclose()
    assert len(fake.requests) == 2  # the check went once: it may have been recorded


async def test_a_body_over_the_limit_is_never_sent(scripted) -> None:  # type: ignore[no-untyped-def]
    """Claros refuses a body over its limit unread, and a large one breaks the connection
    before that 413 can be read: the pool refuses it itself, alone or in a pipeline."""
    fake = await scripted(answer_ok)
    client = KeepAlivePool(fake.url, {}, timeout=5, connect_timeout=5, max_body=100)
    try:
        with pytest.raises(
            RequestTooLarge, match="the request is 111 bytes; Claros takes at most 100"
        ):
            await client.request("POST", "/v1/check", {"note": "x" * 100})
        fits, too_big = await client.pipeline(
            [Outgoing("POST", "/v1/a", {"n": 1}), Outgoing("POST", "/v1/b", {"note": "x" * 100})]
        )
        assert isinstance(fits, Answer) and fits.status_code == 200
        assert isinstance(too_big, RequestTooLarge)
    finally:
        await client.aclose()
    assert [r.split(b" ", 2)[1] for r in fake.requests] == [b"/v1/a"]


@pytest.mark.parametrize("path", ["lean", "httpx"])
async def test_a_check_over_the_limit_is_a_refusal_that_fail_open_does_not_forward(
    scripted,
    monkeypatch: pytest.MonkeyPatch,
    path: str,  # type: ignore[no-untyped-def]
) -> None:
    fake = await scripted(answer_ok)
    if path == "httpx":
        monkeypatch.setenv("HTTP_PROXY", fake.url)  # through httpx, as behind a proxy
    api = HttpClarosApi(fake.url, "ck_test")
    assert (api._pool is None) == (path == "httpx")
    body = {"app": "shop", "tool": "refund_create", "arguments": {"note": "x" * MAX_BODY_BYTES}}
    try:
        with pytest.raises(ClarosRefusedError) as refused:
            await api.check(body)
    finally:
        await api.aclose()
    assert refused.value.status == 413 and not refused.value.blocks_unless_fail_open
    assert f"Claros takes at most {MAX_BODY_BYTES}" in str(refused.value)
    assert fake.requests == []


def test_an_unchecked_report_cuts_long_strings_to_fit() -> None:
    report = unchecked_report(
        {"app": "shop", "tool": "t", "arguments": {"note": "x" * 5000, "list": ["y" * 2001, 3]}},
        "unchecked call",
    )
    arguments = report.body["arguments"]
    assert arguments["note"] == "x" * 2000 + "…[3000 more characters]"
    assert arguments["list"] == ["y" * 2000 + "…[1 more characters]", 3]
    assert report.body["app"] == "shop"
