"""Two hook processes at once lose an ask the person then approves (THREATS.md §2, §6).

Claude Code runs the ``PreToolUse`` hooks of parallel tool calls at the same time, each a
process of its own. A hook keeps the asks it is waiting on in ``hook-asks.json`` (in the
private peer directory) between runs, so that calling the tool again after the approval
finds the approval. Each process read the file when it started and wrote its own view back
whole when it ended (``O_TRUNC``, in place): a hook that started before another and ended
after it wiped out the other's ask, and a hook killed mid-write left half a file, read as
no asks at all. The call the person approved was then asked again, as if never approved.

Each hook now changes only its own asks: under a lock, it reads the file again, applies
what it added and removed, and replaces the file whole (a temporary file, then a rename).

Seen to fail on the old code: the retried call was answered ``Waiting for approval``
(a second ask) instead of going through on the approval given.
"""

# ruff: noqa: F811 - the tests take the guard tests' fixtures, imported below, by name

from __future__ import annotations

import errno
import json
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros_guard.hooks import _load_asks, _save_asks
from tests.guard.conftest import (  # noqa: F401 - the fixtures these tests use
    Workspace,
    anyio_backend,
    claros,
    workspace,
)
from tests.guard.test_hooks import decision, hook, pre
from tests.security.faults import KeyDirFault

ASKS = {
    "id": "deploys",
    "app": "claude-code",
    "tools": ["Bash"],
    "when": "'deploy' in command",
    "response": "ask",
    "owners": ["dana@example.com"],
}


def _answer(ws: Workspace, ask_id: str, verdict: str) -> None:
    with httpx.Client(base_url=ws.claros.url, timeout=30) as http:
        done = http.post(
            f"/api/asks/{ask_id}/answer",
            json={"decision": verdict},
            headers={"Authorization": f"Bearer {ws.admin}"},
        )
    assert done.status_code == 200, done.text


def _asks_made(ws: Workspace, count: int) -> list[dict[str, Any]]:
    """The checks answered ``ask``, once there are ``count`` of them (bounded wait)."""
    deadline = time.monotonic() + 60
    while True:
        found = [c for c in ws.records("check") if c.get("result") == "ask"]
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"{len(found)} asks, expected {count}"
        time.sleep(0.05)


@pytest.mark.anyio
async def test_a_hook_ending_after_another_keeps_the_others_ask(workspace: Workspace) -> None:
    ws = workspace
    ws.push(rules=[ASKS])
    first = pre("Bash", {"command": "make deploy-a"}, "ta")
    second = pre("Bash", {"command": "make deploy-b"}, "tb")
    # The first hook starts and waits on its ask (as long as Claude Code lets it).
    event_file = ws.log.parent / "first-event.json"
    event_file.write_text(json.dumps(first))
    with event_file.open("rb") as stdin:
        waiting = subprocess.Popen(
            [sys.executable, "-m", "claros_guard.cli", "hook", "pre"],
            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**ws.env, "CLAROS_ASK_WAIT": "120"},
        )  # fmt: skip
    try:
        (ask_a,) = _asks_made(ws, 1)
        # Meanwhile the parallel call's hook runs whole: its ask is kept for the retry.
        told = decision(await hook(ws, "pre", second))
        assert told[0] == "deny" and "Waiting for approval" in (told[1] or ""), told
        # The first ends after it (its person said no).
        _answer(ws, ask_a["ask_id"], "deny")
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait(timeout=30)
    assert waiting.returncode == 0, err.decode()
    assert decision(json.loads(out))[0] == "deny"
    ask_b = next(c for c in _asks_made(ws, 2) if c["ask_id"] != ask_a["ask_id"])
    _answer(ws, ask_b["ask_id"], "approve")
    retried = await hook(ws, "pre", second)
    assert decision(retried)[0] is None, f"the approved call was not let through: {retried}"
    results = [c["result"] for c in ws.records("check")]
    assert results == ["ask", "ask", "allow"], results
    kept = ws.peers / "hook-asks.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert not [p.name for p in ws.peers.iterdir() if p.name.endswith(".tmp")]


def test_a_write_that_fails_half_way_leaves_the_asks_kept_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills (or the hook is killed) as a hook writes the file: the asks it held
    before are still there to read, never an empty or half file read as "no asks"."""
    kept = tmp_path / "hook-asks.json"
    ask = {"ask_id": "ask_1", "routed_to": ["dana@example.com"], "messages": [],
           "expires_at": 10**13 * 9}  # fmt: skip
    kept.write_text(json.dumps({"call-1": ask}))
    kept.chmod(0o600)
    disk = KeyDirFault(tmp_path, monkeypatch)
    disk.error = errno.ENOSPC  # every write to a file made there now fails, as on a full disk
    _save_asks(kept, {"call-1": ask, "call-2": {**ask, "ask_id": "ask_2"}})
    assert disk.hits, "the write was not made"
    disk.error = None
    assert _load_asks(kept) == {"call-1": ask}
