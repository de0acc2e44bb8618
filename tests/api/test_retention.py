"""Retention and pruning on both stores: the floor, no setting keeps everything, a prune
signs a checkpoint at the last entry it drops, keeps rule versions, and the chain, the
server's verify, the export and ``claros verify`` all still hold from that checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from claros.auth import authenticate, create_key
from claros.evidence.activity import DAY_MS
from claros.evidence.retention import prune
from claros.evidence.verify import verify_workspace
from claros.rules.model import RuleSpec
from claros.rules.service import put_rule
from claros.wiring import Services
from claros_guard.verify import main as verify
from tests.api.conftest import ADMIN, WORKSPACE, Keys, bearer, check_body
from tests.api.seed import Clock, install_clock, utc_ms

NOW = utc_ms(2027, 6, 1)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return install_clock(monkeypatch, NOW - 400 * DAY_MS)


def _check(http: httpx.Client, key: str, i: int) -> None:
    body = check_body(agent={"name": "t", "call_id": f"c{i}"}, arguments={"amount": i})
    assert http.post("/v1/check", json=body, headers=bearer(key)).status_code == 200


def _history(
    http: httpx.Client, keys: Keys, services: Services, clock: Clock, now: int = NOW
) -> None:
    """seq 1: a rule version, 400 days before ``now``; seq 2-7: checks 300 days before;
    seq 8-10: checks 10 days before. Checkpoints every 5 entries (5, 10)."""
    clock.at(now - 400 * DAY_MS)
    admin = authenticate(services.store, f"Bearer {keys.admin}")
    put_rule(services, admin, RuleSpec(id="r", workflow_id="w", app="shop",
                                       tools=["refund_create"], title="t", when="amount > 999",
                                       response="ask"))  # fmt: skip
    clock.at(now - 300 * DAY_MS)
    for i in range(6):
        _check(http, keys.agent, i)
    clock.at(now - 10 * DAY_MS)
    for i in range(6, 9):
        _check(http, keys.agent, i)
    clock.at(now)


def test_retention_setting(http: httpx.Client, keys: Keys) -> None:
    admin = bearer(keys.admin)
    got = http.get("/api/evidence/retention", headers=admin)
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["days"] is None and body["message"] == "no retention is set: every record is kept"
    assert body["floor_days"] == 183 and body["oldest_record"] is None
    low = http.put("/api/evidence/retention", json={"days": 182}, headers=admin)
    assert low.status_code == 400
    assert low.json()["message"] == (
        "retention must be at least 183 days (six months, as EU AI Act Art 26(6) asks of "
        "deployers); got 182"
    )
    for bad in ({"days": "365"}, {"days": 365.5}, {"days": True}, {}, {"days": 365, "x": 1},
                {"days": 40_000}):  # fmt: skip
        assert http.put("/api/evidence/retention", json=bad, headers=admin).status_code == 400
    ok = http.put("/api/evidence/retention", json={"days": 183}, headers=admin)
    assert ok.status_code == 200 and ok.json()["days"] == 183
    assert ok.json()["set_by"] == "admin@acme.test"
    assert http.get("/api/evidence/retention", headers=admin).json()["days"] == 183
    cleared = http.put("/api/evidence/retention", json={"days": None}, headers=admin)
    assert cleared.json()["days"] is None and "every record is kept" in cleared.json()["message"]


def test_no_retention_prunes_nothing(http: httpx.Client, keys: Keys, services: Services) -> None:
    _check(http, keys.agent, 1)
    got = http.post("/api/evidence/prune", headers=bearer(keys.admin))
    assert got.status_code == 409
    assert got.json()["message"] == "no retention is set: every record is kept, nothing is pruned"
    assert [e.seq for e in services.store.entries(WORKSPACE)] == [1]


def test_prune_drops_what_is_older_than_the_retention(
    http: httpx.Client, keys: Keys, services: Services, clock: Clock, tmp_path: Path
) -> None:
    _history(http, keys, services, clock)
    store, admin = services.store, bearer(keys.admin)
    assert http.put("/api/evidence/retention", json={"days": 365}, headers=admin).status_code == 200
    # 365 days: only the rule version (400 days old) is older; it is never deleted, but its
    # entry is, below a checkpoint signed at seq 1.
    first = http.post("/api/evidence/prune", headers=admin).json()
    assert (first["pruned"], first["through_seq"], first["entries_deleted"]) == (True, 1, 1)
    assert first["records_deleted"] == 0 and first["checkpoint"]["seq"] == 1
    assert store.get_record(WORKSPACE, "rule_version", "r@1") is not None
    assert http.put("/api/evidence/retention", json={"days": 200}, headers=admin).status_code == 200
    done = http.post("/api/evidence/prune", headers=admin)
    assert done.status_code == 200, done.text
    body = done.json()
    # The last entry older than 200 days is seq 7 (the checks of 300 days ago).
    assert (body["pruned"], body["through_seq"], body["entries_deleted"]) == (True, 7, 6)
    assert body["records_deleted"] == 6 and body["checkpoint"]["seq"] == 7
    head7 = [cp for cp in store.checkpoints(WORKSPACE) if cp.seq == 7]
    assert head7 and head7[0].hash == body["checkpoint"]["hash"]
    # Each prune leaves an entry naming what it kept below its cut (11: through 1, 12:
    # through 7): the rule version, whose own entry is gone.
    left = [(e.seq, e.kind) for e in store.entries(WORKSPACE)]
    assert left == [(8, "check"), (9, "check"), (10, "check"), (11, "prune"), (12, "prune")]
    assert store.get_record(WORKSPACE, "rule_version", "r@1") is not None  # never deleted
    [listed] = [r for e, r in store.entries_with_records(WORKSPACE, since=11) if r]
    assert listed["through_seq"] == 7 and listed["kept"]["count"] == 1
    assert listed["checkpoint"] == {"seq": 7, "hash": body["checkpoint"]["hash"]}
    assert body["kept_versions"] == 1
    again = http.post("/api/evidence/prune", headers=admin).json()
    assert again["pruned"] is False and again["message"] == "nothing is older than 200 days"

    shown = http.get("/api/evidence/retention", headers=admin).json()
    assert shown["oldest_record"] == {"seq": 1, "kind": "rule_version", "ref_id": "r@1",
                                      "kept": True}  # fmt: skip
    assert shown["pruned_through"] == 7
    assert shown["verifies_from"]["seq"] == 7
    assert shown["chain"] == "the chain verifies from the signed checkpoint at seq 7"
    # Everything still verifies, from that checkpoint.
    assert verify_workspace(store, WORKSPACE).ok
    server_verify = http.get("/api/evidence/verify", headers=admin).json()
    assert server_verify["ok"] is True and server_verify["first_seq"] == 8
    assert server_verify["kept_records"] == 1
    export = http.get("/api/evidence/export", headers=admin)
    (tmp_path / "pruned.jsonl").write_bytes(export.content)
    assert (
        b'{"type":"kept","seq":1,"kind":"rule_version","ref_id":"r@1","event":{' in export.content
    )
    assert verify(["--export", str(tmp_path / "pruned.jsonl")]) == 0
    # The fixture's audit key has outlived its 90 days on this clock: an auditor's new one.
    audit = create_key(store, WORKSPACE, "audit", made_by=ADMIN)
    assert verify(["--url", str(http.base_url), "--key", audit]) == 0


def _pruned(http: httpx.Client, keys: Keys, services: Services, clock: Clock) -> bytes:
    _history(http, keys, services, clock)
    admin = bearer(keys.admin)
    assert http.put("/api/evidence/retention", json={"days": 200}, headers=admin).status_code == 200
    assert http.post("/api/evidence/prune", headers=admin).json()["through_seq"] == 7
    export = http.get("/api/evidence/export", headers=admin)
    assert export.status_code == 200
    return export.content


def _resign(content: bytes, services: Services) -> bytes:
    """The export with its lines changed and signed again with the workspace's own key:
    what someone holding the server's key could make. The prune entry still catches it."""
    import base64
    import hashlib
    import json

    lines = content.splitlines(keepends=True)[:-1]
    digest = hashlib.sha256(b"".join(lines)).digest()
    key_id, sig = services.signer.sign(WORKSPACE, digest)
    last = {"type": "signature", "sha256": digest.hex(), "algorithm": "Ed25519",
            "key_id": key_id, "signature": base64.b64encode(sig).decode()}  # fmt: skip
    return b"".join(lines) + (json.dumps(last, separators=(",", ":")) + "\n").encode()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda line: line.replace(b'"amount > 999"', b'"amount > 5"'), "edited or replaced"),
        (lambda line: b"", "kept 1 rule and mapping versions; 0 are here"),
    ],
)
def test_a_kept_rule_version_is_vouched_for_by_the_prune(
    http: httpx.Client, keys: Keys, services: Services, clock: Clock, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], change: object, problem: str,
) -> None:  # fmt: skip
    content = _pruned(http, keys, services, clock)
    kept = [
        line for line in content.splitlines(keepends=True) if line.startswith(b'{"type":"kept"')
    ]
    assert len(kept) == 1
    changed = content.replace(kept[0], change(kept[0]))  # type: ignore[operator]
    assert changed != content
    path = tmp_path / "changed.jsonl"
    path.write_bytes(_resign(changed, services))
    capsys.readouterr()
    assert verify(["--export", str(path)]) == 1
    out = capsys.readouterr().out
    assert problem in out and "signature" not in out.split("FAIL", 1)[-1].split("\n")[0]


def test_a_kept_line_that_is_no_version_is_refused(
    http: httpx.Client, keys: Keys, services: Services, clock: Clock, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    content = _pruned(http, keys, services, clock)
    extra = b'{"type":"kept","seq":3,"kind":"check","ref_id":"chk_x","event":{"x":1}}\n'
    lines = content.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"kept"'))
    path = tmp_path / "extra.jsonl"
    path.write_bytes(_resign(b"".join([*lines[:at], extra, *lines[at:]]), services))
    capsys.readouterr()
    assert verify(["--export", str(path)]) == 1
    assert "a prune never keeps a check" in capsys.readouterr().out


def test_prune_never_drops_the_newest_entry(
    http: httpx.Client, keys: Keys, services: Services, clock: Clock
) -> None:
    clock.at(NOW - 300 * DAY_MS)
    for i in range(3):
        _check(http, keys.agent, i)
    clock.at(NOW)
    assert http.put("/api/evidence/retention", json={"days": 183},
                    headers=bearer(keys.admin)).status_code == 200  # fmt: skip
    body = prune(services, WORKSPACE)
    assert body["through_seq"] == 2  # seq 3 is old too, but the log keeps its last entry
    assert [e.seq for e in services.store.entries(WORKSPACE)] == [3, 4]  # 4: the prune
    assert verify_workspace(services.store, WORKSPACE).ok


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_prune_command(
    http: httpx.Client, keys: Keys, services: Services, clock: Clock, tmp_path: Path
) -> None:
    # The command runs in another process, on the real clock: the history is set by it.
    _history(http, keys, services, clock, now=int(time.time() * 1000))
    path = getattr(services.store, "path", None)
    assert path is not None
    env = {**os.environ, "CLAROS_DATA": str(Path(path).parent)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "claros.ledger", *args], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    kept = run("prune", "--workspace", WORKSPACE)
    assert kept.returncode == 0 and "no retention is set: every record is kept" in kept.stdout
    assert http.put("/api/evidence/retention", json={"days": 200},
                    headers=bearer(keys.admin)).status_code == 200  # fmt: skip
    done = run("prune", "--workspace", WORKSPACE)
    assert done.returncode == 0, done.stderr
    assert "dropped the entries through seq 7" in done.stdout
    assert "7 entries and 6 records deleted; checkpoint at seq 7" in done.stdout
    verified = run("verify", "--workspace", WORKSPACE)
    assert verified.returncode == 0, verified.stdout
    assert "OK: workspace acme: 4 entries (seq 8..11)" in verified.stdout
    assert "1 rule and mapping versions kept below the prune" in verified.stdout
