"""Two lookups that give the judge one context key: the judge sees one of them.

Judge context from a lookup is keyed by the leaf of its key and the field
(``item_code.item_name``, fetching-facts.txt). A mapping that looks up the invoice's items
(``items[].item_code``) and a replacement part (``replacement.item_code``), each with
``context: [item_name]``, wrote both under ``item_code.item_name``: the judge was shown
the replacement's name and never the items' ("does this invoice buy weapons?" judged on
the one harmless part). The mapping was saved without a word.

Such a mapping is now refused when it is saved (400, naming both parts).
"""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import Keys
from tests.api.test_fetching_facts import apps, put_mapping  # noqa: F401 - apps: a fixture

ITEMS_LOOKUP = {"key": "items[].item_code", "tool": "item_read", "arguments": {"code": "$"},
                "context": ["item_name"]}  # fmt: skip
PART_LOOKUP = {"key": "replacement.item_code", "tool": "item_read", "arguments": {"code": "$"},
               "context": ["item_name", "item_group"]}  # fmt: skip


@pytest.mark.usefixtures("apps")  # the apps' read tools registered
def test_two_lookups_with_one_context_key_are_not_saved(http: httpx.Client, keys: Keys) -> None:
    mapping = {"app": "accounting", "tool": "invoice_submit",
               "lookups": [ITEMS_LOOKUP, PART_LOOKUP]}  # fmt: skip
    answer = put_mapping(http, keys.admin, mapping)
    assert answer.status_code == 400, f"saved, the judge sees one item_name: {answer.text}"
    assert "lookups[1] gives the judge 'item_code.item_name', as lookups[0] does" in answer.text


@pytest.mark.usefixtures("apps")
def test_lookups_with_their_own_context_keys_are_saved(http: httpx.Client, keys: Keys) -> None:
    part = {**PART_LOOKUP, "key": "replacement.part_code"}
    mapping = {"app": "accounting", "tool": "invoice_submit", "lookups": [ITEMS_LOOKUP, part]}
    assert put_mapping(http, keys.admin, mapping).status_code == 200
