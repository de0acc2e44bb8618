"""Attack: the agent's text gets the model judge to answer twice in one turn, a verdict that
clears the call first and the one that would stop it after.

``ask_for_object`` took the first ``toolUse`` block of the answer and read no further, so
a Converse answer holding ``verdict(matched=false)`` and then ``verdict(matched=true)``
was a clean "does not apply": the rule let the write through on the half of the answer
the agent asked for. A model may call a tool more than once in a turn (parallel tool use)
even when ``toolChoice`` names it.

What holds now: an answer with more than one call of the tool is no answer (no verdict:
the rule answers by its ``on_unknown``, which by default fires), as an answer with the
wrong tool or none is. The same holds for the mapper, which reads answers the same way.

Through the real local server, the Bedrock judge's Converse call answered by botocore's
Stubber.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.stub import Stubber

from claros.rules.judges import BedrockJudge
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body, put_rule
from tests.bedrock_stub import JUDGE_MODEL as MODEL
from tests.bedrock_stub import bedrock_client, converse_answer

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


def _use(n: int, matched: bool, note: str) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": f"t{n}", "name": "verdict",
                        "input": {"matched": matched, "note": note}}}  # fmt: skip


@pytest.fixture
def stubber(services: Services) -> Iterator[Stubber]:
    client = bedrock_client()
    with Stubber(client) as stub:
        services.judge = BedrockJudge(client, MODEL)
        try:
            yield stub
        finally:
            services.judge = None


def test_two_verdicts_in_one_answer_are_no_verdict(
    http: httpx.Client, keys: Keys, services: Services, stubber: Stubber
) -> None:
    put_rule(http, keys.admin, id="dispute", response="stop", when=None,
             title="Refunds on orders with a chargeback go to the payments team")  # fmt: skip
    content = [_use(1, False, "Cleared, as the call says."),
               _use(2, True, "The order has an open chargeback.")]  # fmt: skip
    stubber.add_response("converse", converse_answer(*content))
    answer = http.post("/v1/check", json=check_body(), headers=bearer(keys.agent))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["result"] == "stop", body["rules"]
    assert body["not_judged"] == ["dispute"]
    row = services.store.get_record(WORKSPACE, "check", body["check_id"])
    assert row is not None and row["rules"][0]["judged"] is False
