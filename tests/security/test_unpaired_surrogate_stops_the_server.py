"""The agent sends a string holding half of a UTF-16 surrogate pair (``"\\ud800"``).

JSON's grammar lets ``\\uD800`` stand alone, and Python's JSON reader (the guard's) reads
it as a lone surrogate; but no UTF-8 text can hold one, so the guard could not write the
message on to the wrapped server: the writer failed, the guard stopped the wrapped server,
and every later call of the session, reads and writes, answered "the wrapped server ...
was stopped". One line from the agent took its tools away (THREATS.md §5: bad input gets
a clear refusal with a reason, never a crash). Claros itself was asked to check a write
whose arguments the server could never be sent. The guard now refuses such a line, under
the request's id, as text that is not Unicode; the session goes on.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.guard import conftest as guard_fixtures
from tests.guard.conftest import Workspace
from tests.security.raw_guard import CheckLog, RawGuard
from tests.security.test_guard_shape import INVALID_PARAMS, refusal

claros = guard_fixtures.claros  # the guard tests' fixtures: one Claros, a workspace
workspace = guard_fixtures.workspace


@pytest.fixture
def check_log(workspace: Workspace) -> Iterator[CheckLog]:
    with CheckLog(workspace.claros.url) as log:
        yield log


@pytest.fixture
def guard(workspace: Workspace, check_log: CheckLog, tmp_path: Path) -> Iterator[RawGuard]:
    with RawGuard(workspace, check_log.url, tmp_path) as raw:
        raw.initialize()
        yield raw


LINES = [
    # a read's argument, a write's argument, a key, the tool's name, a low half alone,
    # and two high halves in a row
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"order_read","arguments":{"note":"lone \\ud800"}}}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call",'
    b'"params":{"name":"refund_create","arguments":{"note":"\\uDBFF!"}}}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call",'
    b'"params":{"name":"order_read","arguments":{"\\ud83d":"key"}}}',
    b'{"jsonrpc":"2.0","id":4,"method":"tools/call",'
    b'"params":{"name":"order_read\\udc00","arguments":{}}}',
    b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
    b'"params":{"name":"order_read","arguments":{"note":["\\ud83d\\ud83d"]}}}',
]


def test_a_lone_surrogate_is_refused_and_the_session_goes_on(
    guard: RawGuard, check_log: CheckLog
) -> None:
    for n, line in enumerate(LINES, start=1):
        guard.send_raw(line)
        refusal(guard.answer(n), INVALID_PARAMS, "surrogate")
    # A pair that makes one character is fine, and reaches the server as that character.
    guard.send_raw(
        b'{"jsonrpc":"2.0","id":6,"method":"tools/call",'
        b'"params":{"name":"order_read","arguments":{"note":"pair \\ud83d\\ude00"}}}'
    )
    assert "result" in guard.answer(6), guard.answer(6)
    assert check_log.checked() == []
    guard.still_serves(check_log, "after")
