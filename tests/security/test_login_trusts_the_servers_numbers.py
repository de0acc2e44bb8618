"""Attack: ``claros login URL`` where the URL answers, but not like Claros (a wrong URL, a
hostile or broken server). The device flow took the answer's ``interval`` and
``expires_in`` as they came: a text (``"soon"``) or a number Python's ``time.sleep``
refuses (``-1``, ``NaN``) ended the command in a traceback; ``1e308`` made it sleep for
ever between two polls. And each request waited as long as its answer kept trickling in.

What must hold (THREATS.md section 5): bad input gets a clear message and an exit code,
never a traceback or a hang. ``interval`` is taken between 1 and 60 s and ``expires_in``
up to an hour; anything not a number is "did not answer like Claros" (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claros_guard import login
from claros_guard.cli import main
from tests.guard.http_fakes import JSON, Answer, HttpFake, Request


class DeviceFlow(HttpFake):
    """A server that starts a sign-in with the given ``interval`` and ``expires_in`` and
    answers every poll ``authorization_pending``."""

    def __init__(self, interval: Any, expires_in: Any) -> None:
        self.interval, self.expires_in = interval, expires_in
        super().__init__()

    def respond(self, request: Request) -> Answer:
        if request.path == "/v1/device/code":
            body = {"device_code": "d", "user_code": "ABCD-EFGH", "verification_uri": "/x",
                    "interval": self.interval, "expires_in": self.expires_in}  # fmt: skip
            return 201, JSON, json.dumps(body).encode()
        return 400, JSON, b'{"error": "authorization_pending"}'


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.delenv("CLAROS_KEY", raising=False)
    monkeypatch.delenv("CLAROS_URL", raising=False)
    return home


@pytest.fixture
def flow(request: pytest.FixtureRequest) -> Iterator[DeviceFlow]:
    interval, expires_in = request.param
    server = DeviceFlow(interval, expires_in)
    try:
        yield server
    finally:
        server.stop()


class Stop(Exception):
    """What the test's sleep raises to end the flow (a person's Ctrl-C, in life)."""


def _polls(limit: int) -> Any:
    """A sleep that records how long it was asked to wait, and stops the flow after
    ``limit`` polls."""
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) >= limit:
            raise Stop

    sleep.sleeps = sleeps  # type: ignore[attr-defined]
    return sleep


@pytest.mark.parametrize(
    "flow",
    [("soon", 600), (5, "later"), ([5], 600), (True, 600), (5, {"s": 1})],
    indirect=True,
    ids=["interval-text", "expires-text", "interval-list", "interval-bool", "expires-object"],
)
def test_a_number_that_is_not_one_is_a_clear_error(flow: DeviceFlow) -> None:
    with pytest.raises(login.LoginError, match="did not answer like Claros") as refused:
        login.login(flow.url, sleep=_polls(3))
    assert refused.value.code == 2


@pytest.mark.parametrize("flow", [("soon", 600)], indirect=True)
def test_the_command_says_so_and_exits_2(
    flow: DeviceFlow, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["login", "--url", flow.url]) == 2
    err = capsys.readouterr().err
    assert "did not answer like Claros: interval is not a number of seconds ('soon')" in err


@pytest.mark.parametrize(
    ("flow", "slept"),
    [((-1, 600), 1.0), (("NaN", 600), None), ((1e308, 600), 60.0)],
    indirect=["flow"],
    ids=["negative", "nan", "huge"],
)
def test_the_wait_between_polls_is_bounded(flow: DeviceFlow, slept: float | None) -> None:
    sleep = _polls(3)  # three polls are enough to see the wait
    if slept is None:  # NaN, which JSON does not have: refused like a text
        with pytest.raises(login.LoginError, match="did not answer like Claros"):
            login.login(flow.url, sleep=sleep)
        return
    with pytest.raises(Stop):
        login.login(flow.url, sleep=sleep)
    assert sleep.sleeps == [slept] * 3


@pytest.mark.parametrize("flow", [(5, 10**9)], indirect=True)
def test_the_whole_wait_is_at_most_an_hour(flow: DeviceFlow) -> None:
    clock = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock[0] += seconds
        if clock[0] > 2 * 3600:
            raise Stop  # waited past the bound: the attack worked

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(login.time, "monotonic", lambda: clock[0])
        with pytest.raises(login.LoginError, match="expired"):
            login.login(flow.url, sleep=sleep)
    assert sum(sleeps) <= 3600 + 5
