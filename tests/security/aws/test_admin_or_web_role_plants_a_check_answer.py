"""THREATS.md §3: a compromised admin or web function plants the answer a check retry
returns (as test_outcome_role_plants_a_check_answer.py, with the admin's roles).

The admin and web roles may write every doc but the signer's (``WriteDocsOnly``), the
check function's kept answers (``_#doc#idempotency_check``) and call index included: so
either rewrote a check's kept ask to ``allowed: true``, and the guard's retry of that check
was let through with no check in the ledger. An admin may loosen a rule, but that is a
rule version in the ledger; a planted answer is in no record. Both roles now write only
the doc collections their own routes write (``WriteItsOwnDocsOnly``, an allow list): not
the check and outcome functions' answers, nor the call index.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import pytest

from tests.security.aws.test_aws_roles_cannot_rewrite import World, world
from tests.security.aws.test_outcome_role_plants_a_check_answer import plant_and_retry
from tests.stack import STACK_WARNINGS

pytestmark = STACK_WARNINGS
_ = world  # the fixture, used by name


@pytest.mark.parametrize("function", ["AdminFunction", "WebFunction"])
def test_the_admin_and_web_roles_cannot_plant_a_check_answer(world: World, function: str) -> None:
    plant_and_retry(world, function)
