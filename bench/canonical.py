"""Canonical JSON on real check rows with 20 rules, as a ratio to
``json.dumps(sort_keys=True)`` of the same rows, interleaved and repeated in one run.

Target (issue "A busy workspace"): canonical JSON within 1.5x of json.dumps(sort_keys=True).
``canonical_bytes`` (orjson on the settled row: what the ledger hashes, once per append) and
the reference writer (the token-at-a-time one the fast paths are tested against) are shown
too.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from bench.decide import arguments, rules
from bench.harness import interleaved, report
from claros import jsonutil
from claros.canonical import canonical, canonical_bytes, reference_canonical
from claros.rules.decide import decide

N = 2000


def check_row(i: int) -> dict[str, Any]:
    """A check row as Claros records it: the call, the agent, and the 20 rules it ran."""
    # Arguments arrive as a request body, parsed as Claros parses it (numbers as Decimal).
    args = jsonutil.loads(json.dumps({**arguments(), "amount": f"{1500 + i}.00"}))
    decided = decide(rules(20), "shop", "refund_create", args)
    return {
        "check_id": f"chk_{i:016x}",
        "workspace": "bench",
        "ts": 1_796_000_000_000 + i,
        "app": "shop",
        "tool": "refund_create",
        "arguments": args,
        "agent": {
            "name": "claude-code",
            "model": "claude",
            "session": "s-1",
            "call_id": f"c-{i}",
            "via": {"guard": "claros-guard", "version": "0.1.0"},
        },  # fmt: skip
        "on_behalf_of": "dana@example.com",
        "obo_source": "agent_key",
        "result": decided.result,
        "rules": decided.rules,
        "severity": "medium",
        "amount": Decimal("1500.00") + i,
        "currency": "EUR",
        "shadow_result": None,
        "not_judged": [],
        "approval": {},
    }


def main(n: int = N) -> list[dict[str, Any]]:
    rows = [check_row(i) for i in range(20)]
    print(f"\n(row: {len(canonical(rows[0])):,} bytes canonical, {len(rows[0]['rules'])} rules)")

    def plain() -> None:
        for i in range(n):
            json.dumps(rows[i % 20], sort_keys=True, default=str)

    def fast() -> None:
        for i in range(n):
            canonical(rows[i % 20])

    def hashed() -> None:
        for i in range(n):
            canonical_bytes(rows[i % 20])

    def reference() -> None:
        for i in range(n):
            reference_canonical(rows[i % 20])

    base, subjects = interleaved(
        ("json.dumps(sort_keys=True)", plain),
        [
            ("canonical (Claros, text)", fast),
            ("canonical_bytes (what the ledger hashes)", hashed),
            ("reference writer", reference),
        ],
        items=n,
    )
    return [report("Canonical JSON of a 20-rule check row", subjects, base)]


if __name__ == "__main__":
    main()
