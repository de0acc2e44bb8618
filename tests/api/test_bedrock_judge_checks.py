"""The Bedrock judge deciding checks over the real local server (SQLite), its Converse
calls answered by botocore's Stubber: the verdict, the model id and the note land in the
check row; a timeout or a malformed verdict leaves the rule to its on_unknown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.stub import ANY, Stubber

from claros.rules.judges import BedrockJudge
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


@pytest.fixture
def bedrock(services: Services) -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")  # fmt: skip
    with Stubber(client) as stubber:
        services.judge = BedrockJudge(client, MODEL)
        yield client, stubber
    services.judge = None


def _verdict(answer: dict[str, Any]) -> dict[str, Any]:
    use = {"toolUseId": "t1", "name": "verdict", "input": answer}
    return {
        "output": {"message": {"role": "assistant", "content": [{"toolUse": use}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }


def _check(http: httpx.Client, key: str, **arguments: object) -> dict[str, Any]:
    answer = http.post("/v1/check", json=check_body(arguments=arguments), headers=bearer(key))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _judged_rule(http: httpx.Client, key: str, on_unknown: str | None = None) -> None:
    extra = {"on_unknown": on_unknown} if on_unknown else {}
    put_rule(http, key, id="reasonable", response="stop", when=None,
             title="Refunds must be reasonable for the customer", **extra)  # fmt: skip


def test_bedrock_verdict_model_and_note_land_in_the_check_row(
    http: httpx.Client, keys: Keys, services: Services, bedrock: tuple[Any, Stubber]
) -> None:
    _, stubber = bedrock
    _judged_rule(http, keys.admin)
    expected = {"modelId": MODEL, "system": ANY, "messages": ANY, "inferenceConfig": ANY,
                "toolConfig": ANY}  # fmt: skip
    note = "A refund of 900 on a 200 order is not reasonable."
    stubber.add_response("converse", _verdict({"matched": True, "note": note}), expected)
    answer = _check(http, keys.agent, order="1187", amount=900)
    stubber.assert_no_pending_responses()
    assert answer["result"] == "stop" and not answer.get("not_judged")
    row = services.store.get_record(WORKSPACE, "check", answer["check_id"])
    assert row is not None
    entry = row["rules"][0]
    assert entry["judged"] is True and entry["judge"] == MODEL and entry["note"] == note


def test_a_timeout_or_a_malformed_verdict_leaves_the_rule_to_on_unknown(
    http: httpx.Client, keys: Keys, services: Services, bedrock: tuple[Any, Stubber]
) -> None:
    client, stubber = bedrock
    _judged_rule(http, keys.admin, on_unknown="ask")
    stubber.add_response("converse", _verdict({"matched": "yes", "note": 3}))
    malformed = _check(http, keys.agent, order="1187", amount=5)
    assert malformed["result"] == "ask" and malformed["not_judged"] == ["reasonable"]

    def timeout(**_: Any) -> None:
        raise ReadTimeoutError(endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com")

    client.meta.events.register("before-call.bedrock-runtime.Converse", timeout)
    late = _check(http, keys.agent, order="1187", amount=5)
    assert late["result"] == "ask" and late["not_judged"] == ["reasonable"]
    row = services.store.get_record(WORKSPACE, "check", late["check_id"])
    assert row is not None and row["rules"][0]["judged"] is False
