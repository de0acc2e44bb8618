"""Rewriting the ledger as its operator could (the database file, the signing key): each
rewrite is refused or caught by every verifier (THREATS.md §4).

The verifiers: the server's (``python -m claros.ledger verify``, ``GET /api/evidence/
verify``), ``claros verify`` online, and ``claros verify --export``, with and without the
checkpoints an auditor saved earlier."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from nacl.signing import SigningKey

from claros.errors import ConflictError
from claros.evidence import retention
from claros.evidence.activity import DAY_MS
from claros.evidence.retention import prune
from claros.evidence.verify import verify_workspace
from claros.ledger import NEVER_PRUNED, key_id_for
from claros.local import LocalServer
from claros.store.base import DocWrite
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body
from tests.api.seed import Clock, install_clock, utc_ms

NOW = utc_ms(2027, 6, 1)
MISSING = "entries 1..{n} are missing and no prune accounts for them"


_LOGGING_ERROR = re.compile(r"--- Logging error ---\n.*?\nArguments: [^\n]*\n?", re.DOTALL)


def _checks(http: httpx.Client, key: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        body = check_body(agent={"name": "t", "call_id": str(i)}, arguments={"amount": i})
        got = http.post("/v1/check", json=body, headers=bearer(key))
        assert got.status_code == 200, got.text


def _db_path(services: Services) -> str:
    path = getattr(services.store, "path", None)
    assert path is not None, "this test rewrites the SQLite file"
    return str(path)


def _raw(services: Services, *, drop_triggers: bool = False) -> sqlite3.Connection:
    """The database as its holder has it: the sqlite3 shell's powers."""
    conn = sqlite3.connect(_db_path(services), isolation_level=None)
    if drop_triggers:
        names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
        for (name,) in names:
            conn.execute(f"DROP TRIGGER {name}")
    return conn


def _delete_oldest(conn: sqlite3.Connection, through: int) -> None:
    """The two plain DELETEs: every entry and record through ``through``, no prune."""
    kept = tuple(sorted(NEVER_PRUNED))
    conn.execute(
        "DELETE FROM records WHERE workspace = ? AND seq <= ?"
        f" AND kind NOT IN ({','.join('?' * len(kept))})",
        (WORKSPACE, through, *kept),
    )
    conn.execute("DELETE FROM ledger WHERE workspace = ? AND seq <= ?", (WORKSPACE, through))


def _ledger_command(services: Services, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAROS_DATA": str(Path(_db_path(services)).parent)}
    return subprocess.run(
        [sys.executable, "-m", "claros.ledger", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _online(server: LocalServer, key: str, *args: str) -> int:
    return verify(["--url", server.url, "--key", key, *args])


def _export(http: httpx.Client, keys: Keys, path: Path) -> Path:
    got = http.get("/api/evidence/export", headers=bearer(keys.admin))
    assert got.status_code == 200, got.text
    path.write_bytes(got.content)
    return path


# --- 1. a prune is the only way entries disappear -------------------------------------
@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_deleting_the_oldest_entries_without_a_prune_is_refused(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    _checks(http, keys.agent, 12)  # checkpoints at 5 and 10: the old triggers let 1..10 go
    with _raw(services) as conn:
        with pytest.raises(sqlite3.IntegrityError, match="only by a prune"):
            conn.execute(
                "DELETE FROM records WHERE workspace = ? AND seq <= 10 AND kind = 'check'",
                (WORKSPACE,),
            )
        with pytest.raises(sqlite3.IntegrityError, match="only by a prune"):
            conn.execute("DELETE FROM ledger WHERE workspace = ? AND seq <= 10", (WORKSPACE,))
    assert [e.seq for e in services.store.entries(WORKSPACE)][:1] == [1]
    assert verify_workspace(services.store, WORKSPACE).ok


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_deleting_the_oldest_entries_is_caught_by_every_verifier(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 12)
    saved = tmp_path / "saved.json"
    assert _online(server, keys.audit, "--save", str(saved)) == 0
    with _raw(services, drop_triggers=True) as conn:  # as the file's holder can
        _delete_oldest(conn, 10)
    want = MISSING.format(n=10)

    done = _ledger_command(services, "verify", "--workspace", WORKSPACE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"seq 11 (check): {want}" in done.stdout

    body = http.get("/api/evidence/verify", headers=bearer(keys.admin)).json()
    assert body["ok"] is False
    assert any(f["problem"].startswith(want) for f in body["failures"]), body["failures"]

    capsys.readouterr()
    for key in (keys.audit, keys.agent):
        assert _online(server, key) == 1
        assert f"FAIL: seq 11 (check): {want}" in capsys.readouterr().out
    assert _online(server, keys.audit, "--checkpoints", str(saved)) == 1
    assert f"FAIL: seq 11 (check): {want}" in capsys.readouterr().out

    export = _export(http, keys, tmp_path / "export.jsonl")
    for args in (["--export", str(export)],
                 ["--export", str(export), "--checkpoints", str(saved)]):  # fmt: skip
        assert verify(args) == 1
        assert f"FAIL: seq 11 (check): {want}" in capsys.readouterr().out


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return install_clock(monkeypatch, NOW - 300 * DAY_MS)


def test_prune_below_the_floor_is_caught(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, clock: Clock,
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    _checks(http, keys.agent, 6)  # 300 days ago
    clock.at(NOW - 10 * DAY_MS)
    _checks(http, keys.agent, 3, start=10)
    clock.at(NOW)
    # The retention as the database's holder can set it: past the API's 183-day floor.
    services.store.write_docs([DocWrite(WORKSPACE, "settings", "retention", {"days": 90})])
    with pytest.raises(ConflictError, match="is not one PUT /api/evidence/retention accepts"):
        prune(services, WORKSPACE)  # Claros's own prune holds the floor
    # The holder runs a build of their own that does not: the verifiers still see it.
    monkeypatch.setattr(retention, "_setting_problem", lambda days: None)
    done = prune(services, WORKSPACE)
    assert done["pruned"] is True and done["through_seq"] == 6
    want = MISSING.format(n=6)
    floor = "the prune through seq 6 keeps 90 days, below the 183-day floor"

    report = verify_workspace(services.store, WORKSPACE)
    assert not report.ok
    assert [f.problem for f in report.failures] == [f"{want}: {floor}"], report.failures
    capsys.readouterr()
    assert _online(server, keys.audit) == 1
    assert f"{want}: {floor}" in capsys.readouterr().out
    assert verify(["--export", str(_export(http, keys, tmp_path / "e.jsonl"))]) == 1
    assert f"{want}: {floor}" in capsys.readouterr().out


# --- 2. saved checkpoints pin the keys ------------------------------------------------
def _resign_with(content: bytes, key: SigningKey) -> bytes:
    """The export as someone with another key would remake it: that key listed, every
    checkpoint and the whole signed with it. Everything else is as it was."""
    raw = bytes(key.verify_key)
    key_id = key_id_for(raw)
    out: list[bytes] = []
    for line in content.splitlines(keepends=True)[:-1]:
        data = json.loads(line)
        if data.get("type") == "public_key":
            data.update(key_id=key_id, public_key=base64.b64encode(raw).decode())
        elif data.get("type") == "checkpoint":
            message = "\n".join(["claros-ledger-checkpoint", data["workspace"], str(data["seq"]),
                                 data["hash"], str(data["ts"])]).encode()  # fmt: skip
            signature = base64.b64encode(key.sign(message).signature).decode()
            data.update(key_id=key_id, signature=signature)
        else:
            out.append(line)
            continue
        out.append((json.dumps(data, separators=(",", ":")) + "\n").encode())
    digest = hashlib.sha256(b"".join(out)).digest()
    last = {
        "type": "signature",
        "sha256": digest.hex(),
        "algorithm": "Ed25519",
        "key_id": key_id,
        "signature": base64.b64encode(key.sign(digest).signature).decode(),
    }
    return b"".join(out) + (json.dumps(last, separators=(",", ":")) + "\n").encode()


def test_export_resigned_with_an_unknown_key_fails_against_saved_checkpoints(
    http: httpx.Client, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _checks(http, keys.agent, 11)
    export = _export(http, keys, tmp_path / "export.jsonl")
    saved = tmp_path / "saved.json"
    assert verify(["--export", str(export), "--save", str(saved)]) == 0
    other = SigningKey(hashlib.sha256(b"not the workspace's key").digest())
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(_resign_with(export.read_bytes(), other))
    unknown = key_id_for(bytes(other.verify_key))
    capsys.readouterr()
    assert verify(["--export", str(forged)]) == 0  # it vouches for itself ...
    capsys.readouterr()
    assert verify(["--export", str(forged), "--checkpoints", str(saved)]) == 1  # ... only
    out = capsys.readouterr().out
    assert f"export signed by key {unknown}, which is not pinned" in out, out
    assert f"FAIL: seq 5 (checkpoint): signed by key {unknown}, which is not pinned" in out


# --- 3. the server's verify while agents write ----------------------------------------
def test_verify_during_busy_writes_never_reports_a_cut_tail(
    http: httpx.Client, keys: Keys, services: Services, server: LocalServer
) -> None:
    stop = threading.Event()
    errors: list[str] = []

    def writer(t: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            i = 0
            while not stop.is_set():
                body = check_body(agent={"name": f"w{t}", "call_id": f"{t}-{i}"})
                got = client.post("/v1/check", json=body, headers=bearer(keys.agent))
                if got.status_code != 200:
                    errors.append(got.text)
                i += 1

    _checks(http, keys.agent, 5)
    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    failures: list[str] = []
    verifies = 0
    try:
        # At least 10 verifies, and on until the writers are 40 entries on (bounded).
        while verifies < 10 or (_head_seq(services) < 45 and verifies < 300):
            verifies += 1
            report = verify_workspace(services.store, WORKSPACE)
            failures += [str(f) for f in report.failures]
            body = http.get("/api/evidence/verify", headers=bearer(keys.admin)).json()
            failures += [f["problem"] for f in body["failures"]]
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors[:3]
    assert failures == [], failures[:5]
    assert _head_seq(services) > 5  # the writers did write meanwhile


def _head_seq(services: Services) -> int:
    head = services.store.head(WORKSPACE)
    return head.seq if head is not None else 0


def test_a_rotated_key_is_trusted_once_the_pinned_key_introduced_it(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from claros.checkpoints import rotate_key

    _checks(http, keys.agent, 6)
    saved = tmp_path / "saved.json"
    assert _online(server, keys.audit, "--save", str(saved)) == 0  # pins the first key
    old, new = rotate_key(services, WORKSPACE)
    _checks(http, keys.agent, 6, start=10)  # checkpoints now signed with the new key
    assert any(cp.key_id == new.key_id for cp in services.store.checkpoints(WORKSPACE))
    capsys.readouterr()
    assert _online(server, keys.agent, "--checkpoints", str(saved)) == 0
    assert f"keys:        pinned by {saved} ({old.key_id})" in capsys.readouterr().out
    export = _export(http, keys, tmp_path / "e.jsonl")  # signed with the new key
    assert verify(["--export", str(export), "--checkpoints", str(saved)]) == 0
    # What --save keeps next time: both keys, the new one vouched for by the old.
    again = tmp_path / "again.json"
    assert verify(["--export", str(export), "--checkpoints", str(saved), "--save", str(again)]) == 0
    kept = {k["key_id"] for k in json.loads(again.read_text())["public_keys"]}
    assert kept == {old.key_id, new.key_id}


def test_a_key_that_introduces_itself_is_refused(
    server: LocalServer, http: httpx.Client, keys: Keys, services: Services, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from claros.checkpoints import record, sign_checkpoint
    from claros.store.base import NewRecord

    _checks(http, keys.agent, 6)
    saved = tmp_path / "saved.json"
    assert _online(server, keys.audit, "--save", str(saved)) == 0
    # A new key made without the old one's say: its public_key entry signed by itself.
    new = services.signer.rotate(WORKSPACE)
    services.store.add_public_key(new)
    [entry] = record(services, WORKSPACE, [NewRecord("public_key", new.key_id, new.to_json())])
    sign_checkpoint(services.store, services.signer, entry)
    capsys.readouterr()
    assert _online(server, keys.audit) == 0  # unpinned, the log vouches for itself
    capsys.readouterr()
    assert _online(server, keys.audit, "--checkpoints", str(saved)) == 1
    out = capsys.readouterr().out
    assert f"FAIL: seq 7 (checkpoint): signed by key {new.key_id}, which is not pinned" in out


def test_keys_file_pins_keys_and_bad_key_files_exit_2(
    server: LocalServer, http: httpx.Client, keys: Keys, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 5)
    pubkeys = tmp_path / "pubkeys.json"
    pubkeys.write_text(http.get("/v1/ledger/pubkey", headers=bearer(keys.agent)).text)
    assert _online(server, keys.audit, "--keys", str(pubkeys)) == 0
    other = SigningKey(hashlib.sha256(b"someone else").digest())
    raw = bytes(other.verify_key)
    stranger = {"workspace": WORKSPACE, "key_id": key_id_for(raw), "created_at": 1,
                "public_key": base64.b64encode(raw).decode(), "algorithm": "Ed25519"}  # fmt: skip
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"workspace": WORKSPACE, "keys": [stranger]}))
    capsys.readouterr()
    assert _online(server, keys.audit, "--keys", str(wrong)) == 1
    assert f"which is not pinned (pinned: {stranger['key_id']})" in capsys.readouterr().out
    export = _export(http, keys, tmp_path / "e.jsonl")
    assert verify(["--export", str(export), "--keys", str(wrong)]) == 1
    relabelled = tmp_path / "relabelled.json"
    relabelled.write_text(json.dumps([{**stranger, "key_id": "ed25519:0000000000000000"}]))
    cases = [
        (tmp_path / "absent.json", "cannot read"),
        (relabelled, "does not match its public key"),
    ]
    bad = [("{", "notjson.json"), ('{"keys": 3}', "nokeys.json"), ('{"keys": []}', "empty.json"),
           ('[{"key_id": 1}]', "bad.json")]  # fmt: skip
    for text, name in bad:
        (tmp_path / name).write_text(text)
        cases.append((tmp_path / name, str(tmp_path / name)))
    for path, message in cases:
        assert verify(["--export", str(export), "--keys", str(path)]) == 2, path
        # A server thread of an earlier test may log into a closed stream meanwhile
        # ("--- Logging error ---" and its traceback): that is not verify's output.
        err = _LOGGING_ERROR.sub("", capsys.readouterr().err)
        assert message in err and "Traceback" not in err, err


# --- --save covers the unsigned tail, or says it does not -----------------------------
def test_save_with_an_admin_key_asks_for_a_checkpoint_at_the_head(
    server: LocalServer, http: httpx.Client, keys: Keys, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 7)  # checkpoint at 5; 6 and 7 unsigned
    saved = tmp_path / "saved.json"
    capsys.readouterr()
    assert _online(server, keys.audit, "--save", str(saved)) == 0
    out = capsys.readouterr().out
    assert "this key may not ask for a checkpoint (an admin key may)" in out
    assert "not covered: 2 entries after the last checkpoint (seq 5) are in no saved " in out
    assert [c["seq"] for c in json.loads(saved.read_text())["checkpoints"]] == [5]
    assert _online(server, keys.admin, "--save", str(saved)) == 0
    out = capsys.readouterr().out
    assert "asked for a checkpoint at the head: seq 7" in out and "not covered" not in out
    assert [c["seq"] for c in json.loads(saved.read_text())["checkpoints"]] == [5, 7]


def test_save_on_a_ledger_with_no_checkpoint_says_so(
    server: LocalServer, http: httpx.Client, keys: Keys, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    _checks(http, keys.agent, 2)
    saved = tmp_path / "saved.json"
    capsys.readouterr()
    assert _online(server, keys.audit, "--save", str(saved)) == 0
    out = capsys.readouterr().out
    assert "has no signed checkpoint yet, so there is nothing to anchor" in out, out
    assert not saved.exists()


class _WritesMidVerify:
    """The store, with agents' appends landing the moment the verifier has read the last
    entry: exactly when a verify that reads the head afterwards would see a cut tail."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.store = services.store

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    def entries_with_raw_records(self, workspace: str, **kw: int | None) -> object:
        from claros.checkpoints import record
        from claros.store.base import NewRecord

        yield from self.store.entries_with_raw_records(workspace, **kw)  # type: ignore[arg-type]
        for i in range(6):  # past a multiple of 5: a checkpoint is signed meanwhile too
            record(self.services, workspace, [NewRecord("check", f"late-{i}", {"i": i})])


def test_a_write_landing_mid_verify_is_not_a_cut_tail(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    _checks(http, keys.agent, 3)
    busy = _WritesMidVerify(services)
    report = verify_workspace(busy, WORKSPACE)  # type: ignore[arg-type]
    assert report.ok, report.failures
    assert (report.first_seq, report.last_seq) == (1, 3)  # the head as of one read
    assert verify_workspace(services.store, WORKSPACE).last_seq == 9  # the next verify


@pytest.mark.parametrize("store", ["dynamodb"], indirect=True)
def test_deleting_the_oldest_entries_on_dynamodb_is_caught(
    http: httpx.Client, keys: Keys, services: Services
) -> None:
    # The items deleted with the table's own client, as a role allowed to delete could.
    _checks(http, keys.agent, 12)
    store = services.store
    client = store.client  # type: ignore[attr-defined]
    table = store.ledger_table  # type: ignore[attr-defined]
    for entry, _ in store.entries_with_raw_records(WORKSPACE, limit=10):
        key = {"workspace": {"S": WORKSPACE}, "seq": {"N": str(entry.seq)}}
        client.delete_item(TableName=table, Key=key)
    report = verify_workspace(store, WORKSPACE)
    assert [str(f) for f in report.failures] == [
        f"seq 11 (check): {MISSING.format(n=10)}: no prune entry says through_seq 10"
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"note": "no key at all"},
        ["not", "an", "object"],
        "signer-made",  # replaced below by a key the signer never listed
    ],
)
def test_no_checkpoint_vouches_for_a_key_the_workspace_does_not_list(
    http: httpx.Client, keys: Keys, services: Services, body: object
) -> None:
    """Every store, every signer: a ``public_key`` entry whose key is not one the workspace
    lists (rotate-key lists it first) is never signed over, nor is any entry after it
    (tests/security/aws/test_request_role_introduces_a_key_of_its_own.py is the attack)."""
    from claros.checkpoints import ChainBrokenError, record, sign_checkpoint
    from claros.store.base import NewRecord

    _checks(http, keys.agent, 2)
    if body == "signer-made":
        raw = bytes(SigningKey.generate().verify_key)
        body = {"workspace": WORKSPACE, "key_id": key_id_for(raw), "created_at": 1,
                "public_key": base64.b64encode(raw).decode()}  # fmt: skip
    [entry] = record(services, WORKSPACE, [NewRecord("public_key", "intro", body)])
    with pytest.raises(ChainBrokenError, match=f"seq {entry.seq} introduces key"):
        sign_checkpoint(services.store, services.signer, entry)
    _checks(http, keys.agent, 1)
    head = services.store.head(WORKSPACE)
    assert head is not None
    with pytest.raises(ChainBrokenError, match="which is not one of workspace"):
        sign_checkpoint(services.store, services.signer, head)
