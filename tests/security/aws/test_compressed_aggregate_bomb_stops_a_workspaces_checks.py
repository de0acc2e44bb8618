"""THREATS.md §3: a role that writes docs plants an aggregate that inflates to ~400 MB.

Every append folds its records into its hour's and its day's aggregate
(``{workspace}#doc#_aggregates``, a zlib body), read back in the append's own transaction;
every role that appends may write those items. The store inflated the body whole
(``zlib.decompress``): a 400 KB item of zeros inflates ~1,000 times, past the check
function's 512 MB, so every check of that workspace in that hour killed the function (a
502 from API Gateway, retried by the guard, forwarded unchecked under ``--fail-open``), and
the evidence pages that add the hours up the same.

Shown with a smaller body (64 MiB inflated, 64 KiB stored), measured: a check must not
allocate what the aggregate inflates to. Closed: an aggregate is inflated only up to
``RECORD_MAX_BYTES`` (8 MiB); one that does not read is a 503 that names it and the
rebuild that replaces it (``python -m claros.aggregates rebuild``), which then works.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json
import tracemalloc
import zlib

import pytest

from claros.aggregates import SPANS
from claros.rebuild import rebuild
from tests.api.seed import OCT_1, install_clock
from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World
from tests.stack import STACK_WARNINGS, WS, run_check

pytestmark = STACK_WARNINGS

BOMB = 64 * 1024 * 1024


def _plant(world: World, body: bytes, at: int) -> None:
    """The outcome role (any that appends) puts ``body`` as ``at``'s hour and day rows."""
    role = world.as_role("OutcomeFunction")
    for span, size in SPANS.items():
        key = {"pk": {"S": f"{WS}#doc#_aggregates"}, "sk": {"S": f"{span}#{at // size:012d}"}}
        role.put_item(
            TableName=world.table("StateTable"),
            Item=key | {"rev": {"N": "99"}, "body": {"B": body}},
        )
    assert not role.refused, role.refused


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(zlib.compress(b"0" * BOMB, 9), id="bomb"),
        pytest.param(b"not zlib at all", id="not-zlib"),
        pytest.param(zlib.compress(b"[1, 2]"), id="not-an-object"),
    ],
)
def test_a_planted_aggregate_is_a_clear_503_not_a_crash(
    world: World, body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_clock(monkeypatch, OCT_1 + 60_000)
    run_check(world.functions, world.keys.agent)  # the hour's rows exist
    _plant(world, body, OCT_1)
    tracemalloc.start()
    try:
        status, answer = world.functions.http("check", load_event("check-check", world.keys.agent))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < BOMB // 2, (
        f"a check allocated {peak / 2**20:.0f} MiB for a {len(body)} byte aggregate: a "
        "400 KB one inflates to ~400 MiB, past the check function's memory"
    )
    # Safe behaviour: a 503 that says which row does not read and how to replace it.
    assert status == 503, (status, answer)
    assert "aggregate" in answer["message"] and "rebuild" in answer["message"], answer
    # The evidence readers say the same (no 500, no crash).
    status, answer = world.functions.http(
        "evidence", load_event("evidence-oversight", world.keys.admin)
    )
    assert status in (200, 503), (status, answer)
    if status == 503:
        assert "aggregate" in answer["message"], answer
    # The rebuild replaces the rows, and checks go on.
    store = world.stack.store(world.client)
    rebuild(store, WS)
    status, answer = world.functions.http("check", load_event("check-check", world.keys.agent))
    assert status == 200, (status, json.dumps(answer)[:300])
