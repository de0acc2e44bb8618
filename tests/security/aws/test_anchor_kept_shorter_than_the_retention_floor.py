"""THREATS.md §4: the stack deploys with anchors that expire before the entries they vouch for.

A checkpoint's copy under S3 Object Lock (``AnchorRetentionDays``) is what shows an operator's
rewrite of the chain and its checkpoints: nothing else in the account is out of their
reach. The ledger keeps every entry at least 183 days (the retention floor: no prune cuts
younger entries). The template took any ``AnchorRetentionDays`` from 0 up, so a stack
deployed with 1 to 182 kept each anchor for less than the entries it covers: once the copy
expired, a rewrite of what it covered showed nowhere, while the entries still had to be
kept. Now the parameter takes 0 (anchoring off, documented as weaker evidence) or 183 to
36500 days (Object Lock's longest), and CloudFormation refuses any other value before
anything is made.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.aws import load_template


def _accepted(spec: dict[str, Any], value: str) -> bool:
    """Whether CloudFormation takes ``value`` for a parameter declared as ``spec``."""
    if spec["Type"] == "Number":
        try:
            number = float(value)
        except ValueError:
            return False
        if "MinValue" in spec and number < float(spec["MinValue"]):
            return False
        if "MaxValue" in spec and number > float(spec["MaxValue"]):
            return False
    if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], value):
        return False
    allowed = spec.get("AllowedValues")
    return allowed is None or value in [str(v) for v in allowed]


@pytest.mark.parametrize("days", ["1", "7", "30", "90", "180", "182", "182.5", "-1", "0183"])
def test_an_anchor_shorter_than_the_floor_is_refused(days: str) -> None:
    spec = load_template()["Parameters"]["AnchorRetentionDays"]
    assert not _accepted(spec, days), f"AnchorRetentionDays={days} deploys"


@pytest.mark.parametrize("days", ["0", "183", "400", "365", "3650", "36500"])
def test_no_anchor_or_one_past_the_floor_deploys(days: str) -> None:
    spec = load_template()["Parameters"]["AnchorRetentionDays"]
    assert _accepted(spec, days)
    assert _accepted(spec, str(spec["Default"]))
    assert not _accepted(spec, "36501")  # Object Lock keeps an object at most 100 years
