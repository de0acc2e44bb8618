"""Attack: leave out the list a lookup is keyed on, and the rule sees no items at all.

A mapping looks up the group of each item an order names (``key: items[].sku``, ``var:
item_groups``) and a rule stops orders with weapons (``'Weapons' in item_groups``). The
shop's ``order_create`` takes the quote's items when the call names none. The agent
orders quote Q-1 (a rifle) without ``items``: the lookup had no values and gave
``item_groups: []``, a known empty list, so the rule found no weapons and the rifle was
ordered. A list the key walks that is missing, null or not a list is not "no items": the
lookup's values are unknown, and the rule answers by its ``on_unknown`` (by default it
fires), as a lookup key with no value does (THREATS.md, 1: "Unknown never silently means
allow"). A call that names an empty list (``items: []``) still has no items.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from claros.mapping.facts import plan
from claros.mapping.model import MappingSpec
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered

QUOTES = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "quotes_shop.py")]
MAPPING: dict[str, Any] = {
    "app": "sales",
    "tool": "order_create",
    "lookups": [
        {
            "key": "items[].sku",
            "tool": "sku_read",
            "arguments": {"sku": "$"},
            "pick": "group",
            "var": "item_groups",
        }
    ],
}
NO_WEAPONS = {
    "id": "no-weapons",
    "app": "sales",
    "tools": ["order_create"],
    "when": "'Weapons' in item_groups",
    "response": "stop",
    "message": "Orders with weapons are placed by people.",
}


def ordered(ws: Workspace) -> list[Any]:
    return [c["arguments"]["items"] for c in ws.calls() if c["tool"] == "order_create"]


@pytest.mark.anyio
async def test_an_order_without_its_items_is_not_an_order_of_nothing(
    workspace: Workspace,
) -> None:
    ws = workspace
    async with Client(ws.guard("sales", QUOTES)) as agent:
        await wait_registered(ws, "sales", "order_create")
        ws.push(rules=[NO_WEAPONS], mappings=[MAPPING])
        sneaky = await agent.call_tool("order_create", {"quote": "Q-1"})
        assert ordered(ws) == [], f"ordered what the rule never saw: {ordered(ws)}"
        assert sneaky.is_error and "no-weapons" in text(sneaky), text(sneaky)
        named = await agent.call_tool("order_create", {"quote": "Q-1", "items": [{"sku": "W-1"}]})
        assert named.is_error and "no-weapons" in text(named), text(named)
        paper = await agent.call_tool("order_create", {"quote": "Q-1", "items": [{"sku": "P-1"}]})
        assert not paper.is_error, text(paper)
    assert ordered(ws) == [[{"sku": "P-1", "qty": 1}]]
    unknown, by_lookup, allowed = ws.records("check")
    assert unknown["rules"][0]["unknown"] == ["item_groups"], unknown["rules"]
    assert by_lookup["vars"] == {"item_groups": ["Weapons"]}
    assert allowed["result"] == "allow" and allowed["vars"] == {"item_groups": ["Office"]}


@pytest.mark.parametrize(
    ("arguments", "groups"),
    [
        ({}, None),
        ({"items": None}, None),
        ({"items": {"0": {"sku": "W-1"}}}, None),
        ({"items": "W-1"}, None),
        ({"items": []}, []),  # an order that names no items has none
    ],
)
def test_the_values_of_a_list_that_is_not_there_are_unknown(
    arguments: dict[str, Any], groups: list[Any] | None
) -> None:
    spec = MappingSpec.model_validate(MAPPING)
    now = dt.datetime(2026, 12, 5, tzinfo=dt.UTC)
    facts = plan(spec, {"quote": "Q-1", **arguments}, {}, now)
    assert facts.need == [] and facts.vars == {"item_groups": groups}
