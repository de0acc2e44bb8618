"""Attack: a record read ahead for one id is taken for a neighbouring id past 2^53.

A guard reads a tool's record before the check when it learnt the fetch from an earlier
need (``fetched_with``: the read it ran). Claros uses the record only when that read is
the one its mapping asks for on this call now; it compared the two as canonical JSON,
which writes every number as a double. Two ids past 2^53 that round to one double
(9007199254740992 and 9007199254740993) were one read: a record read by a mapping as it
was before an edit, or by a guard that filled it in otherwise, for invoice ...992 (10)
decided the submit of invoice ...993. Numbers are now compared exactly as well (as
``_value_key`` already keeps two such lookup values apart).
"""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import Keys, bearer, put_rule
from tests.api.test_fetching_facts import accounting, put_mapping
from tests.security.test_empty_record_lets_the_agent_state_the_facts import STOP_OVER_500

pytestmark = pytest.mark.parametrize("store", ["sqlite", "dynamodb"], indirect=True)

FETCH_ONLY = {
    "app": "accounting",
    "tool": "invoice_submit",
    "fetch": {"tool": "invoice_read", "arguments": {"name": "$name"}, "into": ""},
}
ASKED, NEIGHBOUR = 2**53 + 1, 2**53


def test_a_record_read_for_a_neighbouring_id_is_set_aside(http: httpx.Client, keys: Keys) -> None:
    accounting().register(http, keys.agent)
    assert put_mapping(http, keys.admin, FETCH_ONLY).status_code == 200
    put_rule(http, keys.admin, **STOP_OVER_500)
    body = {
        "app": "accounting",
        "tool": "invoice_submit",
        "arguments": {"name": ASKED},
        "agent": {"name": "t"},
        "fetched": {"fetch": {"name": NEIGHBOUR, "grand_total": 10}},
        "fetched_with": {"tool": "invoice_read", "arguments": {"name": NEIGHBOUR}},
    }
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()
    assert answer.get("fetch_stale") is True, f"decided on invoice {NEIGHBOUR}'s record: {answer}"
    assert answer["result"] == "need" and answer["need"][0]["arguments"] == {"name": ASKED}
