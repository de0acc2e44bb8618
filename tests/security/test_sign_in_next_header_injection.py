"""Attack: the sign-in page's `next` (where to go after signing in) carries a CR LF, and
the 303 the server answers writes it into its `Location` header as it came. The rest of
the value becomes headers of the attacker's choosing on a Claros answer (a `Set-Cookie`
fixing a session, a second `Location`), or ends the headers early and starts a body.

What must hold (THREATS.md §5): bad input gets a 4xx with a reason or is set aside
(`safe_next` sends anything that is not a plain /app path to /app); never a header of the
client's making. Two ways in: the sign-in form's `next` field (the sign-in page copies
`?next=` from a link into it), and `GET /app/signin?next=` for a browser already signed
in, which redirects at once."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import quote

import pytest

from claros.api import web
from claros.local import LocalServer, _header_breaking_out
from tests.api.conftest import Keys

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)
EVIL = "/app\r\nSet-Cookie: claros_session=fixed-by-attacker; Path=/app"


def _headers(server: LocalServer, raw: bytes) -> list[str]:
    """The answer's header lines (the status line first)."""
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")


def _sign_in(server: LocalServer, key: str, next_path: str) -> list[str]:
    body = f"key={quote(key)}&next={quote(next_path)}"
    return _headers(
        server,
        (
            f"POST /app/signin HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
        ).encode(),
    )


def _injected(lines: list[str]) -> list[str]:
    return [
        line for line in lines if "fixed-by-attacker" in line and not line.startswith("Location:")
    ]


@SQLITE
def test_the_sign_in_forms_next_cannot_add_headers(server: LocalServer, keys: Keys) -> None:
    # The form's answer is a page now (it keeps the session's hand; claros.web.sessions):
    # ``next`` goes into the page, escaped, never into a header.
    lines = _sign_in(server, keys.person, EVIL)
    assert lines[0].split()[1] in ("200", "400"), lines
    assert not _injected(lines), f"the client's text became headers of the answer: {lines}"
    locations = [line for line in lines if line.lower().startswith("location:")]
    assert locations in ([], ["Location: /app"]), locations


def _signed_in_follows_a_link(server: LocalServer, key: str, next_path: str) -> list[str]:
    """A browser signed in with ``key`` opens ``/app/signin?next=<next_path>``."""
    signed = _sign_in(server, key, "/app")
    (cookie,) = [line for line in signed if line.startswith("Set-Cookie: claros_session=")]
    session = cookie.split(";")[0].removeprefix("Set-Cookie: ")
    return _headers(
        server,
        (
            f"GET /app/signin?next={quote(next_path)} HTTP/1.1\r\n"
            f"Host: {server.host}:{server.port}\r\nCookie: {session}\r\n"
            "Accept: text/html\r\nConnection: close\r\n\r\n"
        ).encode(),
    )


@SQLITE
def test_a_signed_in_browser_following_a_sign_in_link_gets_no_header_of_the_links_making(
    server: LocalServer, keys: Keys
) -> None:
    lines = _signed_in_follows_a_link(server, keys.person, EVIL)
    assert lines[0].split()[1] in ("303", "400"), lines
    assert not _injected(lines), f"the link's text became headers of the answer: {lines}"


@SQLITE
def test_the_server_never_sends_a_header_with_a_line_break_whatever_a_route_made(
    server: LocalServer, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line: were a route to let a client's text into a header again (here
    ``safe_next`` undone), the local server answers 500 instead of sending it."""
    monkeypatch.setattr(web, "safe_next", lambda value: value or "/app")
    # The signed-in browser's redirect writes ``next`` into Location (the form's answer is
    # a page, with no header to break).
    lines = _signed_in_follows_a_link(server, keys.person, EVIL)
    assert lines[0].split()[1] == "500", lines
    assert not _injected(lines), lines
    assert not [line for line in lines if line.lower().startswith("location:")], lines


@pytest.mark.parametrize(
    ("result", "broken"),
    [
        ({"headers": {"Location": "/app"}, "cookies": ["a=b; Path=/"]}, None),
        ({"headers": {"Location": "/app\r\nX: y"}}, "Location"),
        ({"headers": {"X\nY": "z"}}, "X\nY"),
        ({"multiValueHeaders": {"Vary": ["Accept", "Cookie\r\n"]}}, "Vary"),
        ({"cookies": ["a=b\x00"]}, "Set-Cookie"),
    ],
)
def test_which_headers_break_out_of_their_line(result: dict[str, Any], broken: str | None) -> None:
    assert _header_breaking_out(result) == broken
