"""template.yaml's parameters: docs/deploy.md's table lists exactly them, with their
defaults; and the combinations that contradict each other fail at the template's Rules
(CloudFormation evaluates them before it makes anything), evaluated here as
CloudFormation defines the rule functions."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from tests.aws import REPO, load_template

DEPLOY_MD = REPO / "docs" / "deploy.md"


def _doc_table() -> dict[str, str]:
    """{parameter: default} from the table under "Parameters (all have defaults)"."""
    text = DEPLOY_MD.read_text()
    start = text.index("Parameters (all have defaults):")
    rows: dict[str, str] = {}
    for line in text[start:].splitlines()[1:]:
        if not line.strip():
            if rows:
                break
            continue
        found = re.match(r"^\| `(\w+)` \| ([^|]*) \|", line)
        if found:
            assert found.group(1) not in rows, f"{found.group(1)} is listed twice"
            rows[found.group(1)] = found.group(2).strip()
    return rows


def test_the_docs_table_lists_exactly_the_template_parameters() -> None:
    params = load_template()["Parameters"]
    rows = _doc_table()
    assert set(rows) == set(params), {
        "missing from docs/deploy.md": sorted(set(params) - set(rows)),
        "not in template.yaml": sorted(set(rows) - set(params)),
    }
    for name, spec in params.items():
        default = str(spec.get("Default", ""))
        assert rows[name] == (default or "(empty)"), (name, rows[name], default)


# --- Rules ------------------------------------------------------------------------------
def _value(expr: Any, params: dict[str, str]) -> Any:
    if isinstance(expr, dict) and list(expr) == ["Ref"]:
        return params[expr["Ref"]]
    if isinstance(expr, list):
        return [_value(e, params) for e in expr]
    return str(expr)


def _holds(expr: Any, params: dict[str, str]) -> bool:
    """A rule condition, as CloudFormation's rule functions define it."""
    [(fn, args)] = expr.items()
    if fn == "Fn::Or":
        assert 2 <= len(args) <= 10
        return any(_holds(a, params) for a in args)
    if fn == "Fn::And":
        assert 2 <= len(args) <= 10
        return all(_holds(a, params) for a in args)
    if fn == "Fn::Not":
        [inner] = args
        return not _holds(inner, params)
    if fn == "Fn::Equals":
        left, right = (_value(a, params) for a in args)
        return bool(left == right)
    if fn == "Fn::Contains":
        values, value = (_value(a, params) for a in args)
        return value in values
    raise AssertionError(f"the test cannot evaluate {fn}")


def _failures(params: dict[str, str]) -> list[str]:
    template = load_template()
    defaults = {k: str(v.get("Default", "")) for k, v in template["Parameters"].items()}
    values = defaults | params
    failed: list[str] = []
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not _holds(rule["RuleCondition"], values):
            continue
        failed += [
            a["AssertDescription"] for a in rule["Assertions"] if not _holds(a["Assert"], values)
        ]
    return failed


def test_the_defaults_pass_the_rules() -> None:
    assert _failures({}) == []


def test_a_lag_alarm_at_or_below_the_max_age_fails_before_anything_is_made() -> None:
    params = load_template()["Parameters"]
    ages = params["CheckpointMaxAge"]["AllowedValues"]
    lags = params["CheckpointLagAlarmSeconds"]["AllowedValues"]
    for age, lag in itertools.product(ages, lags):
        failed = _failures({"CheckpointMaxAge": str(age), "CheckpointLagAlarmSeconds": str(lag)})
        if lag > age + 60:
            assert failed == [], (age, lag)
        else:
            [why] = failed
            assert f"With CheckpointMaxAge {age}," in why, why
    assert _failures({"CheckpointMaxAge": "3600", "CheckpointLagAlarmSeconds": "900"})


@pytest.mark.parametrize("name", ["CheckpointMaxAge", "CheckpointLagAlarmSeconds"])
def test_every_allowed_value_is_covered_by_the_rule(name: str) -> None:
    """A value added to one list without the rule would pass unchecked."""
    template = load_template()
    ages = [str(v) for v in template["Parameters"]["CheckpointMaxAge"]["AllowedValues"]]
    rule = template["Rules"]["LagAlarmAboveMaxAge"]["Assertions"]
    covered = {a["Assert"]["Fn::Or"][0]["Fn::Not"][0]["Fn::Equals"][1] for a in rule}
    assert covered == set(ages)
