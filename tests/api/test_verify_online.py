"""``claros verify`` against a real local server: downloads, re-checks, saved checkpoints,
and the history rewrites it must catch (made with the sqlite3 shell's powers: triggers
dropped, rows changed under the server's feet)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx
import pytest

from claros.local import LocalServer
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body


def _checks(http: httpx.Client, key: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        body = check_body(agent={"name": "t", "call_id": str(i)}, arguments={"amount": i})
        assert http.post("/v1/check", json=body, headers=bearer(key)).status_code == 200


def _run(server: LocalServer, key: str, *args: str) -> int:
    return verify(["--url", server.url, "--key", key, *args])


def test_audit_key_compares_every_record(
    server: LocalServer, http: httpx.Client, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    _checks(http, keys.agent, 12)  # checkpoints at 5 and 10; 2 entries after the last
    assert _run(server, keys.audit) == 0
    out = capsys.readouterr().out
    assert "entries:     12 (seq 1..12)" in out
    assert "records:     12 compared (this key reads records)" in out
    assert "2 verified, the last at seq 10; 2 entries after the last checkpoint" in out
    assert out.rstrip().endswith(f"OK: the ledger at {server.url}")


def test_agent_key_checks_chain_and_signatures_only(
    server: LocalServer, http: httpx.Client, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    _checks(http, keys.agent, 6)
    assert _run(server, keys.agent) == 0
    out = capsys.readouterr().out
    assert "not compared: this key does not read records, so the chain and signatures only" in out


def test_save_then_prove_nothing_was_rewritten(
    server: LocalServer, http: httpx.Client, keys: Keys, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 11)
    saved = tmp_path / "claros-checkpoints.json"
    assert _run(server, keys.audit, "--save", str(saved)) == 0
    data = json.loads(saved.read_text())
    assert data["format"] == "claros-checkpoints/1" and data["workspace"] == WORKSPACE
    assert [c["seq"] for c in data["checkpoints"]] == [5, 10] and len(data["public_keys"]) == 1
    _checks(http, keys.agent, 9, start=20)  # the log goes on: checkpoints at 15 and 20
    capsys.readouterr()
    assert _run(server, keys.agent, "--checkpoints", str(saved)) == 0
    assert "2 of 2 saved checkpoints" in capsys.readouterr().out


def _db(services: Services) -> sqlite3.Connection:
    path = getattr(services.store, "path", None)
    assert path is not None, "these tests rewrite the SQLite file"
    conn = sqlite3.connect(path, isolation_level=None)
    triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for (trigger,) in triggers:
        conn.execute(f"DROP TRIGGER {trigger}")
    return conn


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_an_edited_record_is_caught_with_an_audit_key_only(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 4)
    with _db(services) as conn:
        [(ref, body)] = conn.execute(
            "SELECT ref_id, body FROM records WHERE seq = 3").fetchall()  # fmt: skip
        record = json.loads(body)
        record["arguments"]["amount"] = 99_999
        conn.execute("UPDATE records SET body = ? WHERE seq = 3", (json.dumps(record),))
    assert _run(server, keys.audit) == 1
    out = capsys.readouterr().out
    assert f"FAIL: seq 3 (check): record {ref} edited: payload_sha256 " in out
    assert _run(server, keys.agent) == 0  # the chain itself is intact: an agent key can't see


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_deleted_tail_and_a_rewritten_history_are_caught(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 10)
    saved = tmp_path / "saved.json"
    assert _run(server, keys.audit, "--save", str(saved)) == 0
    with _db(services) as conn:
        conn.execute("DELETE FROM ledger WHERE seq > 8")
    capsys.readouterr()
    assert _run(server, keys.audit) == 1
    out = capsys.readouterr().out
    assert "FAIL: seq 10 (checkpoint): tail cut off: signed checkpoint at seq 10 but the log " \
           "ends at seq 8" in out  # fmt: skip
    with _db(services) as conn:  # and the checkpoint that would tell: gone too
        conn.execute("DELETE FROM checkpoints WHERE seq = 10")
    assert _run(server, keys.audit) == 0  # consistent again, as far as the server shows
    assert _run(server, keys.audit, "--checkpoints", str(saved)) == 1
    out = capsys.readouterr().out
    assert "FAIL: seq 10 (checkpoint): log rewritten since saved checkpoints: the server no " \
           "longer has the checkpoint at seq 10" in out  # fmt: skip
    assert "FAIL: seq 10 (checkpoint): tail cut off: saved checkpoint at seq 10 but the log " \
           "ends at seq 8" in out  # fmt: skip


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_save_refuses_a_log_that_fails(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 3)
    with _db(services) as conn:
        conn.execute("UPDATE ledger SET ts = ts + 1 WHERE seq = 2")
    saved = tmp_path / "saved.json"
    assert _run(server, keys.audit, "--save", str(saved)) == 1
    assert "FAIL: seq 2 (check): entry edited: hash" in capsys.readouterr().out
    assert not saved.exists()


def test_usage_and_io_errors_exit_2(
    server: LocalServer, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.delenv("CLAROS_URL", raising=False)
    monkeypatch.delenv("CLAROS_KEY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no saved sign-in
    cases = [
        ([], "no Claros URL: pass --url or set CLAROS_URL"),
        (["--url", server.url], "no Claros key: pass --key"),
        (["--url", server.url, "--key", "ck_" + "A" * 43], "Claros refused: 401"),
        (["--url", "http://127.0.0.1:9", "--key", keys.audit], "cannot reach Claros"),
        (["--url", server.url, "--key", keys.audit, "--checkpoints", str(tmp_path / "no")],
         "cannot read"),
    ]  # fmt: skip
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"checkpoints": [{"workspace": "other", "seq": 1, "hash": "0" * 64,
                                 "ts": 1, "key_id": "k", "signature": "s"}]}))  # fmt: skip
    cases.append((["--url", server.url, "--key", keys.audit, "--checkpoints", str(other)],
                  "holds checkpoints of workspace other"))  # fmt: skip
    for args, message in cases:
        assert verify(args) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (args, err)
    monkeypatch.setenv("CLAROS_URL", server.url)
    monkeypatch.setenv("CLAROS_KEY", keys.audit)
    assert verify([]) == 0  # from the environment
