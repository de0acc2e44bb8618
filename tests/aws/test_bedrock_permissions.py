"""Bedrock permissions in template.yaml: none unless JudgeModel / MapperModel is set; then
bedrock:InvokeModel on that one model (or inference profile, and the foundation models
only through that profile), for the one function that uses it. The roles are read from
the translated template and decided by tests/iam.py's evaluator."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from tests.aws import load_template
from tests.iam import ACCOUNT, REGION, Request, allowed, role_statements
from tests.stack import translate

JUDGE = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
MAPPER = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
FUNCTIONS = ("CheckFunction", "OutcomeFunction", "EvidenceFunction", "AdminFunction",
             "WebFunction", "CheckpointFunction", "ExportFunction", "PruneFunction")  # fmt: skip
# The functions that propose mappings: the admin API's POST /api/mappings/proposals and
# the web app's "Propose" (POST /app/mappings/propose).
PROPOSERS = ("AdminFunction", "WebFunction")


@pytest.fixture
def cfn(aws_env: None) -> dict[str, Any]:
    return translate(load_template())[0]


def _statements(cfn: dict[str, Any], function: str, judge: str, mapper: str) -> list[Any]:
    arns: defaultdict[str, str] = defaultdict(lambda: f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:x")
    arns.update(JudgeModel=judge, MapperModel=mapper)
    conditions: defaultdict[str, bool] = defaultdict(bool)
    conditions.update(HasJudgeModel=bool(judge), HasMapperModel=bool(mapper))
    return role_statements(cfn, function, arns, conditions)


def _model(model: str, region: str = REGION) -> str:
    return f"arn:aws:bedrock:{region}::foundation-model/{model}"


def _profile(model: str) -> str:
    return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{model}"


def _invoke(arn: str, profile: str | None = None) -> Request:
    context = {"bedrock:InferenceProfileArn": [profile]} if profile else {}
    return Request("bedrock:InvokeModel", arn, context)


def test_no_function_may_invoke_a_model_when_no_model_is_set(cfn: dict[str, Any]) -> None:
    for function in FUNCTIONS:
        statements = _statements(cfn, function, "", "")
        assert not any("bedrock" in str(s.get("Action")) for s in statements), function
        assert not allowed(statements, _invoke(_model("anthropic.claude-x")))


def test_the_judge_model_is_invoked_by_the_check_function_only(cfn: dict[str, Any]) -> None:
    check = _statements(cfn, "CheckFunction", JUDGE, "")
    assert allowed(check, _invoke(_model(JUDGE)))
    assert allowed(check, _invoke(_profile(JUDGE)))
    assert not allowed(check, _invoke(_model("anthropic.claude-opus-4-1-20250805-v1:0")))
    # Through its inference profile, the foundation models it routes to, in any region.
    routed = _model("anthropic.claude-haiku-4-5-20251001-v1:0", "us-west-2")
    assert allowed(check, _invoke(routed, _profile(JUDGE)))
    assert not allowed(check, _invoke(routed))
    assert not allowed(check, _invoke(routed, _profile(MAPPER)))
    for function in FUNCTIONS[1:]:
        assert not allowed(_statements(cfn, function, JUDGE, ""), _invoke(_model(JUDGE)))


def test_the_mapper_model_is_invoked_by_the_proposing_functions_only(cfn: dict[str, Any]) -> None:
    for proposer in PROPOSERS:
        statements = _statements(cfn, proposer, "", MAPPER)
        assert allowed(statements, _invoke(_profile(MAPPER))), proposer
        assert not allowed(statements, _invoke(_profile(JUDGE))), proposer
    for function in (f for f in FUNCTIONS if f not in PROPOSERS):
        assert not allowed(_statements(cfn, function, "", MAPPER), _invoke(_profile(MAPPER)))


def test_the_functions_are_told_their_models(cfn: dict[str, Any]) -> None:
    template = load_template()["Resources"]
    check = template["CheckFunction"]["Properties"]["Environment"]["Variables"]
    assert check["CLAROS_JUDGE"] == {"Fn::If": ["HasJudgeModel", "bedrock", ""]}
    assert check["CLAROS_JUDGE_MODEL"] == {"Fn::If": ["HasJudgeModel", {"Ref": "JudgeModel"}, ""]}
    for proposer in PROPOSERS:
        variables = template[proposer]["Properties"]["Environment"]["Variables"]
        assert variables["CLAROS_MAPPER_MODEL"] == {
            "Fn::If": ["HasMapperModel", {"Ref": "MapperModel"}, ""]
        }
