"""Deciding a call against 100 rules with a 2 KB argument body, in process, as a ratio to
recording it (the SQLite ledger append of its check row).

Target (issue "Checks that decide"): deciding costs under a tenth of recording.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import interleaved, report
from claros.canonical import canonical
from claros.rules.amounts import find_amount
from claros.rules.decide import decide
from claros.rules.model import RuleSpec, rule_hash
from claros.store.sqlite import SqliteStore

N = 2000

WHENS = [
    "amount > {n}",
    "amount > order.total / 2 and customer.tier != 'gold'",
    "items[0].qty * items[0].unit_price >= {n}",
    "currency in ['USD', 'EUR'] and amount - discount > {n}",
    "not (status == 'draft') or amount > {n}",
]


def rules(n: int = 100) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        spec = RuleSpec(
            id=f"rule-{i:03d}",
            workflow_id="refunds",
            app="shop",
            tools=["refund_create", "order_cancel"],
            title=f"rule {i}",
            when=WHENS[i % len(WHENS)].format(n=1000 + i * 10),
            response=("nudge", "ask", "stop")[i % 3],  # type: ignore[arg-type]
            owners=["dana@example.com"],
            message=f"rule {i} fired",
        )
        written = spec.written()
        out.append({"id": spec.id, "version": 1, "hash": rule_hash(written), "rule": written,
                    "confirm": {"made_by": "manual", "confirmed_by": "a@b.c",
                                "confirmed_at": 1}, "status": "active"})  # fmt: skip
    return out


def arguments() -> dict[str, Any]:
    args: dict[str, Any] = {
        "order": {"id": "SO-1187", "total": 2400, "lines": 4},
        "customer": {"id": "C-7", "tier": "silver", "email": "c7@example.com"},
        "amount": "1500.00",
        "currency": "EUR",
        "discount": 20,
        "status": "submitted",
        "items": [{"sku": f"SKU-{i}", "qty": i + 1, "unit_price": 12.5 * (i + 1),
                   "description": "a plain cotton shirt, washed"} for i in range(14)],
    }  # fmt: skip
    size = len(json.dumps(args))
    args["note"] = "x" * max(0, 2048 - size - 12)
    return args


def main(n: int = N) -> list[dict[str, Any]]:
    ruleset, args = rules(), arguments()
    assert 1900 <= len(json.dumps(args)) <= 2200
    row = {"check_id": "x", "app": "shop", "tool": "refund_create", "arguments": args,
           "rules": decide(ruleset, "shop", "refund_create", args).rules}  # fmt: skip
    print(f"\n(argument body {len(json.dumps(args))} bytes, row {len(canonical(row))} bytes)")

    def deciding() -> None:
        for _ in range(n):
            decide(ruleset, "shop", "refund_create", args)
            find_amount(args)

    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db")
        counter = iter(range(10**9))

        def recording() -> None:
            for _ in range(n):
                store.append("bench", "check", f"chk_{next(counter)}", row)

        base, (dec,) = interleaved(
            ("record (SQLite ledger append)", recording),
            [("decide: 100 rules, 2 KB arguments", deciding)],
            items=n,
            repeat=3,
        )
        store.close()
    return [report("Deciding vs recording a check", [dec], base)]


if __name__ == "__main__":
    main()
