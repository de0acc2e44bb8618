"""evidence.txt's defaults and fixed texts, as a `claros serve` started with no settings
serves them: a checkpoint every 100 entries (``CLAROS_LEDGER_CHECKPOINT_EVERY``), approvals
"too fast" under 10 seconds (``CLAROS_FAST_APPROVAL_S``), 90-day windows, and the AIUC-1
pack's controls with the titles and gaps the page's table states. The in-process servers
of the other tests set their own settings (a checkpoint every 5 entries): these are the
values a user gets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

WORKSPACE = "acme"
PERSON = "dana@acme.test"

# evidence.txt, "AIUC-1 evidence pack": each control's title and the gaps it states.
# "Rules with no owner" (E004) and "no retention set" (E015) are stated when they hold.
CONTROLS = {
    "D003": ("Restrict unsafe tool calls", [
        "No native rate limits or cumulative caps",
        "MCP server and tool versions not recorded",
        "No record of a person reviewing the log",
    ]),
    "B006": ("Prevent unauthorized agent actions", [
        "Access is per workspace key",
        "No alerting beyond asks",
        "Agents without the guard are unseen",
    ]),
    "E004": ("Assign accountability", ["Rule changes chained, not signed by the approver"]),
    "E015": ("Log AI system activity", [
        "No cryptographic per-agent identity",
        "Sub-agent delegation not recorded",
        "Anchoring is up to you",
    ]),
    "C007": ("Flag high-risk outputs", ["No review SLA"]),
    "C009": ("Real-time intervention", ["No control to pause an agent"]),
}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _clean_env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAROS_")}
    return {**env, "CLAROS_LOG": "WARNING", **more}


def _key(data: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "claros.auth", "create", "--data", str(data),
         "--workspace", WORKSPACE, *args],
        env=_clean_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@dataclass
class Served:
    http: httpx.Client
    admin: dict[str, str]
    agent: dict[str, str]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Served]:
    """``claros serve`` as a subprocess with no CLAROS_* setting but its data directory."""
    yield from _serve(tmp_path, {})


@pytest.fixture
def serve_fast_25(tmp_path: Path) -> Iterator[Served]:
    """The same, with ``CLAROS_FAST_APPROVAL_S=25``."""
    yield from _serve(tmp_path, {"CLAROS_FAST_APPROVAL_S": "25"})


def _serve(tmp_path: Path, env: dict[str, str]) -> Iterator[Served]:
    data = tmp_path / "data"
    admin = _key(data, "--kind", "admin", "--person", PERSON)
    agent = _key(data, "--kind", "agent", "--person", PERSON)
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claros_guard.cli", "serve", "--data", str(data),
             "--port", str(port)],
            env=_clean_env(**env), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                deadline = time.monotonic() + 60
                while True:
                    assert proc.poll() is None, log.read_text()
                    try:
                        http.get("/v1/me")
                        break
                    except httpx.HTTPError:
                        assert time.monotonic() < deadline, "claros serve did not start"
                        time.sleep(0.1)
                yield Served(
                    http,
                    {"Authorization": f"Bearer {admin}"},
                    {"Authorization": f"Bearer {agent}"},
                )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert "Traceback" not in log.read_text()


def _head(served: Served) -> int:
    answer = served.http.get("/api/evidence/stream?since=0&limit=10000", headers=served.admin)
    assert answer.status_code == 200, answer.text
    return int(answer.headers["x-claros-next"])


def _checkpoint_seqs(served: Served) -> list[int]:
    answer = served.http.get("/v1/ledger/checkpoints", headers=served.agent)
    assert answer.status_code == 200, answer.text
    return [int(cp["seq"]) for cp in answer.json()["checkpoints"]]


def test_a_checkpoint_is_signed_every_100_entries_by_default(serve: Served) -> None:
    """evidence.txt: "Every 100 entries (CLAROS_LEDGER_CHECKPOINT_EVERY) ... Claros signs":
    no checkpoint before seq 100, one at seq 100, in the request that reached it."""
    body = {"app": "shop", "tool": "refund_create", "arguments": {"amount": 5},
            "agent": {"name": "claude-code"}}  # fmt: skip
    head = _head(serve)
    assert head < 100
    while head < 99:
        answer = serve.http.post("/v1/check", json=body, headers=serve.agent)
        assert answer.status_code == 200, answer.text
        head = int(answer.json()["seq"])
    assert _checkpoint_seqs(serve) == []
    answer = serve.http.post("/v1/check", json=body, headers=serve.agent)
    assert answer.json()["seq"] == 100
    assert _checkpoint_seqs(serve) == [100]


def test_windows_and_fast_approvals_default_to_the_pages_values(serve: Served) -> None:
    """``/api/evidence/oversight?days=90&fast_seconds=10`` and ``aiuc1?days=90``: the
    values the page writes are what a request without them gets."""
    oversight = serve.http.get("/api/evidence/oversight", headers=serve.admin)
    assert oversight.status_code == 200, oversight.text
    assert (oversight.json()["days"], oversight.json()["fast_seconds"]) == (90, 10)
    pack = serve.http.get("/api/evidence/aiuc1", headers=serve.admin)
    assert pack.status_code == 200, pack.text
    assert pack.json()["days"] == 90


def test_fast_approval_seconds_come_from_the_environment(serve_fast_25: Served) -> None:
    """evidence.txt: "fast_seconds (default 10, CLAROS_FAST_APPROVAL_S)"."""
    served = serve_fast_25
    oversight = served.http.get("/api/evidence/oversight", headers=served.admin).json()
    assert oversight["fast_seconds"] == 25
    asked = served.http.get("/api/evidence/oversight?fast_seconds=3", headers=served.admin)
    assert asked.json()["fast_seconds"] == 3


def test_the_aiuc1_pack_states_the_pages_controls_titles_and_gaps(serve: Served) -> None:
    rule = {"id": "refund-cap", "workflow_id": "refunds", "app": "shop",
            "tools": ["refund_create"], "title": "Refunds over 100 stop",
            "when": "amount > 100", "response": "stop", "message": "too big"}  # fmt: skip
    put = serve.http.put("/api/rules/refund-cap", json={"rule": rule}, headers=serve.admin)
    assert put.status_code in (200, 201), put.text
    pack = serve.http.get("/api/evidence/aiuc1", headers=serve.admin).json()
    assert pack["framework"] == "AIUC-1, Q4 2026 release"
    assert pack["note"] == "Evidence for an audit, not a certification."
    controls = pack["controls"]
    assert list(controls) == list(CONTROLS)
    for control, (title, gaps) in CONTROLS.items():
        assert controls[control]["title"] == title, control
        stated = [g for g in controls[control]["gaps"] if not g.startswith("Coverage unknown")]
        if control == "E004":  # a rule without an owner is named
            assert stated == ["Rules with no owner: refund-cap", *gaps]
        elif control == "E015":  # no retention is set yet
            assert stated == [*gaps, "No retention set"]
        else:
            assert stated == gaps, control
    kept = serve.http.put("/api/evidence/retention", json={"days": 365}, headers=serve.admin)
    assert kept.status_code == 200, kept.text
    after = serve.http.get("/api/evidence/aiuc1", headers=serve.admin).json()["controls"]
    assert after["E015"]["gaps"] == CONTROLS["E015"][1]
