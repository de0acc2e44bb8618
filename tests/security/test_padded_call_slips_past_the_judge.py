"""Attack: pad the call past what the judge takes, so that a judged rule is not judged and
its ``on_unknown: allow`` lets the write through.

The Bedrock judge sends at most 24,000 bytes (the rule, the facts, the context); a larger
question was "not judged", and the rule answered by its ``on_unknown``. The example rule
``refund-dispute`` (examples/rules.yaml: stop refunds whose reason mentions "chargeback"
or "fraud") has ``on_unknown: allow``, so that it does not block refunds while no judge
is there. An agent that writes its refund's reason long enough (the shop takes any
reason) chose, at will and every time, to leave the rule undecided: the refund of a
charged-back order went through. ``on_unknown`` is for a judge that cannot answer (none
configured, a timeout, a refusal, an answer that is no verdict), not for a call the agent
made too large to ask about.

What holds now: a call the judge cannot be asked about because of the call itself (its
facts over the limit, text that is not valid Unicode) is held to the rule: it never
answers by ``on_unknown: allow`` but fires (``ask`` still sends it to a person), and the
row says why.

Through the real local server (tests/api/conftest.py), the Bedrock judge's Converse calls
answered by botocore's Stubber, the rule as examples/rules.yaml writes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from botocore.stub import Stubber

from claros.rules.judges import MAX_PROMPT_BYTES, BedrockJudge
from claros.wiring import Services
from tests.api.conftest import WORKSPACE, Keys, bearer, check_body
from tests.bedrock_stub import JUDGE_MODEL as MODEL
from tests.bedrock_stub import bedrock_client, converse_answer

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DISPUTE = next(
    r
    for r in yaml.safe_load((EXAMPLES / "rules.yaml").read_text())["rules"]
    if r["id"] == "refund-dispute"
)


@pytest.fixture
def judged(http: httpx.Client, keys: Keys, services: Services) -> Iterator[Stubber]:
    assert DISPUTE["on_unknown"] == "allow" and "when" not in DISPUTE
    put = http.put("/api/rules/refund-dispute", json={"rule": DISPUTE}, headers=bearer(keys.admin))
    assert put.status_code == 200, put.text
    client = bedrock_client()
    with Stubber(client) as stubber:
        services.judge = BedrockJudge(client, MODEL)
        try:
            yield stubber
        finally:
            services.judge = None


def _verdict(matched: bool, note: str) -> dict[str, Any]:
    use = {"toolUseId": "t1", "name": "verdict", "input": {"matched": matched, "note": note}}
    return converse_answer({"toolUse": use})


def _check(http: httpx.Client, keys: Keys, reason: str) -> dict[str, Any]:
    body = check_body(arguments={"order": "1187", "amount": 40, "reason": reason})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_padded_reason_does_not_leave_a_judged_rule_undecided(
    http: httpx.Client, keys: Keys, services: Services, judged: Stubber
) -> None:
    # The reason as the judge would stop it, at a length the judge is asked about.
    judged.add_response("converse", _verdict(True, "The reason mentions a chargeback."))
    plain = _check(http, keys, "customer filed a chargeback")
    assert plain["result"] == "stop", plain

    # The same reason padded past what the judge takes: never sent, and held to the rule.
    padded = _check(http, keys, "customer filed a chargeback" + " ." * MAX_PROMPT_BYTES)
    judged.assert_no_pending_responses()
    assert padded["result"] == "stop", padded["rules"]
    assert padded["not_judged"] == ["refund-dispute"]
    row = services.store.get_record(WORKSPACE, "check", padded["check_id"])
    assert row is not None
    entry = row["rules"][0]
    assert entry["judged"] is False and entry["matched"] is True
    assert "over 24,000 bytes" in entry["note"], entry["note"]


def test_a_judge_that_cannot_answer_still_leaves_the_rule_to_on_unknown(
    http: httpx.Client, keys: Keys, judged: Stubber
) -> None:
    # What on_unknown: allow is for: the judge, not the call, failed (here a refusal).
    judged.add_client_error("converse", "ThrottlingException", "Too many requests")
    answer = _check(http, keys, "customer filed a chargeback")
    assert answer["result"] == "allow" and answer["not_judged"] == ["refund-dispute"]


def test_a_padded_call_under_on_unknown_ask_goes_to_a_person(
    http: httpx.Client, keys: Keys, judged: Stubber
) -> None:
    # ask is the operator's word for "a person decides what the judge cannot": kept.
    rule = {**DISPUTE, "on_unknown": "ask"}
    put = http.put("/api/rules/refund-dispute", json={"rule": rule}, headers=bearer(keys.admin))
    assert put.status_code == 200, put.text
    padded = _check(http, keys, "customer filed a chargeback" + " ." * MAX_PROMPT_BYTES)
    judged.assert_no_pending_responses()
    assert padded["result"] == "ask" and padded["not_judged"] == ["refund-dispute"]
