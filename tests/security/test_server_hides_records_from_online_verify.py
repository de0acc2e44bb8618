"""The operator's server leaves records out of the pages ``claros verify`` reads.

``claros verify --url`` with an audit or admin key compares every record with its entry
(docs/ledger.md, "Verification"). It learned whether the key reads records from the pages
themselves: an entry line without ``event`` was fed as the chain alone, never compared,
and a page where no entry carried one was taken for an agent key's. So the operator (who
runs the server, THREATS.md §4) edits a record in the database and has the server leave
``event`` out of that one line (or out of every line): the auditor's verify, with an audit
key, printed ``OK`` and exit 0 over an edited record.

Now an entry without its record, on pages that carry records, is a failure naming it, and
the verifier asks ``GET /v1/me`` what its key is: an admin or audit key must be given every
record (a server that answers no records for it fails)."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from claros.local import LocalServer
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import WORKSPACE, Keys
from tests.security.test_ledger_rewrites import _checks

Rewrite = Callable[[bytes], bytes]
_EVENT = re.compile(rb',"event":.*\}$')


class _Proxy:
    """The operator's server, as an auditor reaches it: every request goes to the real
    Claros, and the pages of ``GET /v1/ledger/entries`` come back through ``rewrite``."""

    def __init__(self, upstream: str, rewrite: Rewrite) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {"authorization": self.headers.get("authorization", "")}
                if body is not None:
                    headers["content-type"] = self.headers.get("content-type", "")
                got = httpx.request(
                    self.command, upstream + self.path, content=body, headers=headers, timeout=30
                )
                content = got.content
                if self.path.startswith("/v1/ledger/entries"):
                    content = proxy.rewrite(content)
                self.send_response(got.status_code)
                for name in ("content-type", "x-claros-next"):
                    if name in got.headers:
                        self.send_header(name, got.headers[name])
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.rewrite = rewrite
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _Proxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def proxy(server: LocalServer) -> Iterator[Callable[[Rewrite], _Proxy]]:
    made: list[_Proxy] = []

    def make(rewrite: Rewrite) -> _Proxy:
        made.append(_Proxy(server.url, rewrite).__enter__())
        return made[-1]

    yield make
    for p in made:
        p.__exit__()


def _edit_check(services: Services, seq: int) -> None:
    """The database's holder edits one check's record (the triggers dropped first)."""
    path = getattr(services.store, "path", None)
    assert path is not None
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            conn.execute(f"DROP TRIGGER {name}")
        body = conn.execute(
            "SELECT CAST(body AS TEXT) FROM records WHERE workspace = ? AND seq = ?",
            (WORKSPACE, seq),
        ).fetchone()[0]
        assert '"refund_create"' in body
        conn.execute(
            "UPDATE records SET body = ? WHERE workspace = ? AND seq = ?",
            (body.replace('"refund_create"', '"refund_void"'), WORKSPACE, seq),
        )
    finally:
        conn.close()


def _strip(seqs: set[int] | None) -> Rewrite:
    """Leave ``event`` out of the entry lines at ``seqs`` (None: every entry line)."""

    def rewrite(page: bytes) -> bytes:
        out = []
        for line in page.split(b"\n"):
            m = re.match(rb'\{"workspace":"[^"]*","seq":([0-9]+),', line)
            if m and (seqs is None or int(m.group(1)) in seqs):
                line = _EVENT.sub(b"}", line)
            out.append(line)
        return b"\n".join(out)

    return rewrite


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize("key", ["audit", "admin"])
def test_a_record_left_out_of_its_line_is_not_a_record_compared(
    server: LocalServer, keys: Keys, services: Services, http: httpx.Client,
    proxy: Callable[[Rewrite], _Proxy], capsys: pytest.CaptureFixture[str], key: str,
) -> None:  # fmt: skip
    _checks(http, keys.agent, 6)
    _edit_check(services, 3)
    capsys.readouterr()
    # The server as it is: the edit shows.
    assert verify(["--url", server.url, "--key", keys.of(key)]) == 1
    assert "FAIL: seq 3 (check): record " in capsys.readouterr().out
    # The operator's server leaves that one record out of its line.
    hiding = proxy(_strip({3}))
    assert verify(["--url", hiding.url, "--key", keys.of(key)]) == 1
    out = capsys.readouterr().out
    assert "FAIL: seq 3 (check): record " in out and "was not given" in out, out


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_server_that_gives_an_audit_key_no_records_fails(
    server: LocalServer, keys: Keys, services: Services, http: httpx.Client,
    proxy: Callable[[Rewrite], _Proxy], capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 6)
    _edit_check(services, 3)
    hiding = proxy(_strip(None))  # every record left out, as for an agent key
    capsys.readouterr()
    assert verify(["--url", hiding.url, "--key", keys.audit]) == 1
    out = capsys.readouterr().out
    assert "FAIL: seq 1 (check): record " in out and "was not given" in out, out
    # An agent key is given no records, and says so: the chain and signatures only.
    assert verify(["--url", hiding.url, "--key", keys.agent]) == 0
    assert "records:     not compared: this key does not read records" in capsys.readouterr().out


def test_the_proxy_passes_what_it_does_not_rewrite() -> None:
    """The rewrite only drops ``event`` from the entry lines it names."""
    page = (
        b'{"workspace":"acme","seq":1,"kind":"check","event":{"a":1}}\n'
        b'{"workspace":"acme","seq":2,"kind":"check","event":{"a":2}}\n'
    )
    assert _strip({2})(page) == (
        b'{"workspace":"acme","seq":1,"kind":"check","event":{"a":1}}\n'
        b'{"workspace":"acme","seq":2,"kind":"check"}\n'
    )
