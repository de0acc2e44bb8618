"""``python -m claros.auth create`` and ``python -m claros.ledger verify`` as real
subprocesses over a real data directory."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from claros.auth import authenticate
from claros.config import Settings
from claros.errors import UnauthorizedError
from claros.store.sqlite import SqliteStore
from claros.wiring import build_services


def run(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAROS_DATA": str(data)}
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_auth_create_prints_the_key_last(tmp_path: Path) -> None:
    done = run("claros.auth", "create", "--workspace", "acme", data=tmp_path)
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip().splitlines()[-1]
    store = SqliteStore(tmp_path / "claros.db")
    try:
        principal = authenticate(store, f"Bearer {key}")
        assert (principal.workspace, principal.kind, principal.person) == ("acme", "service", None)
        # Stored only as a hash.
        raw = sqlite3.connect(tmp_path / "claros.db").execute("SELECT body FROM docs").fetchall()
        assert not any(key in body for (body,) in raw)
    finally:
        store.close()


def test_auth_create_each_kind(tmp_path: Path) -> None:
    admin = run("claros.auth", "create", "--kind", "admin", "--person", "Ann@x.test", "--data",
                str(tmp_path), data=tmp_path / "unused")  # fmt: skip
    assert admin.returncode == 0, admin.stderr
    audit = run("claros.auth", "create", "--kind", "audit", "--person", "ann@x.test",
                data=tmp_path)  # fmt: skip
    agent = run("claros.auth", "create", "--kind", "agent", "--person", "bob@x.test",
                data=tmp_path)  # fmt: skip
    assert audit.returncode == 0 and agent.returncode == 0
    store = SqliteStore(tmp_path / "claros.db")
    try:
        got = {
            authenticate(store, "Bearer " + out.stdout.split()[-1]).kind: out
            for out in (admin, audit, agent)
        }
        assert set(got) == {"admin", "audit", "agent"}
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "agent"], "belongs to a person"),
        (["--kind", "audit", "--person", "nobody@x.test"], "made by a workspace admin"),
        (["--kind", "service", "--person", "a@x.test"], "tied to nobody"),
        (["--workspace", "Bad Name"], "workspace name"),
        (["--kind", "admin", "--person", "not-an-email"], "not an email"),
    ],
)
def test_auth_create_refuses(tmp_path: Path, args: list[str], message: str) -> None:
    done = run("claros.auth", "create", *args, data=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_auth_usage_error(tmp_path: Path) -> None:
    done = run("claros.auth", "create", "--kind", "root", data=tmp_path)
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_audit_key_lapses_when_its_maker_is_no_longer_admin(tmp_path: Path) -> None:
    services = build_services(Settings(data_dir=tmp_path))
    try:
        from claros.auth import create_key
        from claros.store.base import DocWrite

        store = services.store
        create_key(store, "acme", "admin", person="ann@x.test")
        audit = create_key(store, "acme", "audit", made_by="ann@x.test")
        assert authenticate(store, f"Bearer {audit}").kind == "audit"
        member = store.get_doc("acme", "member", "ann@x.test")
        assert member is not None
        store.write_docs(
            [DocWrite("acme", "member", "ann@x.test", {**member.value, "role": "member"})]
        )
        with pytest.raises(UnauthorizedError, match="no longer a workspace admin"):
            authenticate(store, f"Bearer {audit}")
    finally:
        services.close()


def _ledger(tmp_path: Path, n: int) -> None:
    from claros.checkpoints import sign_checkpoint

    services = build_services(Settings(data_dir=tmp_path))
    try:
        from claros.auth import ensure_workspace

        ensure_workspace(services.store, "acme")
        for i in range(n):
            entry = services.store.append("acme", "check", f"c{i}", {"i": i, "amount": "12.50"})
        sign_checkpoint(services.store, services.signer, entry)
    finally:
        services.close()


def test_ledger_verify_ok(tmp_path: Path) -> None:
    _ledger(tmp_path, 5)
    done = run("claros.ledger", "verify", data=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("OK: workspace acme: 5 entries")
    assert "1 checkpoints verified" in done.stdout


def test_ledger_verify_names_each_failure(tmp_path: Path) -> None:
    _ledger(tmp_path, 5)
    db = sqlite3.connect(tmp_path / "claros.db", isolation_level=None)
    with pytest.raises(sqlite3.DatabaseError, match="refuse updates"):
        db.execute("UPDATE records SET body = '{}' WHERE ref_id = 'c1'")
    # Someone with the sqlite3 shell who also drops the triggers:
    db.execute("DROP TRIGGER records_no_update")
    db.execute("DROP TRIGGER ledger_delete_only_by_a_prune")
    db.execute("""UPDATE records SET body = '{"amount":"99.00","i":1}' WHERE ref_id = 'c1'""")
    db.execute("DELETE FROM ledger WHERE seq = 3")
    db.close()
    done = run("claros.ledger", "verify", "--workspace", "acme", data=tmp_path)
    assert done.returncode == 1
    assert "FAIL: workspace acme" in done.stdout
    assert "seq 2 (check): record c1 edited" in done.stdout
    assert "seq 4 (check): missing entries: seq 3" in done.stdout


def test_ledger_verify_unknown_workspace(tmp_path: Path) -> None:
    _ledger(tmp_path, 1)
    done = run("claros.ledger", "verify", "--workspace", "nope", data=tmp_path)
    assert done.returncode == 2 and "no ledger" in done.stderr


def test_ledger_verify_usage(tmp_path: Path) -> None:
    done = run("claros.ledger", "frobnicate", data=tmp_path)
    assert done.returncode == 2


def test_rotate_key_keeps_old_checkpoints_verifiable(tmp_path: Path) -> None:
    _ledger(tmp_path, 3)
    done = run("claros.ledger", "rotate-key", "--workspace", "acme", data=tmp_path)
    assert done.returncode == 0, done.stderr
    old_id, new_id = done.stdout.split("signing key ")[1].strip().split(" -> ")
    assert old_id != new_id
    services = build_services(Settings(data_dir=tmp_path))
    try:
        keys = {k.key_id for k in services.store.public_keys("acme")}
        assert {old_id, new_id} <= keys
        cps = services.store.checkpoints("acme")
        # seq 3 was signed before the rotation; seq 4 introduces the new key, signed by
        # the old one.
        assert [(cp.seq, cp.key_id) for cp in cps] == [(3, old_id), (4, old_id)]
        [(entry, body)] = list(services.store.entries_with_records("acme", since=3))
        assert (entry.kind, entry.ref_id) == ("public_key", new_id)
        assert body is not None and body["replaces"] == old_id
    finally:
        services.close()
    verified = run("claros.ledger", "verify", "--workspace", "acme", data=tmp_path)
    assert verified.returncode == 0, verified.stdout
    missing = run("claros.ledger", "rotate-key", "--workspace", "nope", data=tmp_path)
    assert missing.returncode == 2 and "no workspace" in missing.stderr


def test_rotate_key_takes_no_key_to_finish_locally(tmp_path: Path) -> None:
    """--key finishes an AWS rotation that waited in vain for the checkpoint function;
    locally the old key file signs the announcement at once, so there is none to finish."""
    _ledger(tmp_path, 1)
    done = run("claros.ledger", "rotate-key", "--workspace", "acme", "--key", "k", data=tmp_path)
    assert done.returncode == 2 and "only a KMS key is resumed" in done.stderr, done.stderr
