"""THREATS.md §1: a lookup reads the record of every distinct value the call holds.

The attack: a mapping looks up each item's product (``items[].sku`` → ``product_read``)
and a rule stops an order holding a restricted category. Values were told apart by their
canonical JSON, which writes every number as its double, so two skus past 2**53 that
round to one double (1234567890123456789 and 1234567890123456800) were one value: Claros
asked for one read, and the second item, a restricted product, was judged by the first
item's record. Values are now told apart exactly as written.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.api.conftest import Keys, bearer

SKU_A, SKU_B = "1234567890123456789", "1234567890123456800"
MAPPING = {
    "app": "shop",
    "tool": "order_create",
    "lookups": [{"key": "items[].sku", "tool": "product_read", "arguments": {"sku": "$"},
                 "pick": "category", "var": "categories"}],
}  # fmt: skip
RULE = {"id": "restricted", "workflow_id": "orders", "app": "shop", "tools": ["order_create"],
        "title": "No restricted goods", "when": "'restricted' in categories",
        "response": "stop"}  # fmt: skip


def _check(http: httpx.Client, key: str, fetched: dict[str, Any] | None) -> httpx.Response:
    body: dict[str, Any] = {"app": "shop", "tool": "order_create", "arguments": {},
                            "agent": {"name": "t"}}  # fmt: skip
    if fetched is not None:
        body["fetched"] = fetched
    items = f'{{"items": [{{"sku": {SKU_A}}}, {{"sku": {SKU_B}}}]}}'  # numbers as written
    text = json.dumps(body).replace('"arguments": {}', f'"arguments": {items}')
    return http.post("/v1/check", content=text,
                     headers={**bearer(key), "Content-Type": "application/json"})  # fmt: skip


def test_two_ids_that_share_a_double_are_read_apart(http: httpx.Client, keys: Keys) -> None:
    tools = [{"name": "product_read", "read": True}, {"name": "order_create", "read": False}]
    registered = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent))
    assert registered.status_code == 200, registered.text
    saved = http.put("/api/mappings/shop/order_create", json={"mapping": MAPPING},
                     headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text
    rule = http.put("/api/rules/restricted", json={"rule": RULE, "made_by": "manual"},
                    headers=bearer(keys.admin))  # fmt: skip
    assert rule.status_code == 200, rule.text

    needs = _check(http, keys.agent, None).json()["need"]
    skus = sorted(str(n["arguments"]["sku"]) for n in needs)
    assert skus == sorted([SKU_A, SKU_B]), f"one read for two products: {needs}"
    by_sku = {str(n["arguments"]["sku"]): n["key"] for n in needs}
    fetched = {by_sku[SKU_A]: {"category": "books"}, by_sku[SKU_B]: {"category": "restricted"}}
    answer = _check(http, keys.agent, fetched)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == "stop", answer.text
