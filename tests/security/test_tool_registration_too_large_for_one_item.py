"""An agent registers an app's tools, within every documented limit, too large to store.

``POST /v1/apps/{app}/tools`` takes up to 1,000 tools with descriptions of up to 4,000
characters in a body of up to 1,000,000 bytes (docs/api.md), and keeps the app's tools as
one doc. On DynamoDB a doc is one item, which holds at most 400 KB: 1,000 tools with
900-character descriptions (a ~1 MB body) made the write a ValidationException, answered
503 "storage is unavailable; retry shortly", an outage to retry (the guard's registrar
retries a 503 for ever) for a request that can never succeed, and logged as the store's
error. On SQLite it was stored. Any key that registers tools (an agent's) could do it, and
a real MCP server with a few hundred long-described tools meets it too.

Now a doc too large for one DynamoDB item is refused before anything is written (413,
saying what is too large and what to do), as a record that is too large always was; the
guard's registrar takes a 4xx as a refusal and stops retrying."""

from __future__ import annotations

import httpx
import pytest

from claros.store.base import DocWrite, RecordTooLargeError, Store
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer

BOTH = pytest.mark.parametrize("store", ["sqlite", "dynamodb"], indirect=True)


def _tools(n: int, description: int) -> dict[str, object]:
    return {"tools": [{"name": f"t{i}", "description": "d" * description, "read": True}
                      for i in range(n)]}  # fmt: skip


@BOTH
def test_a_registration_too_large_for_the_store_is_refused_with_its_reason(
    http: httpx.Client, keys: Keys, services: Services, request: pytest.FixtureRequest
) -> None:
    head = services.store.head(WORKSPACE)
    got = http.post("/v1/apps/shop/tools", json=_tools(1000, 900), headers=bearer(keys.agent))
    if request.node.callspec.params["store"] == "sqlite":
        assert got.status_code == 200, got.text  # one row holds it
        return
    assert got.status_code == 413, got.text
    message = got.json()["message"]
    assert "tools of shop" in message and "bytes" in message and "fewer tools" in message
    assert services.store.get_doc(WORKSPACE, "app", "shop") is None  # nothing written
    assert services.store.head(WORKSPACE) == head


@BOTH
def test_a_registration_that_fits_is_stored_on_both(http: httpx.Client, keys: Keys) -> None:
    got = http.post("/v1/apps/shop/tools", json=_tools(300, 900), headers=bearer(keys.agent))
    assert got.status_code == 200, got.text
    assert got.json()["tools"] == 300


@pytest.mark.parametrize("store", ["dynamodb"], indirect=True)
def test_the_doc_limit_is_dynamodbs_item_limit(store: Store) -> None:
    """What the store refuses is what DynamoDB would (moto checks the 400 KB), give or take
    the margin: a doc just under the limit is written, one just over is refused before it
    is sent (RecordTooLargeError, not a ValidationException's StoreError)."""
    from claros.store.dynamo import MAX_DOC_ITEM_BYTES

    overhead = len(f"{WORKSPACE}#doc#app") + len("big") + 64 + len('{"b":""}')
    fits = "x" * (MAX_DOC_ITEM_BYTES - overhead)
    store.write_docs([DocWrite(WORKSPACE, "app", "big", {"b": fits})])
    assert store.get_doc(WORKSPACE, "app", "big") is not None
    with pytest.raises(RecordTooLargeError, match="DynamoDB keeps at most"):
        store.write_docs([DocWrite(WORKSPACE, "app", "big", {"b": fits + "x"})])
