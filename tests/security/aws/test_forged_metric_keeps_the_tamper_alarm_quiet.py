"""THREATS.md §3: a compromised function forges a metric that keeps an alarm quiet.

Claros's own metrics are Powertools EMF: JSON lines a function prints to its log, which
CloudWatch turns into metrics in the namespace the line names. No role may call
``cloudwatch:PutMetricData``, but every function may print, and every role holds the
managed ``AWSLambdaBasicExecutionRole`` (``logs:PutLogEvents`` on every log group). So any
compromised function can publish any value of ``Claros/LedgerTampered`` with the dimension
``service=claros``, which is what the checkpoint function publishes, and the alarms read.

``LedgerTamperedAlarm`` and ``CheckpointSignFailedAlarm`` fired on the **Sum** of the minute
reaching 1. A forged datapoint of -1,000,000 in the same minute as the checkpoint function's
real 1 made the Sum negative: the alarm stayed quiet while the stream had seen tampering.
They now fire on the **Maximum**, which a forged datapoint can only raise (a false alarm,
seen), never lower. ``CheckpointLagAlarm`` already fired on the Maximum. What a forged
stream of zeros can still do is stand in for a schedule that stopped publishing (that
alarm treats missing data as breaching): docs/deploy.md says so, and the checkpoint
function's own AWS/Lambda alarms (errors, throttles) are in namespaces no role can write.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.aws import load_template
from tests.iam import Request, allowed
from tests.security.aws.test_aws_roles_cannot_rewrite import World
from tests.stack import STACK_WARNINGS

pytestmark = STACK_WARNINGS

REAL = 1.0  # the checkpoint function's own datapoint: one tampering seen, one failure
FORGED = -1_000_000.0  # a compromised function's datapoint in the same minute


def _statistic(name: str, values: list[float]) -> float:
    return {
        "Sum": sum(values),
        "Maximum": max(values),
        "Minimum": min(values),
        "Average": sum(values) / len(values),
        "SampleCount": float(len(values)),
    }[name]


def _fires(alarm: dict[str, Any], values: list[float], threshold: float) -> bool:
    value = _statistic(alarm["Statistic"], values)
    return {
        "GreaterThanOrEqualToThreshold": value >= threshold,
        "GreaterThanThreshold": value > threshold,
        "LessThanThreshold": value < threshold,
        "LessThanOrEqualToThreshold": value <= threshold,
    }[alarm["ComparisonOperator"]]


@pytest.mark.parametrize("name", ["LedgerTamperedAlarm", "CheckpointSignFailedAlarm"])
def test_a_forged_datapoint_cannot_cancel_a_real_one(name: str) -> None:
    alarm = load_template()["Resources"][name]["Properties"]
    assert alarm["Namespace"] == "Claros"  # EMF: any function can publish into it
    threshold = float(alarm["Threshold"])
    assert _fires(alarm, [REAL], threshold)
    # Safe behaviour: the real datapoint fires the alarm whatever else the minute holds.
    for forged in ([FORGED], [0.0] * 100, [FORGED, 0.0, -1.0]):
        assert _fires(alarm, [REAL, *forged], threshold), (
            f"{name} stays quiet: {alarm['Statistic']} of the real {REAL} and the forged "
            f"{forged[:3]} is {_statistic(alarm['Statistic'], [REAL, *forged])}"
        )


def test_a_forged_lag_cannot_hide_a_real_one() -> None:
    sam = load_template()
    alarm = sam["Resources"]["CheckpointLagAlarm"]["Properties"]
    threshold = float(sam["Parameters"]["CheckpointLagAlarmSeconds"]["Default"])
    assert _fires(alarm, [threshold + 60, 0.0, FORGED, 0.0], threshold)


def test_no_role_may_put_metric_data(world: World) -> None:
    """Claros metrics come only from the functions' logs (EMF): no role writes a metric
    directly, so none can write into an AWS/ namespace an alarm could rest on instead."""
    functions = [
        logical
        for logical, r in world.stack.cfn["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function" and "Role" in r["Properties"]
    ]
    assert "CheckpointFunction" in functions and "CheckFunction" in functions
    for function in functions:
        statements = world.statements(function)
        request = Request("cloudwatch:PutMetricData", "*")
        assert not allowed(statements, request), function
