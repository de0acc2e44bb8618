"""The operator sets the server's clock ahead, prunes, and sets it back.

A prune drops the entries older than the retention (at least 183 days) by the server's
clock, and every verifier checks the ``prune`` entry it leaves: its ``retention_days`` at
least the floor, its checkpoint, a checkpoint covering it (docs/ledger.md). None looked at
the clock. The operator (THREATS.md §4) sets the system clock a year ahead, asks Claros
for a prune (POST /api/evidence/prune: Claros's own code, its own key), and sets the clock
back: checks a day old are gone, the prune entry says 183 days, and every verifier said OK.

The clock that was ahead shows in what follows: the prune entry is stamped after the
checkpoints signed after it (a checkpoint signs entries written before it, so it is never
older than them), or after the export was made. Now every verifier fails such a prune."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from claros.evidence.activity import DAY_MS
from claros.evidence.verify import verify_workspace
from claros.local import LocalServer
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import WORKSPACE, Keys, bearer
from tests.api.seed import Clock, install_clock, utc_ms
from tests.security.test_ledger_rewrites import _checks, _export

T0 = utc_ms(2027, 3, 1)
AHEAD = "stamped before the prune entry at seq"
MADE_BEFORE = "stamped after the export was made"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return install_clock(monkeypatch, T0)


def _prune_a_year_ahead(http: httpx.Client, keys: Keys, clock: Clock) -> int:
    got = http.put("/api/evidence/retention", json={"days": 183}, headers=bearer(keys.admin))
    assert got.status_code == 200, got.text
    clock.at(T0 + 365 * DAY_MS)  # the operator's clock, a year ahead
    got = http.post("/api/evidence/prune", headers=bearer(keys.admin))
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["pruned"] is True, body
    clock.at(T0 + DAY_MS)  # and back: the checks it dropped were a day old
    return int(body["through_seq"])


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_prune_by_a_clock_set_ahead_fails_every_verifier(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, clock: Clock,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 8)
    through = _prune_a_year_ahead(http, keys, clock)
    assert through >= 7
    _checks(http, keys.agent, 6, start=100)  # the days go on, a checkpoint is signed

    report = verify_workspace(services.store, WORKSPACE)
    assert not report.ok
    assert any(AHEAD in f.problem for f in report.failures), report.failures
    body = http.get("/api/evidence/verify?full=true", headers=bearer(keys.admin)).json()
    assert body["ok"] is False and any(AHEAD in f["problem"] for f in body["failures"]), body
    capsys.readouterr()
    assert verify(["--url", server.url, "--key", keys.audit]) == 1
    assert AHEAD in capsys.readouterr().out
    export = _export(http, keys, tmp_path / "e.jsonl")
    for workers in ("1", "2"):
        assert verify(["--export", str(export), "--workers", workers]) == 1
        out = capsys.readouterr().out
        assert "FAIL: seq " in out and AHEAD in out, out


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_an_export_made_before_its_prune_entry_was_stamped_fails(
    http: httpx.Client, keys: Keys, clock: Clock, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 8)
    _prune_a_year_ahead(http, keys, clock)  # nothing written since: no later checkpoint
    export = _export(http, keys, tmp_path / "e.jsonl")
    capsys.readouterr()
    assert verify(["--export", str(export)]) == 1
    out = capsys.readouterr().out
    assert MADE_BEFORE in out, out


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_an_honest_prune_still_verifies(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, clock: Clock,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 8)
    clock.at(T0 + 200 * DAY_MS)
    _checks(http, keys.agent, 3, start=50)
    got = http.put("/api/evidence/retention", json={"days": 183}, headers=bearer(keys.admin))
    assert got.status_code == 200, got.text
    got = http.post("/api/evidence/prune", headers=bearer(keys.admin))
    assert got.json()["pruned"] is True, got.text
    clock.later(60)
    _checks(http, keys.agent, 6, start=100)
    assert verify_workspace(services.store, WORKSPACE).ok
    assert verify(["--url", server.url, "--key", keys.audit]) == 0
    export = _export(http, keys, tmp_path / "e.jsonl")
    assert verify(["--export", str(export)]) == 0, capsys.readouterr().out
