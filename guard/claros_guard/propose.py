"""``claros mappings propose APP TOOL [--write FILE]``: ask Claros for a mapping draft.

Claros answers with a draft in the saved format, a reason and a confidence for each part,
and the fields no part provides. The draft is printed (or written to FILE) as a mappings
file with the reasons as comments and the proposal's id; ``claros mappings push FILE``
then saves it, after your edits, as a version whose confirm record says it was proposed.
Exit 0 with a draft, 2 on usage, file or connection errors and when Claros refuses the
request (an unknown app or tool: one line, Claros's reason).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from claros_guard.client import ApiError, Client, ClientError

__all__ = ["draft_file", "propose"]


def draft_file(proposal: dict[str, Any]) -> str:
    """The proposal as a file ``claros mappings push`` takes."""
    mapping = proposal["mapping"]
    lines = [
        f"# Proposed mapping for {mapping['app']} {mapping['tool']}, by "
        f"{proposal.get('proposer')} (proposal {proposal.get('id')}).",
        "# Edit it, then save it with: claros mappings push THIS_FILE",
    ]
    discarded = proposal.get("discarded")
    if isinstance(discarded, dict):
        lines.append(f"# The model's draft was discarded: {discarded.get('reason')}")
    if proposal.get("reason"):
        lines.append(f"# {proposal['reason']}")
    for part in proposal.get("parts") or []:
        confidence = round(float(part.get("confidence", 0)) * 100)
        lines.append(f"# {part.get('part')} ({confidence}%): {part.get('reason')}")
    for item in proposal.get("unplaced") or []:
        lines.append(f"# not placed: {item.get('field')}: {item.get('reason')}")
    body = yaml.safe_dump(
        {"mappings": [{**mapping, "proposal": proposal.get("id")}]},
        sort_keys=False,
        allow_unicode=True,
    )
    return "\n".join(lines) + "\n" + body


def _write(path: str, text: str) -> None:
    target = Path(path)
    if target.exists():
        raise ClientError(f"{path} exists; give another file name")
    # Written whole or not at all: a temporary file in the same folder, then renamed.
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        Path(tmp).replace(target)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        raise


def propose(client: Client, app: str, tool: str, write: str | None) -> int:
    try:
        answer = client.json("POST", "/api/mappings/proposals", json={"app": app, "tool": tool})
    except ApiError as exc:
        print(f"claros mappings propose: {app} {tool}: {exc.message}", file=sys.stderr)
        return 2
    if not isinstance(answer, dict) or not isinstance(answer.get("mapping"), dict):
        raise client.unlike("POST /api/mappings/proposals gave no mapping", answer)
    text = draft_file(answer)
    if write is None:
        sys.stdout.write(text)
        return 0
    try:
        _write(write, text)
    except OSError as exc:
        raise ClientError(f"cannot write {write}: {exc.strerror or exc}") from None
    print(f"OK: proposal {answer.get('id')} for {app} {tool} written to {write}")
    return 0
