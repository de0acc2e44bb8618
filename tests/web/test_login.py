"""``claros login`` and the saved credentials every client command falls back on."""

from __future__ import annotations

import io
import json
import stat
import threading
from pathlib import Path

import httpx
import pytest

from claros.local import LocalServer
from claros_guard import login
from claros_guard.cli import main
from claros_guard.client import Client, ClientError
from tests.web.conftest import PERSON, WORKSPACE, Keys, bearer

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.delenv("CLAROS_KEY", raising=False)
    monkeypatch.delenv("CLAROS_URL", raising=False)
    return home


def test_the_path_honours_xdg_config_home(tmp_path: Path) -> None:
    assert login.credentials_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "claros" / "credentials.json"
    )
    default = login.credentials_path({"XDG_CONFIG_HOME": "relative/is/ignored"})
    assert default == Path.home() / ".config" / "claros" / "credentials.json"


def test_the_file_is_readable_only_by_its_owner(config_home: Path) -> None:
    path = login.save_credentials({"url": "http://x", "key": "ck_1"})
    assert path == config_home / "claros" / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.chmod(0o644)
    login.save_credentials({"url": "http://x", "key": "ck_2"})  # rewritten: 0600 again
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert login.load_credentials() == {"url": "http://x", "key": "ck_2"}
    assert not list(path.parent.glob(".*tmp"))


def test_a_malformed_file_is_ignored(config_home: Path) -> None:
    path = login.credentials_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert login.load_credentials() is None
    path.write_text(json.dumps({"url": "http://x"}))
    assert login.load_credentials() is None


@pytest.mark.parametrize(
    ("url", "key", "env", "expected"),
    [
        (None, None, {}, ("https://claros.example", "ck_saved")),
        ("https://claros.example/", None, {}, ("https://claros.example/", "ck_saved")),
        (None, "ck_given", {}, ("https://claros.example", "ck_given")),
        (None, None, {"CLAROS_KEY": "ck_env"}, ("https://claros.example", "ck_env")),
        (
            None,
            None,
            {"CLAROS_URL": "https://claros.example"},
            ("https://claros.example", "ck_saved"),
        ),
        # Never send the saved key to another server.
        ("https://other.example", None, {}, ("https://other.example", None)),
        (None, None, {"CLAROS_URL": "http://claros.example"}, ("http://claros.example", None)),
    ],
)
def test_which_url_and_key_a_command_uses(
    tmp_path: Path,
    url: str | None,
    key: str | None,
    env: dict[str, str],
    expected: tuple[str | None, str | None],
) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path), **env}
    login.save_credentials(
        {"url": "https://claros.example", "key": "ck_saved"}, login.credentials_path(env)
    )
    assert login.resolve_connection(url, key, env) == expected


def test_client_falls_back_on_the_saved_key(config_home: Path) -> None:
    login.save_credentials({"url": "http://127.0.0.1:9", "key": "ck_saved"})
    with Client(None, None) as client:
        assert str(client.http.base_url) == "http://127.0.0.1:9"
        assert client.http.headers["authorization"] == "Bearer ck_saved"
    login.credentials_path().unlink()
    with pytest.raises(ClientError, match="run claros login"):
        Client("http://127.0.0.1:9", None)


def _approve_when_asked(
    server: LocalServer, key: str, out: io.StringIO, decision: str, done: threading.Event
) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as http:
        while not done.wait(0.02):
            found = [w for w in out.getvalue().split() if len(w) == 9 and w[4] == "-"]
            if found:
                answer = http.post(
                    "/app/device",
                    json={"user_code": found[0], "decision": decision},
                    headers=bearer(key),
                )
                assert answer.status_code == 200, answer.text
                return


@SQLITE
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_login_saves_a_key_for_the_person_who_approves(
    server: LocalServer, keys: Keys, config_home: Path, decision: str
) -> None:
    out = io.StringIO()
    done = threading.Event()
    approver = threading.Thread(
        target=_approve_when_asked, args=(server, keys.person, out, decision, done), daemon=True
    )
    approver.start()
    try:
        if decision == "deny":
            with pytest.raises(login.LoginError, match="denied"):
                login.login(server.url, out=out, sleep=lambda s: done.wait(0.05))
            assert login.load_credentials() is None
            return
        saved = login.login(server.url, out=out, sleep=lambda s: done.wait(0.05))
    finally:
        done.set()
        approver.join(5)
    assert "/app/device?code=" in out.getvalue() and "Signed in as" in out.getvalue()
    data = json.loads(saved.read_text())
    assert data["url"] == server.url and data["person"] == PERSON
    assert data["workspace"] == WORKSPACE and data["kind"] == "agent"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    with Client(None, None) as client:
        assert client.json("GET", "/api/me/timeline")["person"] == PERSON


def test_login_reports_an_unreachable_server(
    config_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["login", "--url", "http://127.0.0.1:9"]) == 2
    assert "cannot reach Claros" in capsys.readouterr().err
