"""A scripted agent: it drives two guarded example servers with the real MCP SDK client
and prints what Claros decided for each call.

    python examples/agent.py [--url URL] [--key KEY] [--admin-key KEY] [--approver-key KEY]

* ``--key`` (default ``$CLAROS_KEY``) is the agent's key; the guards use it.
* ``--admin-key`` pushes ``examples/rules.yaml`` and ``examples/mappings.yaml`` first
  (once the guards have registered their tools, which mappings need).
* ``--approver-key`` answers the questions Claros asks, as a person would in Claros: it
  approves the first and denies the second. It is a person's key (their person key, or an
  admin key), never one the agent holds: Claros refuses agent keys there. Without it a
  question stays open and the call comes back "waiting for approval".

Each server runs behind its own guard (``claros guard --app shop -- python
examples/shop_server.py``), as an MCP client such as Claude Code would start them.
Exit 0 when every decision was the one the script expects, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import yaml
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

HERE = Path(__file__).resolve().parent
APPS = ("shop", "accounting")
# The table's columns: app, tool, decision, then what happened, wrapped onto as many lines
# as it needs so that no id or message is ever cut in the middle of a word.
COLUMNS = (11, 21, 9)
WIDTH = 110
READ_SUMMARY = 70  # what a read returned: its first words only (records can be long)


@dataclass
class Step:
    app: str
    tool: str
    arguments: dict[str, Any]
    expect: str  # read, allow, nudge, ask, stop
    # What it is when no judge decides rules without `when` (None: the same as expect).
    unjudged: str | None = None
    answer: str | None = None  # what the approver says to a question: approve, deny
    why: str = ""


STEPS = [
    Step("shop", "order_read", {"id": "1187"}, "read", why="a read passes straight through"),
    Step(
        "shop",
        "refund_create",
        {"order": "1188", "amount": 10},
        "allow",
        why="a small refund, no rule objects",
    ),
    Step(
        "shop",
        "refund_create",
        {"order": "1191", "amount": 20},
        "nudge",
        why="lookup: the customer is gold",
    ),
    Step(
        "shop",
        "refund_create",
        {"order": "1187", "amount": 150, "reason": "broken lamp"},
        "ask",
        answer="approve",
        why="fetch + derived: over half of the order",
    ),
    Step(
        "shop",
        "refund_create",
        {"order": "1187", "amount": 5},
        "stop",
        why="query lookup: a third refund this quarter",
    ),
    Step(
        "shop",
        "refund_create",
        {"order": "1188", "amount": 5, "reason": "the customer filed a chargeback"},
        "stop",
        unjudged="allow",
        why="the judge: a rule without `when`, decided on the reason's words",
    ),
    Step(
        "accounting",
        "invoice_submit",
        {"name": "ACC-PINV-0043"},
        "allow",
        why="a known supplier, a small invoice",
    ),
    Step(
        "accounting",
        "invoice_submit",
        {"name": "ACC-PINV-0045"},
        "nudge",
        why="query lookup: the supplier's first invoice",
    ),
    Step(
        "accounting",
        "invoice_submit",
        {"name": "ACC-PINV-0042"},
        "stop",
        why="fetch + derived: 12,000 net",
    ),
    Step(
        "accounting",
        "invoice_submit",
        {"name": "ACC-PINV-0044"},
        "ask",
        answer="deny",
        why="lookups: services over 500",
    ),
    Step(
        "accounting",
        "credit_note_create",
        {"order": "1188", "amount": 100},
        "stop",
        why="lookup on another server: more than the shop order's total",
    ),
    Step(
        "accounting",
        "credit_note_create",
        {"order": "1187", "amount": 20},
        "allow",
        why="lookup on another server: within the order's total",
    ),
    Step(
        "accounting",
        "credit_note_create",
        {"order": "1187", "amount": "EUR 900"},
        "stop",
        why="money written as text is still a number: more than the order's total",
    ),
    Step(
        "accounting",
        "credit_note_create",
        {"amount": 20},
        "stop",
        why="no order named: its total is unknown, so the rule fires (on_unknown)",
    ),
    Step(
        "accounting",
        "supplier_bank_update",
        {"name": "Acme Paper", "iban": "DE1234"},
        "stop",
        why="agents never change bank details",
    ),
]


@dataclass
class Outcome:
    decision: str
    detail: str
    answered: list[str] = field(default_factory=list)


def decision_of(result: CallToolResult, read: bool) -> Outcome:
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    first = texts[0] if texts else ""
    if result.is_error:
        if first.startswith("Blocked by Claros rule"):
            return Outcome("stop", first)
        if first.startswith(("Waiting for approval", "Not approved", "The question to")):
            return Outcome("ask", first)
        return Outcome("error", first)
    notes = [t for t in texts if t.startswith("Claros (")]
    if notes:
        return Outcome("nudge", notes[0])
    return Outcome("read" if read else "allow", shorten(first or "ok", READ_SUMMARY))


def shorten(text: str, width: int) -> str:
    """``text`` on one line, cut after its last whole word that fits, with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = flat[:width].rsplit(" ", 1)[0] if " " in flat[:width] else ""
    # One word longer than the width (an id, a URL) is kept whole rather than broken.
    return f"{cut or flat.split(' ', 1)[0]} …"


def table_row(app: str, tool: str, decision: str, what: str, width: int = WIDTH) -> list[str]:
    """One decision as table lines: ``what`` wraps at word boundaries, never mid-word."""
    a, b, c = COLUMNS
    head = f"{app:<{a}} {tool:<{b}} {decision:<{c}} "
    lines = textwrap.wrap(
        " ".join(what.split()),
        width=max(width - len(head), 20),
        break_long_words=False,  # ids, URLs and amounts stay whole
        break_on_hyphens=False,
    ) or [""]
    indent = " " * len(head)
    return [head + lines[0]] + [indent + line for line in lines[1:]]


def guard_params(app: str, env: dict[str, str], ask_wait: float) -> StdioServerParameters:
    server = str(HERE / f"{app}_server.py")
    args = [
        "-m",
        "claros_guard.cli",
        "guard",
        "--app",
        app,
        "--ask-wait",
        str(ask_wait),
        "--",
        sys.executable,
        server,
    ]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


async def wait_for_registration(http: httpx.AsyncClient, key: str) -> None:
    with anyio.fail_after(60):
        while True:
            answer = await http.get("/v1/apps", headers={"Authorization": f"Bearer {key}"})
            answer.raise_for_status()
            if set(APPS) <= {a["app"] for a in answer.json()["apps"]}:
                return
            await anyio.sleep(0.1)


async def push_examples(http: httpx.AsyncClient, admin_key: str) -> None:
    headers = {"Authorization": f"Bearer {admin_key}"}
    rules = yaml.safe_load((HERE / "rules.yaml").read_text())["rules"]
    mappings = yaml.safe_load((HERE / "mappings.yaml").read_text())["mappings"]
    for rule in rules:
        answer = await http.put(
            f"/api/rules/{rule['id']}", headers=headers, json={"rule": rule, "made_by": "manual"}
        )
        answer.raise_for_status()
    for mapping in mappings:
        answer = await http.put(
            f"/api/mappings/{mapping['app']}/{mapping['tool']}",
            headers=headers,
            json={"mapping": mapping},
        )
        answer.raise_for_status()
    print(f"Pushed {len(rules)} rules and {len(mappings)} mappings (examples/*.yaml).")


async def show_proposal(http: httpx.AsyncClient, admin_key: str, app: str, tool: str) -> bool:
    """What Claros proposes for one example tool, and whether it is examples/mappings.yaml's."""
    answer = await http.post(
        "/api/mappings/proposals",
        json={"app": app, "tool": tool},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    answer.raise_for_status()
    proposal = answer.json()
    mappings = yaml.safe_load((HERE / "mappings.yaml").read_text())["mappings"]
    written = next(m for m in mappings if (m["app"], m["tool"]) == (app, tool))
    same = proposal["mapping"] == written
    verdict = "the same as" if same else "NOT the same as"
    print(f"Claros proposed a mapping for {app} {tool} ({proposal['proposer']}): "
          f"{verdict} examples/mappings.yaml.")  # fmt: skip
    for part in proposal["parts"]:
        reason = shorten(part["reason"], WIDTH - 20)
        print(f"  {part['part']} ({round(part['confidence'] * 100)}%): {reason}")
    return bool(same)


def approver(
    http: httpx.AsyncClient, key: str | None, answer: str | None, outcome: Outcome
) -> Callable[[float, float | None, str | None], Awaitable[None]] | None:
    """A progress callback that answers the question named in the guard's progress."""
    if key is None or answer is None:
        return None
    done: set[str] = set()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        found = re.search(r"\(Claros ask (ask_\w+)\)", message or "")
        if found is None or found.group(1) in done:
            return
        ask_id = found.group(1)
        done.add(ask_id)
        reply = await http.post(
            f"/api/asks/{ask_id}/answer",
            json={"decision": answer},
            headers={"Authorization": f"Bearer {key}"},
        )
        verb = "approved" if answer == "approve" else "denied"
        outcome.answered.append(
            f"{verb} by the approver" if reply.is_success else f"answer refused: {reply.text[:80]}"
        )

    return on_progress


async def run(args: argparse.Namespace) -> int:
    env = {**os.environ, "CLAROS_URL": args.url, "CLAROS_KEY": args.key, "CLAROS_ASK_POLL": "0.2"}
    env.setdefault("CLAROS_LOG", "WARNING")
    failures = 0
    async with (
        httpx.AsyncClient(base_url=args.url, timeout=30) as http,
        Client(guard_params("shop", env, args.ask_wait)) as shop,
        Client(guard_params("accounting", env, args.ask_wait)) as accounting,
    ):
        clients = {"shop": shop, "accounting": accounting}
        await wait_for_registration(http, args.key)
        if args.admin_key:
            await push_examples(http, args.admin_key)
            failures += not await show_proposal(
                http, args.admin_key, "accounting", "credit_note_create"
            )
        print()
        print(table_row("app", "tool", "decision", "what happened")[0])
        for step in STEPS:
            outcome = Outcome("", "")
            callback = approver(http, args.approver_key, step.answer, outcome)
            result = await clients[step.app].call_tool(
                step.tool, step.arguments, progress_callback=callback
            )
            expect = step.expect if args.judge != "none" else (step.unjudged or step.expect)
            found = decision_of(result, expect == "read")
            decision = found.decision
            if outcome.answered:
                decision = f"ask→{'ran' if not result.is_error else 'no'}"
                found.detail = f"{outcome.answered[0]}: {found.detail}"
            ok = found.decision == expect
            if outcome.answered:  # approved: it ran; denied: it did not
                ok = result.is_error == (step.answer == "deny")
            failures += not ok
            mark = "" if ok else f"   <-- expected {expect}"
            what = f"{step.why}. {found.detail}{mark}"
            print("\n".join(table_row(step.app, step.tool, decision, what)), flush=True)
    print(f"\n{len(STEPS) - failures} of {len(STEPS)} decisions as expected.")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CLAROS_URL"))
    parser.add_argument("--key", default=os.environ.get("CLAROS_KEY"), help="the agent's key")
    parser.add_argument("--admin-key", help="push examples/rules.yaml and mappings.yaml first")
    parser.add_argument("--approver-key", help="answer Claros's questions (approve, then deny)")
    parser.add_argument("--ask-wait", type=float, default=15.0)
    parser.add_argument(
        "--judge",
        default="none",
        help="the server's CLAROS_JUDGE (keyword: rules without "
        "`when` are decided; none: they answer by on_unknown)",
    )
    args = parser.parse_args(argv)
    if not args.url or not args.key:
        parser.error("give --url and --key (or set CLAROS_URL and CLAROS_KEY)")
    return anyio.run(run, args)


if __name__ == "__main__":
    raise SystemExit(main())
