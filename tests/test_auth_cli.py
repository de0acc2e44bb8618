"""``python -m claros.auth list|revoke|demote`` as real subprocesses against a real SQLite
workspace: what they print, that a revoked key is refused and a demoted admin's key stops,
the ledger entries they leave (by the server side), and one-line errors with exit 2."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from claros.auth import KeyRefused, authenticate
from claros.people import SERVER
from claros.store.sqlite import SqliteStore


def run(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    return subprocess.run(
        [sys.executable, "-m", "claros.auth", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def make(data: Path, *args: str) -> str:
    done = run("create", "--data", str(data), "--workspace", "acme", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_list_revoke_and_demote(data: Path) -> None:
    admin = make(data, "--kind", "admin", "--person", "ann@acme.test")
    agent = make(data, "--kind", "agent", "--person", "dana@acme.test", "--label", "laptop")
    audit = make(data, "--kind", "audit", "--person", "ann@acme.test", "--days", "30")

    listed = run("list", "--data", str(data), "--workspace", "acme")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:3] == ["KEY", "ID", "KIND"]
    by_id = {line.split()[0]: line.split() for line in lines[1:]}
    assert by_id[key_id(agent)][1:3] == ["agent", "dana@acme.test"]
    assert by_id[key_id(audit)][1:3] == ["audit", "-"] and "ann@acme.test" in by_id[key_id(audit)]
    assert all(row[-1] == "active" for row in by_id.values()) and len(by_id) == 4  # + sign-in

    done = run("revoke", "--data", str(data), "--workspace", "acme", key_id(agent))
    assert (done.returncode, done.stdout.strip()) == (0, f"revoked agent key {key_id(agent)}")
    refused(run("revoke", "--data", str(data), "--workspace", "acme", key_id(agent)),
            "revoked already")  # fmt: skip
    refused(run("demote", "--data", str(data), "--workspace", "acme", "ann@acme.test"),
            "last admin")  # fmt: skip
    make(data, "--kind", "admin", "--person", "bo@acme.test")
    done = run("demote", "--data", str(data), "--workspace", "acme", "ann@acme.test")
    assert done.stdout.strip() == "ann@acme.test is a member now (was admin)", done.stderr
    listed = run("list", "--data", str(data), "--workspace", "acme").stdout
    assert f"{key_id(agent)}" in listed and "revoked" in listed

    store = SqliteStore(data / "claros.db")
    try:
        for key, problem in ((agent, "revoked"), (admin, "admin"), (audit, "audit")):
            with pytest.raises(KeyRefused) as caught:
                authenticate(store, f"Bearer {key}")
            assert caught.value.problem == problem
        kinds = [(e.kind, r) for e, r in store.entries_with_records("acme")]
        [revoked] = [r for k, r in kinds if k == "key_revoked"]
        assert revoked is not None and revoked["revoked_by"] == SERVER
        # Every membership change is on the ledger, by the server side: the members the
        # create commands added, and the demotion.
        roles = [(r["person"], r["role"], r["changed_by"])
                 for k, r in kinds if k == "member_role" and r is not None]  # fmt: skip
        assert roles == [
            ("ann@acme.test", "admin", SERVER),
            ("dana@acme.test", "member", SERVER),
            ("bo@acme.test", "admin", SERVER),
            ("ann@acme.test", "member", SERVER),
        ]
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["revoke", "0123"], "16 hex digits"),
        (["revoke", "0123456789abcdef"], "no key '0123456789abcdef'"),
        (["demote", "nobody@acme.test"], "not a member"),
        (["demote", "not-an-email"], "not an email address"),
        (["list", "--workspace", "Bad Name"], "workspace name"),
        (["create", "--kind", "audit", "--person", "ann@acme.test", "--days", "0"], "1 to 3660"),
        (["create", "--kind", "agent", "--person", "d@acme.test", "--days", "5"], "only an audit"),
    ],
)
def test_errors_are_one_line_and_exit_2(data: Path, args: list[str], message: str) -> None:
    make(data, "--kind", "admin", "--person", "ann@acme.test")
    command, rest = args[0], args[1:]
    workspace = [] if "--workspace" in rest else ["--workspace", "acme"]
    refused(run(command, "--data", str(data), *workspace, *rest), message)


@pytest.mark.parametrize("command", ["list", "revoke", "demote"])
def test_a_missing_data_dir_is_an_error_and_is_not_made(tmp_path: Path, command: str) -> None:
    typo = tmp_path / "typo"
    extra = {"list": [], "revoke": ["0123456789abcdef"], "demote": ["a@b.test"]}[command]
    refused(run(command, "--data", str(typo), *extra), f"no Claros data at {typo}")
    assert not typo.exists()


def test_help_is_plain() -> None:
    done = run("--help")
    assert done.returncode == 0
    for command in ("create", "list", "revoke", "demote"):
        assert command in done.stdout
    assert "key_revoked" in done.stdout and "exit 2" in done.stdout
    usage = run("revoke")
    assert usage.returncode == 2 and "key_id" in usage.stderr
