"""Attack: a request whose length two readers would read differently. The local server
took the first of two Content-Length headers, read any Content-Length Python's ``int``
reads (``+12``, ``1_0``), and ignored a Transfer-Encoding that was not exactly ``chunked``
(``gzip, chunked``). A proxy or load balancer in front reads the other length (the last
Content-Length, or the chunked body), so the bytes the server takes as the body's rest,
or as a next request on the keep-alive connection, are not the ones the front saw: a
request smuggled past whatever the front checks, answered to someone else's connection.

Also: a request line the stdlib refuses before it knows the version (``HTTP/1.1x``,
``HTTP/2.0``) was answered as HTTP/0.9, a JSON body with no status line, which a client
cannot read as an answer; and an HTTP/0.9 request (``GET /``) waited for headers that
never come until the connection timed out, then closed with nothing.

What must hold (THREATS.md §5): every such request is a 4xx (or 505) with a reason, the
connection is closed after it, and nothing else on the connection is served (RFC 9112
§6.3: a request with Transfer-Encoding and Content-Length, or with conflicting or invalid
Content-Length values, is unrecoverable framing)."""

from __future__ import annotations

import socket

import pytest

from claros.local import LocalServer
from tests.api.conftest import Keys

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)
SMUGGLED = b"GET /v1/ledger/pubkey HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def _exchange(server: LocalServer, raw: bytes) -> bytes:
    """Send raw bytes, read until the server closes the connection (bounded: 10 s)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def _answers(data: bytes) -> list[bytes]:
    """The status lines in what came back."""
    return [line for line in data.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


def _get_with(key: str, framing: bytes, body: bytes) -> bytes:
    """A keep-alive GET with the given framing headers and body (a second request)."""
    return (
        b"GET /v1/ledger/pubkey HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + key.encode()
        + b"\r\n"
        + framing
        + b"\r\n"
        + body
    )


@SQLITE
def test_two_content_lengths_are_refused_and_nothing_behind_them_is_served(
    server: LocalServer, keys: Keys
) -> None:
    # The server read the first (0) and served the "body" as a second request; a front
    # reading the last saw one request with a body.
    framing = b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(SMUGGLED)
    data = _exchange(server, _get_with(keys.agent, framing, SMUGGLED))
    assert _answers(data) == [b"HTTP/1.1 400 Bad Request"], data
    assert b"more than one Content-Length" in data


@SQLITE
@pytest.mark.parametrize("length", [b"+0", b"0_0", b"-0", b"0x0", b"0 0"])
def test_a_content_length_that_is_not_digits_is_refused(
    server: LocalServer, keys: Keys, length: bytes
) -> None:
    # int() reads "+0", "0_0" and "-0" as 0: the body that follows (here a second
    # request) was served.
    data = _exchange(
        server, _get_with(keys.agent, b"Content-Length: " + length + b"\r\n", SMUGGLED)
    )
    assert _answers(data) == [b"HTTP/1.1 400 Bad Request"], data
    assert b"Content-Length is not a number" in data


@SQLITE
@pytest.mark.parametrize(
    "coding", [b"gzip, chunked", b"chunked, identity", b"identity", b" chunked", b"xchunked"]
)
def test_any_transfer_encoding_is_refused(server: LocalServer, keys: Keys, coding: bytes) -> None:
    # A front that decodes it reads a chunked body ("0\r\n\r\n", then the next request);
    # the server read Content-Length's worth, or nothing.
    body = b"0\r\n\r\n" + SMUGGLED
    framing = b"Transfer-Encoding: " + coding + b"\r\nContent-Length: 5\r\n"
    data = _exchange(server, _get_with(keys.agent, framing, body))
    assert _answers(data) == [b"HTTP/1.1 411 Length Required"], data
    assert b"Transfer-Encoding" in data


@SQLITE
@pytest.mark.parametrize(
    ("line", "status"),
    [
        (b"GET /v1/ledger/pubkey HTTP/1.1x\r\n\r\n", b"HTTP/1.1 400 Bad Request"),
        (b"GET /v1/ledger/pubkey HTTP/2.0\r\n\r\n", b"HTTP/1.1 505 HTTP Version Not Supported"),
        (b"GET /v1/ledger/pubkey\r\n", b"HTTP/1.1 505 HTTP Version Not Supported"),
        (b"GET /v1/ledger/pubkey HTTP/1.1 extra\r\n\r\n", b"HTTP/1.1 400 Bad Request"),
    ],
)
def test_a_request_line_refused_early_gets_a_status_line(
    server: LocalServer, line: bytes, status: bytes
) -> None:
    data = _exchange(server, line)
    assert data.startswith(status + b"\r\n"), data
    assert b'"message":' in data
