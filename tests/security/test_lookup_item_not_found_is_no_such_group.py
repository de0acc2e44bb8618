"""Attack: name an item the master data does not find, and the rule over its group says
"not in that group".

A mapping looks up each ordered item's group (``key: items[].sku``, ``var: item_groups``)
and a rule stops orders with weapons (``'Weapons' in item_groups``). The shop's write
finds a SKU in any case; its ``sku_read`` matches exactly and answers ``{}`` for a SKU it
does not know, as many read tools do. The agent orders ``w-1`` (the rifle W-1): the lookup
found nothing, so that item's group was null (``item_groups: [null]``), and ``'Weapons' in
[null]`` was decided false, where a null field in a written list (``'Weapons' in [a, b]``)
leaves ``in`` unknown: the rifle was ordered. An item whose value is null is an item
whose value is unknown: ``in`` over a list holding one is unknown unless the needle is
found, and the rule answers by its ``on_unknown`` (by default it fires).
"""

from __future__ import annotations

import pytest
from mcp import Client

from claros.rules.expr import matches, parse_when
from tests.guard.conftest import Workspace
from tests.guard.test_examples import text, wait_registered
from tests.security.test_lookup_on_a_missing_list_sees_no_items import (
    MAPPING,
    NO_WEAPONS,
    QUOTES,
    ordered,
)


@pytest.mark.anyio
async def test_an_item_the_lookup_does_not_find_is_not_outside_the_group(
    workspace: Workspace,
) -> None:
    ws = workspace
    async with Client(ws.guard("sales", QUOTES)) as agent:
        await wait_registered(ws, "sales", "order_create")
        ws.push(rules=[NO_WEAPONS], mappings=[MAPPING])
        sneaky = await agent.call_tool("order_create", {"quote": "Q-1", "items": [{"sku": "w-1"}]})
        assert ordered(ws) == [], f"ordered what the rule never saw: {ordered(ws)}"
        assert sneaky.is_error and "no-weapons" in text(sneaky), text(sneaky)
    [check] = ws.records("check")
    assert check["vars"] == {"item_groups": [None]}
    assert check["rules"][0]["unknown"] == ["item_groups"], check["rules"]


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([None], None),
        (["Office", None], None),
        (["Weapons", None], True),  # found: decided, whatever else the list holds
        (["Office"], False),
        ([], False),
    ],
)
def test_in_over_a_list_with_a_null_item_is_unknown_unless_found(
    groups: list[str | None], expected: bool | None
) -> None:
    held, _ = matches(parse_when("'Weapons' in item_groups"), {"item_groups": groups})
    assert held is expected
    negated, _ = matches(parse_when("'Weapons' not in item_groups"), {"item_groups": groups})
    assert negated is (None if expected is None else not expected)
