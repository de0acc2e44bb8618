"""A rule an admin saves on a tool no guard ever checks is accepted without a word
(docs/rules.md, "Warnings"; the brief of this round: "a rule that can never fire").

The guard checks writes only: a tool its server lists as a read (``readOnlyHint: true``,
or a reader's name) goes to the server without a check, so a rule on it never applies.
An admin who writes ``stop`` on ``customers_export`` (an export the server calls a read)
believes exports are stopped; the agent exports every customer, and the rule never shows
in a check row. Likewise a rule on a tool name the app's guard never registered
(``refund_creat``; ``1 == 1`` or no ``when``, so no field to warn of). Saving it was
silent: the answer had no ``warnings``.

Closed: saving warns of each tool the app's guard registered as a read (not held as a
write), and of each tool the app never registered when the app has registered tools.
"""

from __future__ import annotations

import httpx

from tests.api.conftest import Keys, bearer, put_rule


def _register(http: httpx.Client, key: str) -> None:
    tools = [
        {"name": "refund_create", "read": False},
        {"name": "customers_export", "read": True},
    ]
    answer = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(key))
    assert answer.status_code == 200, answer.text


def test_a_rule_on_a_read_tool_is_warned(http: httpx.Client, keys: Keys) -> None:
    _register(http, keys.agent)
    state = put_rule(http, keys.admin, id="no-exports", tools=["customers_export"],
                     when="1 == 1", response="stop", message="No bulk exports")  # fmt: skip
    assert state["version"] == 1  # saved all the same
    warnings = state.get("warnings") or []
    assert any(
        w.startswith("customers_export:") and "registered it as a read" in w for w in warnings
    ), warnings
    judged = put_rule(http, keys.admin, id="judged", tools=["customers_export"], when=None)
    assert any("registered it as a read" in w for w in judged.get("warnings") or []), judged


def test_a_rule_on_a_tool_the_app_never_registered_is_warned(
    http: httpx.Client, keys: Keys
) -> None:
    _register(http, keys.agent)
    state = put_rule(http, keys.admin, id="typo", tools=["refund_creat"], when="1 == 1",
                     response="stop")  # fmt: skip
    warnings = state.get("warnings") or []
    assert any(
        w.startswith("refund_creat:") and "registered no tool by this name" in w for w in warnings
    ), warnings


def test_a_rule_on_a_write_is_not_warned(http: httpx.Client, keys: Keys) -> None:
    _register(http, keys.agent)
    state = put_rule(http, keys.admin, id="fine", when="1 == 1", response="stop")
    assert "warnings" not in state, state
