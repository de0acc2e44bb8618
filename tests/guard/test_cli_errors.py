"""The ``claros`` client commands on bad input, as real subprocesses: one clear line on
stderr and exit 2 (for ``hook pre``, a deny), never a traceback, never a hang, and
nothing half written. Servers that are not Claros, or answer like a broken one, are real
local HTTP servers."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from claros_guard.api import outcome_key
from claros_guard.client import Client
from claros_guard.files import FileProblem, plain_json, write_file
from claros_guard.login import save_credentials
from tests.guard.conftest import LAB, Workspace
from tests.guard.http_fakes import Answer, HttpFake, Request
from tests.guard.test_hooks import decision, hook_process, pre

ROOT = Path(__file__).resolve().parents[2]
VALID = ROOT / "tests" / "data" / "exports" / "valid.jsonl"
DEEP = "[" * 100_000 + "]" * 100_000
BAD_URL = "http://[::1"


def claros(
    *args: str, env: dict[str, str] | None = None, stdin: str | bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``claros ARGS`` with no CLAROS_* settings and no saved sign-in, unless given."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    environ["XDG_CONFIG_HOME"] = "/nonexistent/claros-tests"  # no saved sign-in
    done = subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", *args],
        input=stdin if isinstance(stdin, bytes) else stdin.encode(),
        capture_output=True,
        env=environ | (env or {}),
        timeout=timeout,
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def refused(done: subprocess.CompletedProcess[str], message: str) -> None:
    """Exit 2, the message on stderr in one line, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


# --- a real HTTP server that answers as the test says -------------------------------------
class Fake(HttpFake):
    """Answers each ``METHOD /path`` (query ignored) from ``routes``; counts the requests."""

    def __init__(self, routes: dict[str, Callable[[], Answer]]) -> None:
        self.routes = routes
        self.hits: dict[str, int] = {}
        super().__init__()

    def respond(self, request: Request) -> Answer:
        route = f"{request.method} {request.path.split('?')[0]}"
        self.hits[route] = self.hits.get(route, 0) + 1
        return self.routes.get(route, lambda: (404, {}, b"no such page"))()


@pytest.fixture
def fake() -> Iterator[Callable[[dict[str, Callable[[], Answer]]], Fake]]:
    made: list[Fake] = []

    def make(routes: dict[str, Callable[[], Answer]]) -> Fake:
        made.append(Fake(routes))
        return made[-1]

    yield make
    for server in made:
        server.close()


def body(data: Any, **headers: str) -> Callable[[], Answer]:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return lambda: (200, {"Content-Type": "application/json", **headers}, raw)


# --- 1. CLAROS_PORT is read by serve alone, and checked ----------------------------------
@pytest.mark.parametrize("port", ["", "x", "99999"])
def test_a_bad_claros_port_breaks_only_serve(port: str) -> None:
    env = {"CLAROS_PORT": port}
    read = json.dumps(pre("Read", {"file_path": "/repo/a.py"}))
    done = claros("hook", "pre", env=env, stdin=read)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = claros("verify", "--export", str(VALID), env=env)
    assert done.returncode == 0, done.stderr
    if port:
        refused(claros("serve", env=env), "claros serve: CLAROS_PORT: ")
        assert "is not a port (a whole number from 0 to 65535)" in claros("serve", env=env).stderr


@pytest.mark.anyio
async def test_an_empty_claros_port_leaves_the_hook_checking(workspace: Workspace) -> None:
    answer, stderr = await hook_process(
        workspace, "pre", pre("Bash", {"command": "ls"}, "t1"), CLAROS_PORT=""
    )
    # Checked and allowed: no decision (Claude Code's own permissions decide).
    assert answer is None and stderr == ""
    assert [c["result"] for c in workspace.records("check")] == ["allow"]


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_checks_the_port_range(port: str) -> None:
    done = claros("serve", "--port", port)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "argument --port:" in done.stderr
    assert "is not a port (a whole number from 0 to 65535)" in done.stderr


def test_serve_names_a_data_path_that_is_not_a_directory(tmp_path: Path) -> None:
    file = tmp_path / "passwd"
    file.write_text("root:x:0:0::/root:/bin/sh\n")
    done = claros("serve", "--port", "0", "--data", str(file))
    refused(done, f"claros serve: cannot use the data directory {file}: {file} is a file")
    assert "listen" not in done.stderr
    assert file.read_text() == "root:x:0:0::/root:/bin/sh\n"


# --- 2. hook input nested too deeply, or not text ------------------------------------------
@pytest.mark.parametrize("stdin", [DEEP.encode(), b'{"tool_name": "\xff"}'], ids=["deep", "latin1"])
def test_hook_input_that_cannot_be_read(stdin: bytes) -> None:
    done = claros("hook", "pre", stdin=stdin)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "the hook input is not JSON Claude Code sends" in answer["permissionDecisionReason"]
    assert len(done.stderr.splitlines()) == 1
    done = claros("hook", "post", stdin=stdin)
    assert (done.returncode, done.stdout) == (0, "") and "Traceback" not in done.stderr
    assert done.stderr.startswith("claros hook post: the hook input is not JSON")
    assert len(done.stderr.splitlines()) == 1


# --- 3. an outcome's idempotency key, whatever the tool_use_id -----------------------------
def test_the_outcome_key_is_bounded_and_stable() -> None:
    long = "toolu_" + "é" * 1000
    assert outcome_key(long) == outcome_key(long) != outcome_key(long[:-1])
    assert len(outcome_key(long)) == 68 and outcome_key(long).isascii()
    assert outcome_key("toolu_1").startswith("use-")


@pytest.mark.anyio
async def test_a_long_tool_use_id_keeps_its_outcome(workspace: Workspace) -> None:
    ws = workspace
    use = "toolu_" + "x" * 250  # 256: the most Claros takes
    event = pre("Bash", {"command": "ls"}, use)
    answer, _ = await hook_process(ws, "pre", event)
    assert answer is None  # checked and allowed: no decision
    assert [c["result"] for c in ws.records("check")] == ["allow"]
    done = {**event, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "a b"}}
    answer, stderr = await hook_process(ws, "post", done)
    assert answer is None and stderr == ""
    (outcome,) = ws.records("outcome")
    assert outcome["status"] == "ok"

    # Longer than Claros takes: refused, and said as the outcome (not the check) it is.
    longer = {**done, "tool_use_id": use + "y" * 44}
    answer, stderr = await hook_process(ws, "post", longer)
    assert answer is None and "Traceback" not in stderr
    assert stderr.startswith("claros hook post: Claros refused the outcome (400)")


# --- 4. URLs, files and keys ---------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--url", BAD_URL, "--key", "ck_x"],
        ["rules", "push", str(VALID), "--url", BAD_URL, "--key", "ck_x"],
        ["mappings", "push", str(VALID), "--url", BAD_URL, "--key", "ck_x"],
        ["login", "--url", BAD_URL],
        ["guard", "--app", "shop", "--url", BAD_URL, "--key", "ck_x", "--", "cat"],
        ["guard", "--app", "shop", "--upstream-url", BAD_URL, "--url", "http://x", "--key", "k"],
    ],
    ids=["verify", "rules", "mappings", "login", "guard", "upstream"],
)
def test_a_malformed_url_is_named(args: list[str]) -> None:
    refused(claros(*args), f"{BAD_URL!r} is not a valid URL")


def test_verify_with_deeply_nested_checkpoints(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    done = claros("verify", "--export", str(VALID), "--checkpoints", str(deep))
    refused(done, "nested too deeply")


def test_an_export_made_at_no_possible_time(tmp_path: Path) -> None:
    header, rest = VALID.read_bytes().split(b"\n", 1)
    data = json.loads(header)
    data["exported_at"] = 10**20
    export = tmp_path / "future.jsonl"
    export.write_bytes(json.dumps(data).encode() + b"\n" + rest)
    done = claros("verify", "--export", str(export))
    assert done.returncode == 1 and "Traceback" not in done.stderr  # the header was edited
    assert "exported:    ? (100000000000000000000 is not a time in ms)" in done.stdout
    assert "export edited" in done.stdout


@pytest.mark.parametrize(
    ("command", "name", "content", "message"),
    [
        ("rules", "latin1.yaml", b"id: caf\xe9\n", "latin1.yaml is not UTF-8 text (byte 0xe9 at"),
        ("rules", "deep.json", DEEP.encode(), "deep.json is nested too deeply to be read"),
        ("mappings", "deep.json", DEEP.encode(), "deep.json is nested too deeply to be read"),
        ("rules", "deep.yaml", b"a: " + b"[" * 100_000, "deep.yaml is nested too deeply"),
        ("mappings", "deep.yaml", b"a: " + b"[" * 100_000, "deep.yaml is nested too deeply"),
        (
            "rules",
            "bomb.yaml",
            b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + b"".join(
                f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n".encode()
                for p, n in zip("abcdefgh", "bcdefghi", strict=True)
            ),
            "holds more than 1,000,000 values",
        ),
        ("rules", "bin.yaml", b"- id: r\n  x: !!binary aGVsbG8=\n", "yaml: [0].x is binary data"),
    ],
    ids=[
        "latin1",
        "deep-json",
        "deep-json-mappings",
        "deep-yaml",
        "deep-yaml-mappings",
        "alias-bomb",
        "binary",
    ],  # fmt: skip
)
def test_push_files_that_cannot_be_sent(
    tmp_path: Path, command: str, name: str, content: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    done = claros(command, "push", str(path), "--url", "http://127.0.0.1:9", "--key", "ck_x")
    refused(done, message)


def test_yaml_dates_are_sent_as_text() -> None:
    import datetime as dt

    sent = plain_json({"since": dt.date(2026, 1, 2), 3: [dt.datetime(2026, 1, 2, 3, 4)]}, "f")
    assert sent == {"since": "2026-01-02", "3": ["2026-01-02T03:04:00"]}
    with pytest.raises(FileProblem, match="not a number JSON can carry"):
        plain_json({"x": float("nan")}, "f")


@pytest.mark.parametrize("command", ["verify", "rules push", "mappings push", "guard"])
def test_a_key_that_is_not_ascii(tmp_path: Path, command: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("id: r1\n")
    more = {"rules push": [str(path)], "mappings push": [str(path)], "guard": ["--app", "a"]}
    args = [*command.split(), *more.get(command, []), "--url", "http://127.0.0.1:9", "--key", "é"]
    if command == "guard":
        args += ["--", "cat"]
    done = claros(*args)
    refused(done, "the Claros key is not printable ASCII")
    assert "unexpected" not in done.stderr


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (b"<html>hello</html>", "PUT /api/rules/r1 gave no JSON ('<html>hello</html>')"),
        (b"[1, 2]", "PUT /api/rules/r1 gave no version ('[1, 2]')"),
        (b'{"ok": true}', "PUT /api/rules/r1 gave no version"),
    ],
    ids=["html", "list", "object"],
)
def test_push_to_a_server_that_is_not_claros(
    tmp_path: Path, fake: Callable[[dict[str, Callable[[], Answer]]], Fake], answer: bytes,
    shown: str,
) -> None:  # fmt: skip
    server = fake({"PUT /api/rules/r1": body(answer), "PUT /api/rules/r2": body(answer)})
    path = tmp_path / "rules.yaml"
    path.write_text("- id: r1\n- id: r2\n")
    done = claros("rules", "push", str(path), "--url", server.url, "--key", "ck_x")
    refused(done, f"claros rules push: {server.url} did not answer like Claros: {shown}")
    assert server.hits == {"PUT /api/rules/r1": 1}  # stopped there


def test_verify_against_a_server_that_is_not_claros(
    fake: Callable[[dict[str, Callable[[], Answer]]], Fake],
) -> None:
    for pubkey in (b"hello", b"[]", b'{"keys": 5}', b'{"keys": [], "workspace": 7}'):
        server = fake({"GET /v1/ledger/pubkey": body(pubkey)})
        done = claros("verify", "--url", server.url, "--key", "ck_x")
        refused(done, f"{server.url} did not answer like Claros: GET /v1/ledger/pubkey")
    # Keys and checkpoints not in their shape: the same refusal, never a traceback.
    key = {"workspace": "acme", "key_id": "ed25519:00", "public_key": "AA==", "created_at": 1}
    bad_keys = [{**key, "created_at": "@1e999"}, {**key, "created_at": "soon"}, {"key_id": "k"}]
    for bad in bad_keys:
        text = json.dumps({"workspace": "acme", "keys": [bad]}).replace('"@1e999"', "1e999")
        pubkey = text.encode()
        server = fake({"GET /v1/ledger/pubkey": body(pubkey)})
        done = claros("verify", "--url", server.url, "--key", "ck_x")
        refused(done, f"{server.url} did not answer like Claros: GET /v1/ledger/pubkey gave a key")
    checkpoint = {"workspace": "acme", "seq": 1, "hash": "0" * 64, "ts": 1}
    for bad in ({**checkpoint, "seq": "1"}, {"seq": 1}):
        server = fake({
            "GET /v1/ledger/pubkey": body(b'{"workspace": "acme", "keys": []}'),
            "GET /v1/ledger/checkpoints": body(json.dumps({"checkpoints": [bad]}).encode()),
        })  # fmt: skip
        done = claros("verify", "--url", server.url, "--key", "ck_x")
        gave = "GET /v1/ledger/checkpoints gave a checkpoint"
        refused(done, f"{server.url} did not answer like Claros: {gave}")


def _project(tmp_path: Path, settings: str) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "project" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(settings)
    return path, {"CLAUDE_PROJECT_DIR": str(tmp_path / "project"), "HOME": str(tmp_path)}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('{"hooks": {"PreToolUse": [{"hooks": 5}]}}', "hooks.PreToolUse[0].hooks is not a list"),
        ('{"hooks": {"PreToolUse": [7]}}', "hooks.PreToolUse[0] is not an object"),
        ('{"hooks": {"PostToolUse": [{"hooks": [1]}]}}', "that is not an object"),
        ('{"hooks": []}', "hooks is not an object"),
        ("[]", "does not hold a JSON object"),
    ],
    ids=["hooks-5", "entry-7", "hook-1", "hooks-list", "list"],
)
def test_hooks_install_leaves_a_strange_settings_file_alone(
    tmp_path: Path, settings: str, message: str
) -> None:
    path, env = _project(tmp_path, settings)
    done = claros("hooks", "install", env=env)
    refused(done, message)
    assert str(path) in done.stderr and "not how Claude Code writes its settings" in done.stderr
    assert path.read_text() == settings
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]


def test_hooks_install_with_deeply_nested_settings(tmp_path: Path) -> None:
    settings = '{"hooks": ' + DEEP + "}"
    path, env = _project(tmp_path, settings)
    refused(claros("hooks", "install", env=env), f"{path} is nested too deeply to be read")
    assert path.read_text() == settings


def test_a_bad_log_level_is_named() -> None:
    done = claros("guard", "--app", "shop", "--", "cat", env={"CLAROS_LOG": "bogus"})
    refused(done, "CLAROS_LOG='bogus' is not a log level: use DEBUG, INFO, WARNING, ERROR")


@pytest.mark.parametrize(
    ("saved", "why"),
    [
        ('{"url": "http://[x", "key": "ck_1"}', "its url 'http://[x' is not a valid URL"),
        (DEEP, "it is nested too deeply to be read"),
        ('{"url": "http://127.0.0.1:9", "key": "ck_\u00e9"}', "its key is missing or not a"),
        ("[1]", "it does not hold a JSON object"),
    ],
    ids=["url", "deep", "key", "list"],
)
@pytest.mark.anyio
async def test_a_damaged_saved_sign_in_is_named(
    workspace: Workspace, tmp_path: Path, saved: str, why: str
) -> None:
    path = tmp_path / "config" / "claros" / "credentials.json"
    path.parent.mkdir(parents=True)
    path.write_text(saved)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    message = f"the saved sign-in at {path} is damaged ({why}"
    rules = tmp_path / "rules.yaml"
    rules.write_text("id: r1\n")
    for args in (["verify"], ["rules", "push", str(rules)], ["guard", "--app", "a", "--", "cat"]):
        done = claros(*args, env=env)
        refused(done, message)
        assert done.stderr.strip().endswith("run claros login again")
    # The hook denies, saying so.
    signed_out = {"CLAROS_KEY": "", "CLAROS_URL": "", **env}
    event = pre("Bash", {"command": "ls"})
    answer, stderr = await hook_process(workspace, "pre", event, **signed_out)
    denied = decision(answer)
    assert denied[0] == "deny" and message in denied[1] and stderr == ""
    # Signing in again is what it says to do, and it is not in the way.
    done = claros("login", "--url", "http://127.0.0.1:9", env=env)
    assert done.returncode == 2 and "cannot reach Claros" in done.stderr


# --- 4. a wrapped server printing lines that are not JSON-RPC -----------------------------
@pytest.mark.anyio
async def test_lines_that_are_not_json_rpc_are_one_line_each(
    workspace: Workspace, tmp_path: Path
) -> None:
    chatty = (
        "import runpy, sys; print('root:x:0:0:root'); print('hello from the server'); "
        "print(42, flush=True); runpy.run_path(sys.argv[1], run_name='__main__')"
    )
    argv = [sys.executable, "-m", "claros_guard.cli", "guard", "--app", "lab", "--"]
    argv += [sys.executable, "-c", chatty, str(LAB)]
    stderr = tmp_path / "guard.err"
    client = {"name": "t", "version": "1"}
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "thing_read", "arguments": {"id": "T-1"}}},
    ]  # fmt: skip
    env = {**workspace.env, "CLAROS_LOG": "INFO"}
    with stderr.open("wb") as err:
        async with await anyio.open_process(argv, env=env, stderr=err) as guard:
            assert guard.stdin is not None and guard.stdout is not None
            answers: dict[int, dict[str, Any]] = {}
            buffer = b""
            with anyio.fail_after(30):
                for message in messages:
                    await guard.stdin.send(json.dumps(message).encode() + b"\n")
                    while "id" in message and message["id"] not in answers:
                        buffer += await guard.stdout.receive()
                        *lines, buffer = buffer.split(b"\n")
                        for line in lines:
                            got = json.loads(line)
                            if "id" in got:
                                answers[got["id"]] = got
                await guard.stdin.aclose()
                await guard.wait()
    assert answers[2].get("result", {}).get("isError") is False, (answers, stderr.read_text())
    assert json.loads(answers[2]["result"]["content"][0]["text"])["id"] == "T-1"
    log = stderr.read_text()
    assert "Traceback" not in log, log
    skipped = [line for line in log.splitlines() if "not JSON-RPC" in line]
    assert len(skipped) == 3, log
    assert "'root:x:0:0:root'" in skipped[0] and "'hello from the server'" in skipped[1]
    assert all(line.startswith("claros guard: WARNING lab: the wrapped server") for line in skipped)


# --- 5. servers that would keep verify waiting for ever ------------------------------------
PUBKEY = {"workspace": "acme", "keys": []}


def test_verify_refuses_entries_that_do_not_advance(
    fake: Callable[[dict[str, Callable[[], Answer]]], Fake],
) -> None:
    line = b'{"workspace":"acme","seq":1}\n'
    server = fake(
        {
            "GET /v1/ledger/pubkey": body(PUBKEY),
            "GET /v1/ledger/checkpoints": body({"checkpoints": []}),
            "GET /v1/ledger/entries": lambda: (200, {"x-claros-next": "1"}, line),
        }
    )
    done = claros("verify", "--url", server.url, "--key", "ck_x")
    refused(done, "Claros answered the same page twice (x-claros-next did not advance)")
    assert server.hits["GET /v1/ledger/entries"] == 2


def test_verify_refuses_checkpoints_that_do_not_advance(
    fake: Callable[[dict[str, Callable[[], Answer]]], Fake],
) -> None:
    server = fake(
        {
            "GET /v1/ledger/pubkey": body(PUBKEY),
            "GET /v1/ledger/checkpoints": body({"checkpoints": [], "next": 0}),
        }
    )
    done = claros("verify", "--url", server.url, "--key", "ck_x")
    refused(done, "Claros answered the same page twice (the checkpoints' next did not advance)")
    assert server.hits["GET /v1/ledger/checkpoints"] == 1


def test_connecting_to_claros_times_out_soon() -> None:
    with Client("http://127.0.0.1:9", "ck_x", timeout=120) as client:
        assert client.http.timeout.connect == 10 and client.http.timeout.read == 120


# --- 6. --save and the saved sign-in replace files, nothing else ---------------------------
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_verify_save_refuses_what_is_not_a_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "saved.json"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    done = claros("verify", "--export", str(VALID), "--save", str(target))
    refused(done, f"--save: {target} is a {kind}, not a file")
    assert done.stdout == ""  # refused before verifying anything
    assert (stat.S_ISFIFO if kind == "fifo" else stat.S_ISDIR)(target.lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["saved.json"]


def test_verify_save_through_a_link_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    done = claros("verify", "--export", str(VALID), "--save", str(link))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and json.loads(real.read_text())["format"] == "claros-checkpoints/1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_login_refuses_a_credentials_path_that_is_not_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "claros" / "credentials.json"
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    # Refused before asking Claros for a code: nobody approves a key that cannot be kept.
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = claros("login", "--url", "http://127.0.0.1:9", env=env)
    refused(done, f"claros login: cannot save the key: {path} is a fifo, not a file")
    assert stat.S_ISFIFO(path.lstat().st_mode)
    with pytest.raises(OSError, match="is a fifo"):
        save_credentials({"url": "http://x", "key": "ck_1"}, path)
    assert [p.name for p in path.parent.iterdir()] == ["credentials.json"]


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o640)
    write_file(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    with pytest.raises(FileProblem, match="cannot write"):
        write_file(tmp_path / "missing" / "out.json", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


# --- and a bug: one line, never a traceback ------------------------------------------------
def test_an_unexpected_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from claros_guard import cli, verify

    def broken(args: Any) -> int:
        raise RuntimeError("a bug\nover two lines")

    monkeypatch.setattr(verify, "run", broken)
    monkeypatch.delenv("CLAROS_LOG", raising=False)
    assert cli.main(["verify"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "claros verify: unexpected error: RuntimeError: a bug over two lines "
        "(CLAROS_LOG=DEBUG shows where)\n"
    )
