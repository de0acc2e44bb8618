"""The Rules page shows each rule's warnings: fields its ``when`` reads that neither the
tool's registered input schema nor its mapping provides."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.api.conftest import Keys, bearer, put_rule
from tests.web.conftest import Browserish


def test_rules_page_shows_what_a_rule_reads_that_nothing_provides(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    schema = {"type": "object", "properties": {"order": {"type": "string"},
                                               "amount": {"type": "number"}}}  # fmt: skip
    tools = [{"name": "refund_create", "read": False, "input_schema": schema}]
    registered = http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(keys.agent))
    assert registered.status_code == 200, registered.text
    put_rule(http, keys.admin, when="amount > order_total / 2")
    put_rule(http, keys.admin, id="fine", when="amount > 500")
    page = sign_in(keys.admin).get("/app/rules").text
    assert "Warnings" in page
    assert "the rule reads &#39;order_total&#39;" in page
    assert page.count('class="warn-text"') >= 1
    assert page.count("the rule reads") == 1  # the rule "fine" reads only arguments
