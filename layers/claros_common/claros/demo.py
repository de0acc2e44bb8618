"""``make run``: a demo workspace on the local server, its keys, and what to try.

The keys are made once and kept in ``<data>/demo-keys.json`` (mode 0600), since Claros
itself stores only their hashes.

Then the example agent (``examples/agent.py``) runs once through the guard: it starts the
two example MCP servers behind ``claros guard``, pushes ``examples/rules.yaml`` and
``examples/mappings.yaml`` and prints what Claros decided for each call, while Claros keeps
serving. ``CLAROS_DEMO_AGENT=0`` leaves it out. Dana's asks are answered with her person
key (her own sign-in key), never with a key the agent holds.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType

from claros.auth import create_key, member_role
from claros.config import ConfigError, Settings
from claros.local import LocalServer
from claros.people import Actor, add_person, make_key
from claros.wiring import build_services

__all__ = ["main"]

WORKSPACE = "demo"
ADMIN = "admin@example.com"
PERSON = "dana@example.com"
DEMO = "demo (python -m claros.demo)"  # who the demo's members were added by


def _read_keys(path: Path) -> dict[str, str] | None:
    """The kept keys ({} when there are none); None when the file is there but damaged
    (cut short by a crash of an older version, edited): it is then kept aside as
    ``demo-keys.json.damaged`` for a look, and new keys are made."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
        return {str(k): v for k, v in data.items()}
    path.replace(path.with_name(path.name + ".damaged"))
    return None


def _write_keys(path: Path, keys: dict[str, str]) -> None:
    """Written whole or not at all, 0600 from the start: a temporary file, fsync, a
    rename, fsync of the directory. A crash leaves the old file or the new one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(keys, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        temp.replace(path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _keys(settings: Settings) -> dict[str, str]:
    path = Path(settings.data_dir) / "demo-keys.json"
    found = _read_keys(path)
    keys = found or {}
    if "person" in keys:
        return keys
    services = build_services(settings)
    try:
        store = services.store
        if not keys:
            # Each member joins in one transaction with their member_role entry, as an
            # admin adds them (claros.people): the ledger shows who could act when.
            actor = Actor(WORKSPACE, DEMO)
            made_before = member_role(store, WORKSPACE, PERSON) is not None
            if made_before or found is None:
                # An earlier run made the members and was stopped before it kept their
                # keys, or the file was damaged: the members stay, with new keys.
                print(
                    f"claros demo: {path} was {'damaged' if found is None else 'missing'} "
                    "for a workspace made before: new keys are made (the old ones still "
                    "work wherever they are kept)",
                    file=sys.stderr,
                    flush=True,
                )
            keys = {"admin": make_key(services, actor, "admin", person=ADMIN)[1]}
            if made_before:
                keys["person"] = make_key(services, actor, "person", person=PERSON)[1]
            else:
                # Dana joins: her own sign-in key (she answers her agent's asks with it),
                # then her agent's key.
                keys["person"] = str(add_person(services, actor, PERSON)["key"])
            keys["agent"] = make_key(services, actor, "agent", person=PERSON)[1]
            keys["service"] = make_key(services, actor, "service")[1]
            keys["audit"] = make_key(services, actor, "audit", person=ADMIN)[1]
        else:  # demo keys kept from before person keys existed
            keys["person"] = create_key(store, WORKSPACE, "person", person=PERSON)
    finally:
        services.close()
    _write_keys(path, keys)
    return keys


def _port() -> int:
    text = os.environ.get("CLAROS_PORT", "8787")
    if not (text.isascii() and text.isdigit() and 0 <= int(text) <= 65535):
        raise ConfigError(f"CLAROS_PORT must be a port number (0 to 65535), not {text!r}")
    return int(text)


def main() -> int:
    try:
        port = _port()
        # The demo turns the keyword judge on (a deterministic stand-in, not a model), so a
        # rule without `when` is decided; CLAROS_JUDGE=none shows it not judged instead.
        settings = Settings.from_env({"CLAROS_JUDGE": "keyword", **os.environ})
    except ConfigError as exc:
        print(f"claros demo: {exc}", file=sys.stderr)
        return 2
    Path(settings.data_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    keys = _keys(settings)
    services = build_services(settings)
    try:
        server = LocalServer(services, "127.0.0.1", port)
    except OSError as exc:
        print(f"cannot listen on 127.0.0.1:{port} ({exc}); set CLAROS_PORT", file=sys.stderr)
        return 2
    url = server.url
    print(
        f"""
Claros is running at {url}   (data in {settings.data_dir}, workspace "{WORKSPACE}")

Judge of rules without `when`: {_judge_line(settings)}

Keys (kept in {settings.data_dir}/demo-keys.json):
  admin   ({ADMIN})  {keys["admin"]}
  person  ({PERSON})  {keys["person"]}   (her sign-in key: /app)
  agent   ({PERSON})  {keys["agent"]}
  service (tied to nobody)     {keys["service"]}
  audit   (made by {ADMIN})  {keys["audit"]}

Try:{_path_hint()}
  export CLAROS_URL={url} CLAROS_KEY={keys["agent"]}
  curl -s -H "Authorization: Bearer $CLAROS_KEY" $CLAROS_URL/v1/check \\
       -d '{{"app":"payments","tool":"payment_create","arguments":{{"amount":"$120.00"}},
            "agent":{{"name":"curl","session":"s1","call_id":"c1"}}}}'
  curl -s -H "Authorization: Bearer $CLAROS_KEY" "$CLAROS_URL/v1/ledger/entries?since=0"
  curl -s -X POST -H "Authorization: Bearer {keys["admin"]}" $CLAROS_URL/v1/ledger/checkpoints
  curl -s -H "Authorization: Bearer {keys["admin"]}" $CLAROS_URL/api/evidence/verify
  {_verify_command()}

Ctrl-C stops it.
""",
        flush=True,
    )
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    agent = _example_agent(url, keys, settings.judge)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if agent is not None and agent.poll() is None:
            agent.terminate()
            try:
                agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                agent.kill()
        server.httpd.server_close()
        services.close()
    return 0


def _judge_line(settings: Settings) -> str:
    if settings.judge == "keyword":
        return "the keyword judge (not a model; CLAROS_JUDGE=none turns it off)"
    if settings.judge == "bedrock":
        return f"Amazon Bedrock, {settings.judge_model}"
    return "none (such rules answer by their on_unknown)"


def _path_hint() -> str:
    """The line that puts this install's `claros` on PATH, as printed (or nothing).

    Computed from the Python running the demo (make run's .venv), so the path is this
    checkout's wherever it was cloned; quoted for the shell when it needs to be.
    """
    bin_dir = Path(sys.executable).absolute().parent
    if not (bin_dir / "claros").exists():
        return ""
    return (
        f'\n  export PATH={shlex.quote(str(bin_dir))}:"$PATH"   # puts claros on PATH in this shell'
    )


def _verify_command() -> str:
    if _path_hint():
        return "claros verify   # the same check, on this machine (after the PATH line above)"
    return f"{shlex.quote(sys.executable)} -m claros_guard.cli verify   # the same, here"


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _example_agent(url: str, keys: dict[str, str], judge: str) -> subprocess.Popen[str] | None:
    """Run examples/agent.py once through the guard, printing its lines as they come."""
    script = Path(__file__).resolve().parents[3] / "examples" / "agent.py"
    if os.environ.get("CLAROS_DEMO_AGENT") == "0" or not script.exists():
        return None
    print("The example agent, through the guard (examples/agent.py):", flush=True)
    agent = subprocess.Popen(
        [sys.executable, str(script), "--url", url, "--key", keys["agent"],
         "--admin-key", keys["admin"], "--approver-key", keys["person"],
         "--judge", judge or "none"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

    def relay() -> None:
        assert agent.stdout is not None
        for line in agent.stdout:
            print(f"  {line}", end="", flush=True)
        code = agent.wait()
        if code == 0:
            print(f"The example agent is done; Claros keeps serving at {url}.", flush=True)
        else:
            print(f"The example agent stopped (exit {code}); Claros keeps serving.", flush=True)

    threading.Thread(target=relay, daemon=True).start()
    return agent


if __name__ == "__main__":
    raise SystemExit(main())
