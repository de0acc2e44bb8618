"""``python -m claros.ledger`` and ``python -m claros.auth`` on bad input, as real
subprocesses: a clear message on stderr and exit 2, never a traceback, and a data
directory that does not exist is never made by a command that only reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from claros.auth import ensure_workspace
from claros.config import Settings
from claros.wiring import build_services


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        env=environ | (env or {}),
        timeout=60,
    )


def refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def _data(tmp_path: Path, entries: int = 1) -> Path:
    """A data directory with workspace acme and ``entries`` ledger entries."""
    data = tmp_path / "data"
    services = build_services(Settings(data_dir=data))
    try:
        ensure_workspace(services.store, "acme")
        for i in range(entries):
            services.store.append("acme", "check", f"c{i}", {"i": i})
    finally:
        services.close()
    return data


# --- a data directory that is not there ----------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [["verify"], ["prune"], ["verify", "--workspace", "acme"], ["rotate-key", "--workspace", "x"]],
    ids=["verify", "prune", "verify-workspace", "rotate-key"],
)
def test_a_missing_data_dir_is_an_error_and_is_not_made(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "typo"
    refused(run("claros.ledger", *command, "--data", str(typo)), f"no Claros data at {typo}")
    assert not typo.exists()


def test_an_empty_data_dir_is_an_error_and_gets_no_database(tmp_path: Path) -> None:
    refused(run("claros.ledger", "verify", "--data", str(tmp_path)), "no Claros data at")
    assert list(tmp_path.iterdir()) == []


def test_verify_report_without_keys_or_data(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"report": {"workspace": "acme"}, "signature": {}}))
    typo = tmp_path / "typo"
    done = run("claros.ledger", "verify-report", str(report), "--data", str(typo))
    refused(done, f"no Claros data in {typo}")
    assert not typo.exists()


# --- a file that is not a Claros database --------------------------------------------------
@pytest.fixture
def corrupt(tmp_path: Path) -> Path:
    data = tmp_path / "corrupt"
    data.mkdir()
    (data / "claros.db").write_bytes(b"this is not SQLite\n" * 300)
    return data


@pytest.mark.parametrize(
    "command",
    [
        ["claros.ledger", "verify"],
        ["claros.ledger", "prune"],
        ["claros.auth", "create", "--workspace", "acme"],
    ],
    ids=["verify", "prune", "auth-create"],
)
def test_a_corrupt_database_is_named(corrupt: Path, command: list[str]) -> None:
    done = run(*command, "--data", str(corrupt))
    refused(done, f"{corrupt / 'claros.db'} is not a Claros database")


def test_auth_create_with_a_file_as_data_dir(tmp_path: Path) -> None:
    file = tmp_path / "passwd"
    file.write_text("root:x:0:0::/root:/bin/sh\n")
    refused(run("claros.auth", "create", "--data", str(file)), f"{file} is a file")
    assert file.read_text() == "root:x:0:0::/root:/bin/sh\n"


# --- a bad environment ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("CLAROS_STORE", "mongo", "'sqlite' or 'dynamodb'"),
        ("CLAROS_LEDGER_CHECKPOINT_EVERY", "x", "valid integer"),
        ("CLAROS_ASK_TTL_S", "0", "greater than or equal to 1"),
        ("CLAROS_SQLITE_SYNC", "off", "'full' or 'normal'"),
    ],
)
@pytest.mark.parametrize(
    "command", [["claros.ledger", "verify"], ["claros.auth", "create"]], ids=["ledger", "auth"]
)
def test_a_bad_environment_variable_is_named(
    tmp_path: Path, command: list[str], variable: str, value: str, problem: str
) -> None:
    env = {variable: value, "CLAROS_DATA": str(tmp_path / "data")}
    done = run(*command, env=env)
    refused(done, f"{variable}={value!r}")
    assert problem in done.stderr
    assert not (tmp_path / "data").exists()


# --- verify-report --keys with a malformed key file ----------------------------------------
@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ('{"keys": [{"key_id": "x"}]}', "key 1 has no 'workspace'"),
        ("[null]", "key 1 is not an object"),
        (
            '[{"workspace": "acme", "key_id": "k", "public_key": "AAAA", "created_at": "soon"}]',
            "key 1 has a malformed field",
        ),
        (
            '[{"workspace": "acme", "key_id": "k", "public_key": "!!", "created_at": 1}]',
            "public_key is not base64",
        ),
        (
            '[{"workspace": "acme", "key_id": "k", "public_key": "AAAA", "created_at": 1}]',
            "public_key is 3 bytes",
        ),
        ('{"keys": "none"}', "lists no keys"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("{not json", "is not JSON"),
    ],
    ids=[
        "no-fields",
        "null",
        "bad-created",
        "bad-base64",
        "short-key",
        "not-a-list",
        "deep",
        "bad",
    ],
)
def test_verify_report_with_a_malformed_key_file(tmp_path: Path, keys: str, message: str) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"report": {"workspace": "acme"}, "signature": {}}))
    key_file = tmp_path / "keys.json"
    key_file.write_text(keys)
    done = run("claros.ledger", "verify-report", str(report), "--keys", str(key_file))
    refused(done, message)
    assert str(key_file) in done.stderr


@pytest.mark.parametrize(
    ("content", "message"), [("[" * 100_000, "nested too deeply"), ("\xff{", "is not JSON")]
)
def test_verify_report_with_a_malformed_report(tmp_path: Path, content: str, message: str) -> None:
    report = tmp_path / "report.json"
    report.write_text(content, encoding="latin-1")
    done = run("claros.ledger", "verify-report", str(report), "--keys", str(tmp_path / "k"))
    refused(done, message)
    assert str(report) in done.stderr


# --- an unknown workspace -----------------------------------------------------------------
@pytest.mark.parametrize("command", ["verify", "prune"])
def test_an_unknown_workspace_has_no_ledger(tmp_path: Path, command: str) -> None:
    data = _data(tmp_path)
    done = run("claros.ledger", command, "--workspace", "nope", "--data", str(data))
    refused(done, "workspace 'nope' has no ledger")


def test_prune_of_a_known_workspace_without_retention_is_fine(tmp_path: Path) -> None:
    data = _data(tmp_path)
    done = run("claros.ledger", "prune", "--workspace", "acme", "--data", str(data))
    assert done.returncode == 0, done.stderr
    assert "no retention is set" in done.stdout
