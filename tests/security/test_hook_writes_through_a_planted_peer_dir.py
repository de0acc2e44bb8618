"""Another local user makes the hook overwrite the person's files (THREATS.md §2).

Without ``$XDG_RUNTIME_DIR`` (ssh sessions, containers, cron) the peer directory is
``/tmp/claros-<uid>``, which anyone may create first. The hook checked that directory
(``ensure_private_dir``), ignored the answer, and then read and wrote its remembered asks,
``hook-asks.json``, there anyway, opening it with ``O_CREAT | O_TRUNC`` and following a
symbolic link: a link planted in the other user's directory made every ``hook pre``
truncate and overwrite any file the person may write (``~/.bashrc``, a key), with JSON the
planter could then read.

Now the hook keeps no asks in a directory that is not the user's own (it says so on
stderr: the call is checked all the same, a retried ask is asked again), and never writes
through a link.

Seen to fail on the old code: ``assert '{"ask_1...' == 'the person's own file\\n'``: the file the
link named was overwritten with the hook's asks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guard.http_fakes import JSON, Answer, HttpFake, Request

NOBODY = 65534
MINE = "the person's own file\n"


class Unavailable(HttpFake):
    def respond(self, request: Request) -> Answer:
        if request.path.startswith("/v1/me"):
            return 200, JSON, b'{"kind": "agent", "workspace": "w", "person": "p@example.com"}'
        return 503, JSON, b'{"error": "unavailable", "message": "down for a moment"}'


@pytest.mark.skipif(os.getuid() != 0, reason="a directory of another user needs root")
def test_a_link_in_a_peer_directory_of_another_user_writes_nothing(tmp_path: Path) -> None:
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text(MINE)
    tmp = tmp_path / "tmp"  # the machine's /tmp: anyone may make a directory there
    tmp.mkdir(mode=0o1777)
    tmp.chmod(0o1777)
    planted = tmp / f"claros-{os.getuid()}"  # made first by another user
    planted.mkdir()
    (planted / "hook-asks.json").symlink_to(victim)
    planted.chmod(0o777)
    os.chown(planted, NOBODY, NOBODY)
    os.lchown(planted / "hook-asks.json", NOBODY, NOBODY)

    claros = Unavailable()
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("CLAROS_") and k != "XDG_RUNTIME_DIR"}  # fmt: skip
        env |= {"TMPDIR": str(tmp), "CLAROS_URL": claros.url, "CLAROS_KEY": "ck_agent",
                "CLAROS_STATE_DIR": str(tmp_path / "state"), "CLAROS_ASK_WAIT": "0",
                "XDG_CONFIG_HOME": str(tmp_path / "config")}  # fmt: skip
        event = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                 "tool_input": {"command": "make deploy"}, "tool_use_id": "t1"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "claros_guard.cli", "hook", "pre"],
            input=json.dumps(event), capture_output=True, text=True, env=env, timeout=60,
            check=False,
        )  # fmt: skip
    finally:
        claros.stop()
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"  # still fail-closed
    assert victim.read_text() == MINE
    assert sorted(p.name for p in planted.iterdir()) == ["hook-asks.json"]  # nothing added
    assert f"{planted} belongs to another user" in done.stderr, done.stderr
