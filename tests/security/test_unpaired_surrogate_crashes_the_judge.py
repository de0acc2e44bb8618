"""Attack: an argument holding an unpaired surrogate (``"\\ud800"``, valid JSON, not valid
Unicode) in a call to a tool with a rule the Bedrock judge decides.

The judge wrote its prompt as UTF-8 to measure it, which raised UnicodeEncodeError: the
check answered 500, what a guard takes for an outage (``--fail-open`` forwards then; the
guard itself does not send such text today, but a key's holder may call the check API).
Without the judge the same call is a 400 naming the bad string, since the row cannot be
written as canonical JSON. The mapper's prompt is written the same way, from the
descriptions a guard (that is, any agent key) registers.

What holds now: text that is not valid Unicode is never sent to a model. The judge gives
no verdict (the call then gets the 400 every such call gets); a registration holding such
a description is refused (400), so the mapper's prompt never holds one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.stub import Stubber

from claros.rules.judges import BedrockJudge
from claros.wiring import Services
from tests.api.conftest import Keys, bearer, check_body, put_rule
from tests.bedrock_stub import JUDGE_MODEL as MODEL
from tests.bedrock_stub import bedrock_client, converse_answer

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

# As the agent writes it on the wire: a JSON escape of a lone high surrogate.
SURROGATE_BODY = (
    '{"app":"shop","tool":"refund_create","arguments":{"order":"1187","amount":5,'
    '"reason":"late \\ud800 delivery"},"agent":{"name":"claude-code","session":"s1",'
    '"call_id":"c1","via":{"guard":"claros-guard","version":"0.1.0"}}}'
)


def json_headers(key: str) -> dict[str, str]:
    return {**bearer(key), "Content-Type": "application/json"}


@pytest.fixture
def stubbed(services: Services) -> Iterator[tuple[Any, Stubber]]:
    client = bedrock_client()
    with Stubber(client) as stubber:
        yield client, stubber


def test_a_lone_surrogate_in_the_arguments_is_a_400_not_a_500(
    http: httpx.Client, keys: Keys, services: Services, stubbed: tuple[Any, Stubber]
) -> None:
    client, stubber = stubbed
    put_rule(http, keys.admin, id="reasonable", response="stop", when=None,
             title="Refunds must be reasonable for the customer")  # fmt: skip
    services.judge = BedrockJudge(client, MODEL)
    try:
        answer = http.post("/v1/check", content=SURROGATE_BODY.encode(),
                           headers=json_headers(keys.agent))  # fmt: skip
    finally:
        services.judge = None
    assert answer.status_code == 400, answer.text
    assert "not valid Unicode" in answer.json()["message"]
    stubber.assert_no_pending_responses()  # no Converse call was queued, and none was made
    # The same call is fine once the text is valid.
    services.judge = BedrockJudge(client, MODEL)
    try:
        use = {"toolUseId": "t1", "name": "verdict",
               "input": {"matched": False, "note": "a small refund"}}  # fmt: skip
        stubber.add_response("converse", converse_answer({"toolUse": use}))
        ok = http.post("/v1/check", json=check_body(arguments={"order": "1187", "amount": 5}),
                       headers=bearer(keys.agent))  # fmt: skip
    finally:
        services.judge = None
    assert ok.status_code == 200 and ok.json()["result"] == "allow", ok.text


TOOLS_BODY = (
    '{"tools":[{"name":"invoice_read","read":true,"description":"One invoice \\udfff.",'
    '"input_schema":{"type":"object","properties":{"name":{"type":"string"}}}}]}'
)


def test_a_lone_surrogate_in_a_tool_description_is_refused_at_registration(
    http: httpx.Client, keys: Keys
) -> None:
    # What the mapper's prompt is made of (descriptions a guard, so any agent key,
    # registers) never holds such text: it is refused at the door, nothing kept.
    registered = http.post("/v1/apps/erp/tools", content=TOOLS_BODY.encode(),
                           headers=json_headers(keys.agent))  # fmt: skip
    assert registered.status_code == 400, registered.text
    assert "tools.0.description" in registered.text
    assert http.get("/api/mappings", headers=bearer(keys.admin)).status_code == 200
