"""Confirming that a held tool is a read: the Rules page's button (session, CSRF, one-use
token) and ``claros tools confirm APP TOOL`` (a real subprocess)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable

import httpx

from claros.local import LocalServer
from tests.api.conftest import Keys, bearer, put_rule, rule
from tests.web.conftest import Browserish


def _hold(http: httpx.Client, keys: Keys, tool: str = "refund_list") -> None:
    """Register ``tool`` as a write, then report it as a read: it is held."""
    for read in (False, True):
        body = {"tools": [{"name": tool, "read": read}, {"name": "order_read", "read": True}]}
        answer = http.post("/v1/apps/shop/tools", json=body, headers=bearer(keys.agent))
        assert answer.status_code == 200, answer.text


def test_the_rules_page_lists_tools_and_confirms_a_held_one(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client
) -> None:
    _hold(http, keys)
    admin = sign_in(keys.admin)
    page = admin.get("/app/rules").text
    assert 'id="tools"' in page and "held as write" in page and 'href="/app/apps/shop"' in page
    tools = admin.get("/app/apps/shop").text  # the app's own page lists every tool
    assert "order_read" in tools and "refund_list" in tools and "held as write" in tools
    action = "/app/apps/shop/tools/refund_list/confirm"
    [once] = re.findall(rf'action="{action}".*?name="once" value="([^"]+)"', page, flags=re.S)
    # Without the session's CSRF token: refused, nothing confirmed.
    refused = admin.post_form(action, {"once": once}, csrf="wrong")
    assert refused.status_code == 403
    done = admin.post_form(action, {"once": once})
    assert done.status_code == 303, done.text
    assert done.headers["location"] == "/app/rules?confirmed=shop+refund_list#tools"
    shown = admin.get(done.headers["location"]).text
    assert "Confirmed: <code>shop refund_list</code> is a read." in shown
    assert "held as write" not in shown
    # The same form again (a reload): refused by its one-use token.
    again = admin.post_form(action, {"once": once})
    assert again.status_code == 409 and "already sent" in again.text
    apps = http.get("/v1/apps", headers=bearer(keys.agent)).json()["apps"]
    listed = {t["name"]: t for t in apps[0]["tools"]}
    assert listed["refund_list"]["read"] is True and "held" not in listed["refund_list"]


def test_a_member_cannot_confirm_in_the_web_app(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client, person_key: str
) -> None:
    _hold(http, keys)
    member = sign_in(person_key)
    answer = member.post_form("/app/apps/shop/tools/refund_list/confirm", {"once": "x" * 20})
    assert answer.status_code == 403
    assert http.post(
        "/app/apps/shop/tools/refund_list/confirm", json={}, headers=bearer(keys.agent)
    ).status_code == 403  # fmt: skip


def _claros(server: LocalServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAROS_URL": server.url, "CLAROS_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "tools", "confirm", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_claros_tools_confirm(server: LocalServer, keys: Keys, http: httpx.Client) -> None:
    _hold(http, keys)
    body = {
        "mapping": {
            "app": "shop",
            "tool": "refund_create",
            "queries": [{"tool": "refund_list", "arguments": {}, "op": "count", "var": "n"}],
        }
    }
    saved = http.put("/api/mappings/shop/refund_create", json=body, headers=bearer(keys.admin))
    assert saved.status_code == 400 and "claros tools confirm shop refund_list" in saved.text

    denied = _claros(server, keys.agent, "shop", "refund_list")
    assert denied.returncode == 1 and denied.stderr.startswith("FAIL: shop refund_list: ")
    assert "admin" in denied.stderr or "kind" in denied.stderr
    done = _claros(server, keys.admin, "shop", "refund_list")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "OK: shop refund_list is a read (confirmed by admin@acme.test)\n"
    twice = _claros(server, keys.admin, "shop", "refund_list")
    assert twice.returncode == 1 and "no change to confirm" in twice.stderr
    missing = _claros(server, keys.admin, "shop", "nope")
    assert missing.returncode == 1 and "not a registered tool" in missing.stderr
    usage = _claros(server, keys.admin, "shop")
    assert usage.returncode == 2 and "tool" in usage.stderr
    env = {**os.environ, "CLAROS_URL": "http://127.0.0.1:9", "CLAROS_KEY": keys.admin}
    down = subprocess.run(
        [sys.executable, "-m", "claros_guard.cli", "tools", "confirm", "shop", "refund_list"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert down.returncode == 2 and down.stderr.startswith("claros tools confirm: ")
    assert http.put("/api/mappings/shop/refund_create", json=body,
                    headers=bearer(keys.admin)).status_code == 200  # fmt: skip


def test_the_rules_page_says_why_a_mapping_is_suspended(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client
) -> None:
    _hold(http, keys, "order_get")  # order_read stays a read
    fetch = {"tool": "order_read", "arguments": {"id": "$order"}, "into": "o"}
    mapping = {"app": "shop", "tool": "refund_create", "fetch": fetch}
    saved = http.put("/api/mappings/shop/refund_create", json={"mapping": mapping},
                     headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text
    body = {"tools": [{"name": "order_read", "read": False}]}
    turned = http.post("/v1/apps/shop/tools", json=body, headers=bearer(keys.agent)).json()
    assert turned["suspended"] == ["shop refund_create"]
    page = sign_in(keys.admin).get("/app/rules").text
    assert "suspended" in page and "&#39;order_read&#39; of shop is not a read tool" in page


def test_a_suspended_mapping_leaves_the_rules_page_and_rule_pushes_working(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client
) -> None:
    """A rule on a tool whose mapping is suspended: the Rules page (where the admin mends
    the mapping) and saving rules must still work. Before, the rule's push-time warnings
    read the mapping as a check does, and its 409 made the whole Rules page an error page
    and refused every rule on the tool."""
    _hold(http, keys, "order_get")
    fetch = {"tool": "order_read", "arguments": {"id": "$order"}, "into": "o"}
    mapping = {"app": "shop", "tool": "refund_create", "fetch": fetch}
    saved = http.put("/api/mappings/shop/refund_create", json={"mapping": mapping},
                     headers=bearer(keys.admin))  # fmt: skip
    assert saved.status_code == 200, saved.text
    put_rule(http, keys.admin, when="amount > o.total / 2")
    body = {
        "tools": [{"name": "order_read", "read": False}, {"name": "refund_create", "read": False}]
    }
    turned = http.post("/v1/apps/shop/tools", json=body, headers=bearer(keys.agent)).json()
    assert turned["suspended"] == ["shop refund_create"]

    page = sign_in(keys.admin).get("/app/rules")
    assert page.status_code == 200, page.text
    assert "&#39;order_read&#39; of shop is not a read tool" in page.text
    # A stricter rule on the same tool is saved, and warned that its mapping is suspended.
    answer = http.put(
        "/api/rules/refund-any", json={"rule": rule(id="refund-any", when="o.total > 0")},
        headers=bearer(keys.admin),
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert any("suspended" in w for w in answer.json()["warnings"]), answer.json()
