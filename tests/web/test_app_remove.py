"""Removing an app: ``DELETE /api/apps/{app}`` and the app page's form. Its tools go, the
mappings reading through them are suspended in the same transaction, the removal is an
``app_removed`` ledger entry, and the app's next registration is a first one."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import httpx

from tests.api.conftest import Keys, bearer
from tests.web.conftest import Browserish


def _register(http: httpx.Client, keys: Keys, *tools: tuple[str, bool]) -> dict[str, object]:
    body = {"tools": [{"name": name, "read": read} for name, read in tools]}
    answer = http.post("/v1/apps/shop/tools", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 200, answer.text
    found: dict[str, object] = answer.json()
    return found


def _map_refunds(http: httpx.Client, keys: Keys) -> None:
    fetch = {"tool": "order_read", "arguments": {"id": "$order"}, "into": "o"}
    mapping = {"app": "shop", "tool": "refund_create", "fetch": fetch}
    saved = http.put("/api/mappings/shop/refund_create", json={"mapping": mapping},
                     headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text


def test_an_admin_removes_an_app_and_its_mappings_are_suspended(
    http: httpx.Client, keys: Keys
) -> None:
    _register(http, keys, ("order_read", True), ("refund_create", False))
    _map_refunds(http, keys)
    # An agent key registers tools but never removes an app.
    refused = http.delete("/api/apps/shop", headers=bearer(keys.agent))
    assert refused.status_code == 403, refused.text
    assert http.delete("/api/apps/nope", headers=bearer(keys.admin)).status_code == 404

    done = http.delete("/api/apps/shop", headers=bearer(keys.admin))
    assert done.status_code == 200, done.text
    assert done.json()["suspended"] == ["shop refund_create"]
    assert done.json()["removed_by"] == "admin@acme.test"
    apps = http.get("/v1/apps", headers=bearer(keys.agent)).json()["apps"]
    assert [a["app"] for a in apps] == []
    mapping = http.get("/api/mappings/shop/refund_create", headers=bearer(keys.admin)).json()
    assert mapping["status"] == "suspended"
    assert "has registered no tools" in mapping["suspended"]["reason"]
    lines = http.get("/v1/ledger/entries?since=0", headers=bearer(keys.admin)).text
    kinds = [json.loads(line)["kind"] for line in lines.splitlines()]
    assert kinds.count("app_removed") == 1 and "mapping_status" in kinds
    # Removed twice: nothing left to remove.
    assert http.delete("/api/apps/shop", headers=bearer(keys.admin)).status_code == 404

    # The app's next registration is a first one, and the mapping is active again.
    again = _register(http, keys, ("order_read", True), ("refund_create", False))
    assert again["restored"] == ["shop refund_create"] and again["held"] == []


def test_the_app_page_lists_its_tools_and_removes_it(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client
) -> None:
    _register(http, keys, ("order_read", True), ("refund_create", False))
    admin = sign_in(keys.admin)
    page = admin.get("/app/apps/shop")
    assert page.status_code == 200, page.text
    assert "order_read" in page.text and "refund_create" in page.text
    assert 'aria-label="Propose a mapping for refund_create"' in page.text
    assert 'aria-label="Propose a mapping for order_read"' not in page.text
    [once] = re.findall(r'action="/app/apps/shop/remove".*?name="once" value="([^"]+)"',
                        page.text, flags=re.S)  # fmt: skip
    # Without the session's CSRF token: refused, nothing removed.
    assert admin.post_form("/app/apps/shop/remove", {"once": once}, csrf="wrong").status_code == 403
    assert admin.get("/app/apps/shop").status_code == 200
    done = admin.post_form("/app/apps/shop/remove", {"once": once})
    assert done.status_code == 303, done.text
    assert done.headers["location"] == "/app/rules?removed=shop#tools"
    shown = admin.get(done.headers["location"]).text
    assert "Removed: <code>shop</code> and its tools." in shown
    assert 'href="/app/apps/shop"' not in shown
    assert admin.get("/app/apps/shop").status_code == 404
    # The same form again (a reload): refused by its one-use token.
    assert admin.post_form("/app/apps/shop/remove", {"once": once}).status_code == 409
    # A person who is no admin sees no app page.
    assert sign_in(keys.person).get("/app/apps/shop").status_code == 403
