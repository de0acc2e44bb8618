"""What a check reads before it decides, on DynamoDB, where every request is a round trip:
its tool's mapping and the workspace's rule stamp are read together, in one request."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from claros.store.dynamo import DynamoStore
from claros.wiring import Services
from tests.api.conftest import Keys, bearer, check_body, put_rule

MAPPING = {
    "app": "shop",
    "tool": "refund_create",
    "fetch": {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"},
}
FETCHED = {"fetch": {"id": "1187", "grand_total": 10000}}


class _Recording:
    """The store's DynamoDB client, noting the docs each read names."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.reads: list[tuple[str, list[str]]] = []

    def get_item(self, **kwargs: Any) -> Any:
        self.reads.append(("GetItem", [_doc(kwargs["Key"])]))
        return self._client.get_item(**kwargs)

    def batch_get_item(self, **kwargs: Any) -> Any:
        keys = [k for request in kwargs["RequestItems"].values() for k in request["Keys"]]
        self.reads.append(("BatchGetItem", [_doc(k) for k in keys]))
        return self._client.batch_get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _doc(key: dict[str, Any]) -> str:
    """``collection/key`` of a state table key; a ledger or records key as it is."""
    if "pk" not in key:
        return str(sorted(key))
    return key["pk"]["S"].split("#doc#")[-1] + "/" + key["sk"]["S"]


def _reads_of(client: _Recording, *docs: str) -> list[tuple[str, list[str]]]:
    return [(op, named) for op, named in client.reads if set(named) & set(docs)]


@pytest.mark.parametrize("store", ["dynamodb"], indirect=True)
@pytest.mark.parametrize("mapped", [True, False], ids=["mapped", "unmapped"])
def test_a_check_reads_its_mapping_and_the_rule_stamp_in_one_request(
    http: httpx.Client, keys: Keys, services: Services, mapped: bool
) -> None:
    tools = [{"name": "order_read", "read": True}, {"name": "refund_create", "read": False}]
    registered = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent))
    assert registered.status_code == 200, registered.text
    if mapped:
        mapping = {"mapping": MAPPING}
        saved = http.put(
            "/api/mappings/shop/refund_create", json=mapping, headers=bearer(keys.admin)
        )
        assert saved.status_code == 200, saved.text
    put_rule(http, keys.admin, when="amount > 500", response="stop")
    body = check_body(fetched=FETCHED) if mapped else check_body()
    store = services.store
    assert isinstance(store, DynamoStore)
    client = store.client = _Recording(store.client)
    for n in range(2):  # the first reads the rules into the cache; the second is warm
        client.reads.clear()
        checked = http.post("/v1/check", json=body, headers=bearer(keys.agent))
        assert checked.status_code == 200 and checked.json()["result"] == "allow", checked.text
        assert len(checked.json()["rules"]) == 1
        assert _reads_of(client, "mapping/shop:refund_create", "rule_stamp/rules") == [
            ("BatchGetItem", ["mapping/shop:refund_create", "rule_stamp/rules"])
        ], n
    # A check answered "need" reads them in the same one request, and decides nothing.
    if mapped:
        client.reads.clear()
        need = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
        assert need.status_code == 200 and need.json()["result"] == "need", need.text
        assert len(_reads_of(client, "mapping/shop:refund_create", "rule_stamp/rules")) == 1
