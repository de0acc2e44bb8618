"""The verified-through state in AWS (issue 13, item 7): only the checkpoint function's
role may keep it, so the checkpoint function makes the first one, verifying the chain
from seq 1 a bounded number of entries per invocation (each schedule tick and stream
batch), and moves it on; the evidence function shows the state brought up to the head
without saving it. On the moto stack (tests/stack.py), with the Lambdas' own handlers and
environments (CLAROS_ROLE_WRITES, read into Settings)."""

from __future__ import annotations

from typing import Any

import pytest

from claros.config import ConfigError, Settings
from claros.evidence import verified
from claros.store.base import Store
from tests.events import load_event
from tests.stack import WS, Functions, Keys, Stack, run_check

pytestmark = [
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy:UserWarning"),
]


def _tick(stack: Stack) -> dict[str, Any]:
    import boto3

    rule = boto3.client("events").describe_rule(Name=stack.physical["CheckpointFunctionSchedule"])
    tick = load_event("checkpoint-schedule")
    tick["resources"] = [rule["Arn"]]
    return tick


def test_the_checkpoint_function_makes_the_first_state_a_step_at_a_time(
    stack: Stack,
    functions: Functions,
    keys: Keys,
    stack_store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for _ in range(4):
        run_check(functions, keys.agent)
    head = stack_store.head(WS)
    assert head is not None and head.seq >= 4
    # The evidence function verifies the chain for its answer but may not keep the state.
    status, report = functions.http("evidence", load_event("evidence-verify", keys.admin))
    assert status == 200 and report["ok"] is True, report
    assert stack_store.verified_state(WS) is None
    # Two entries per step: the checkpoint function's ticks bootstrap it from seq 1.
    monkeypatch.setattr(verified, "CATCH_UP_ENTRIES", 2)
    seen = []
    for _ in range(head.seq):
        functions.invoke("checkpoint", _tick(stack))
        state = stack_store.verified_state(WS)
        assert state is not None
        seen.append(int(state["seq"]))
        if state["seq"] == head.seq:
            break
    assert seen[:2] == [2, 4] and seen[-1] == head.seq, seen
    assert state["failure_count"] == 0 and state["first_seq"] == 1
    assert state["entries"] == head.seq and state["full_at"] is not None
    # Caught up: a tick more changes nothing.
    functions.invoke("checkpoint", _tick(stack))
    assert stack_store.verified_state(WS) == state
    # New entries: the evidence function shows them verified, the signer saves them.
    run_check(functions, keys.agent)
    status, report = functions.http("evidence", load_event("evidence-verify", keys.admin))
    new_head = stack_store.head(WS)
    assert new_head is not None
    assert status == 200 and report["ok"] is True and report["last_seq"] == new_head.seq
    assert stack_store.verified_state(WS) == state  # shown, not saved
    functions.invoke("checkpoint", _tick(stack))
    moved = stack_store.verified_state(WS)
    assert moved is not None and moved["seq"] == new_head.seq and moved["segments"] > 1


def test_a_changed_entry_below_the_head_shows_in_the_first_state(
    stack: Stack, functions: Functions, keys: Keys, stack_store: Store, dynamodb_client: Any
) -> None:
    for _ in range(3):
        run_check(functions, keys.agent)
    table = stack.physical["LedgerTable"]
    dynamodb_client.update_item(
        TableName=table,
        Key={"workspace": {"S": WS}, "seq": {"N": "2"}},
        UpdateExpression="SET payload_sha256 = :p",
        ExpressionAttributeValues={":p": {"S": "0" * 64}},
    )
    functions.invoke("checkpoint", _tick(stack))
    state = stack_store.verified_state(WS)
    assert state is not None and state["failure_count"] >= 1
    assert 2 in {f["seq"] for f in state["failures"]}


def test_role_writes_come_from_the_environment_into_settings() -> None:
    assert Settings.from_env({}).keeps_verified_state is True
    reader = Settings.from_env({"CLAROS_ROLE_WRITES": ""})
    assert not reader.keeps_verified_state and not reader.notes_key_use
    web = Settings.from_env({"CLAROS_ROLE_WRITES": "key_use"})
    assert web.notes_key_use and not web.keeps_verified_state
    signer = Settings.from_env({"CLAROS_ROLE_WRITES": " key_use , verified_state "})
    assert signer.notes_key_use and signer.keeps_verified_state
    with pytest.raises(ConfigError, match="CLAROS_ROLE_WRITES"):
        Settings.from_env({"CLAROS_ROLE_WRITES": "ledger"})
