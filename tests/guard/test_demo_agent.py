"""``make run``: the demo serves Claros, pushes the example rules and mappings, and runs the
scripted agent once through the guard, printing each decision."""

from __future__ import annotations

import importlib.util
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType


def _load_agent() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "examples" / "agent.py"
    spec = importlib.util.spec_from_file_location("example_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


agent = _load_agent()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> str:
    """stdout up to the line holding ``marker`` (bounded; the demo never ends by itself)."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if selector.select(timeout=deadline - time.monotonic()):
            line = proc.stdout.readline()
            out.append(line)
            if marker in line:
                break
    return "".join(out)


def test_make_run_drives_the_example_agent_through_the_guard(tmp_path: Path) -> None:
    peers = tempfile.mkdtemp(prefix="cd")
    env = {
        **os.environ,
        "CLAROS_PORT": str(_free_port()),
        "CLAROS_DATA": str(tmp_path / "data"),
        "CLAROS_PEER_DIR": peers,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "claros.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        out = _lines_until(proc, "decisions as expected", timeout=90)
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
        shutil.rmtree(peers, ignore_errors=True)
    assert "Ctrl-C stops it." in out and "Try:" in out
    table = out.split("what happened\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert all(len(line) <= 2 + agent.WIDTH for line in table), table  # the demo indents 2
    out = " ".join(out.split())  # the table wraps long explanations onto more lines
    assert "Pushed 9 rules and 3 mappings" in out
    assert "Judge of rules without `when`: the keyword judge (not a model" in out
    # The mapper: the proposal for the credit note is examples/mappings.yaml's.
    assert (
        "Claros proposed a mapping for accounting credit_note_create (claros-schema-proposer): "
        "the same as examples/mappings.yaml." in out
    ), out
    # The judge: a rule without `when` decided by the keyword judge.
    assert "the judge: a rule without `when`, decided on the reason's words" in out
    assert 'keyword judge (not a model): "chargeback" found in facts.reason' in out or (
        "Blocked by Claros rule refund-dispute" in out
    ), out
    for decision in ("read", "allow", "nudge", "stop", "ask→ran", "ask→no"):
        assert f" {decision} " in out, out
    assert "lookup on another server" in out
    assert "money written as text is still a number" in out
    assert "its total is unknown, so the rule fires (on_unknown)" in out
    assert "15 of 15 decisions as expected." in out, out


ID = "ask_01JD9Z3W7QXK4N2M8R5T6V0B1C"  # one word longer than the column: kept whole


def test_table_rows_wrap_at_word_boundaries_and_never_cut_an_id() -> None:
    what = (
        "a refund above the limit asks a person first. Waiting for approval "
        + ID
        + (" (open it in the web app at /app/asks, or answer with the approver's key)")
    )
    lines = agent.table_row("shop", "refund_create", "ask", what, width=70)
    assert len(lines) > 1
    assert all(len(line) <= 70 or ID in line for line in lines), lines
    indent = 11 + 1 + 21 + 1 + 9 + 1  # app, tool, decision, then what happened
    assert all(line[:indent].strip() == "" for line in lines[1:]), lines
    # Put back together, every word is there, whole and in order.
    words = [line[indent:] for line in lines[1:]]
    assert " ".join([lines[0][indent:], *words]).split() == what.split()
    assert ID in "".join(lines)


def test_table_row_keeps_a_word_longer_than_the_column_whole() -> None:
    lines = agent.table_row("shop", "order_read", "read", ID * 3, width=60)
    assert lines == [f"{'shop':<11} {'order_read':<21} {'read':<9} {ID * 3}"]
    assert agent.table_row("shop", "t", "read", "") == [f"{'shop':<11} {'t':<21} {'read':<9} "]


def test_shorten_cuts_after_a_whole_word_with_an_ellipsis() -> None:
    assert agent.shorten("order 1187:\n  two   reams", 70) == "order 1187: two reams"
    cut = agent.shorten("order 1187 for Acme Paper, customer " + ID + " and more", 40)
    assert cut == "order 1187 for Acme Paper, customer …"
    assert agent.shorten(ID + " tail", 10) == ID + " …"  # a long id is never broken
