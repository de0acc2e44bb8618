"""docs/deploy.md's cost table is the arithmetic of docs/cost.json's inputs: recomputed
here line by line, so the doc cannot drift from its inputs; and the inputs' DynamoDB units
are what the stack spends, measured again."""

from __future__ import annotations

import json
import re

import pytest

from bench import capacity
from bench.cost import DOC, INPUTS, current, render, rows


def test_the_doc_table_is_what_its_inputs_give() -> None:
    data = json.loads(INPUTS.read_text())
    assert current() == render(data), "run `python -m bench.cost`"


def test_the_total_is_the_sum_of_the_lines_and_the_inputs_are_dated() -> None:
    data = json.loads(INPUTS.read_text())
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["priced_on"])
    table = current()
    cents = [
        round(float(c.replace(",", "")) * 100) for c in re.findall(r"\| \$([\d,.]+) \|", table)
    ]
    [total] = re.findall(r"\*\*\$([\d,.]+)\*\*", table)
    assert sum(cents) == round(float(total.replace(",", "")) * 100)
    # Two entries per check (the check and its outcome), one checkpoint per 100 entries.
    a = data["assumptions"]
    kms = dict((what, dollars) for what, _, dollars in rows(data))["KMS signatures"]
    checkpoints = data["checks"] * a["entries_per_check"] / a["checkpoint_every"]
    assert kms == checkpoints / 10_000 * data["prices"]["kms_sign_per_10000"]
    assert "20,000 checkpoints" in table
    assert {"Authorizer", "X-Ray"} <= {what for what, _, _ in rows(data)}
    assert "Idempotency-Key rows" in table and DOC.name == "deploy.md"


def test_the_per_request_table_says_what_cost_json_measured() -> None:
    """The per-request table above the cost table is written by hand (its "what" is prose):
    its units and request counts are cost.json's."""
    data = json.loads(INPUTS.read_text())
    a, m = data["assumptions"], data["measured"]
    calls = m["calls_per_request"]
    expected = {
        "check": (a["check_wru"], a["check_rru"], calls["check"]),
        "outcome": (a["outcome_wru"], a["outcome_rru"], calls["outcome"]),
        "the outcome's Idempotency-Key": (
            a["idempotency_wru_per_check"],
            a["idempotency_rru_per_check"],
            round(calls["outcome_keyed"] - calls["outcome"], 2),
        ),
        "checkpoint, per 100 entries": (
            a["checkpoint_wru"], a["checkpoint_rru"], calls["checkpoint_per_100_entries"]
        ),
        "authorizer call": (0, a["authorizer_rru"], calls["authorizer"]),
        "schedule tick": (m["schedule_tick_wru"], a["schedule_tick_rru"], calls["schedule_tick"]),
    }  # fmt: skip
    table = DOC.read_text().split("| request | WRU | RRU | DynamoDB requests | what |")[1]
    found = {
        name: tuple(float(x) for x in cells)
        for name, *cells in re.findall(
            r"^\| ([^|]+?) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", table.split("\n\n")[0], re.M
        )
    }
    assert found == {name: tuple(float(x) for x in v) for name, v in expected.items()}


@pytest.mark.slow
def test_the_units_in_cost_json_are_what_the_stack_spends_now() -> None:
    """The stack's request paths run again in moto (bench/capacity.py, seeded: the same
    bytes every run): a change to what a check, an outcome, an Idempotency-Key, a
    checkpoint or the authorizer reads or writes fails here until docs/cost.json (and so
    the table) is measured again."""
    data = json.loads(INPUTS.read_text())
    fresh = capacity.measure()
    stored = {key: data["assumptions"][key] for key in capacity.UNIT_KEYS}
    assert stored == fresh["units"], "run `python -m bench.capacity --write`"
    assert data["measured"] == fresh["measured"], "run `python -m bench.capacity --write`"
