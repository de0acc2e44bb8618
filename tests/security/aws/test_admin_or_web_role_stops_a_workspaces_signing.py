"""THREATS.md §3: a compromised admin or web function stops the checkpoint function signing
a workspace, and quiets the alarm that would say so.

The checkpoint function's schedule signs every workspace whose unsigned tail is older than
``CheckpointMaxAge`` (the stream signs only at each N-th entry), and publishes the oldest
unsigned tail as ``CheckpointLagSeconds``, which ``CheckpointLagAlarm`` watches. It finds
the workspaces in the workspace list, ``_#doc#workspace``: docs, which the admin and web
roles could write, every one (``WriteDocsOnly`` allowed ``*#doc#*``). Neither function
ever changes that list (the first key of a workspace, made with the operator's
credentials, adds it), but either role could remove a workspace from it, or make its doc
unreadable: its tail then stayed unsigned however old it grew, and the lag metric said 0.
A workspace's last entries unsigned are what an operator can rewrite unseen (THREATS.md,
Inherent limits), so a signer stopped quietly is the tampering promise gone quiet.

The admin and web roles now write an allow list of doc collections, each one a route of
theirs writes (template.yaml, ``WriteTheirOwnDocsOnly``); the workspace list is not one.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World, world
from tests.stack import STACK_WARNINGS, WS, run_check

pytestmark = STACK_WARNINGS
_ = world  # the fixture, used by name

LATER_MS = 60_000  # the schedule's tick, a minute on: the tail is past CheckpointMaxAge (1 s)


def _delete(world: World, role: Any) -> None:
    role.delete_item(
        TableName=world.table("StateTable"),
        Key={"pk": {"S": "_#doc#workspace"}, "sk": {"S": WS}},
    )


def _poison(world: World, role: Any) -> None:
    role.put_item(
        TableName=world.table("StateTable"),
        Item={"pk": {"S": "_#doc#workspace"}, "sk": {"S": WS}, "rev": {"N": "1"},
              "body": {"S": "not json"}},
    )  # fmt: skip


def _lag_seconds(out: str) -> float:
    """The largest CheckpointLagSeconds the schedule published (Powertools EMF, stdout)."""
    found = [0.0]
    for line in out.splitlines():
        if line.startswith("{") and '"CheckpointLagSeconds"' in line:
            value = json.loads(line)["CheckpointLagSeconds"]
            found += value if isinstance(value, list) else [value]
    return max(found)


def _tick(world: World, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The schedule's tick a minute after now (the clock the checkpoint function reads)."""
    import claros.api.checkpoint
    from claros.clock import now_ms

    later = now_ms() + LATER_MS
    monkeypatch.setattr(claros.api.checkpoint, "now_ms", lambda: later)
    return dict(world.functions.invoke("checkpoint", load_event("checkpoint-schedule")))


@pytest.mark.parametrize("function", ["AdminFunction", "WebFunction"])
@pytest.mark.parametrize("attack", [_delete, _poison], ids=["removes", "poisons"])
def test_the_admin_and_web_roles_cannot_stop_a_workspaces_signing(
    world: World,
    function: str,
    attack: Callable[[World, Any], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_check(world.functions, world.keys.agent)  # seq 1: signed by the schedule, not the stream
    role = world.as_role(function)
    refused = False
    try:
        attack(world, role)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
        refused = True
    capsys.readouterr()
    answer = _tick(world, monkeypatch)
    lag = _lag_seconds(capsys.readouterr().out)
    # Safe behaviour: the stale tail is signed, and the lag the alarm reads says it was old.
    assert answer == {"signed": [1]}, (f"{function}'s role stopped the signing", answer, lag)
    assert lag >= LATER_MS / 1000 - 5, ("the lag alarm hears nothing", lag)
    assert [cp["seq"] for cp in world.checkpoints()] == [1]
    assert refused
