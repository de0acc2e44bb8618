"""Attack: one workspace's unreadable chain head stops the heartbeat for every workspace
(THREATS.md §3; availability of the evidence).

The checkpoint function's schedule signs, each minute, every workspace whose tail stayed
unsigned for ``CheckpointMaxAge``. A role that may append (the check function's) can put a
ledger item IAM cannot hold to the store's shape: say a "head" whose fields do not read.
Reading that head raised inside the one loop over all workspaces, so the tick failed and
no workspace after it was signed, minute after minute. Seen on the old code: the healthy
workspace stayed unsigned. Each workspace is now read and signed on its own: one that does
not read is logged and skipped (its own signing is refused, as a chain that does not
verify is), and the others are signed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from claros.api.checkpoint import on_schedule
from claros.auth import ensure_workspace
from claros.config import Settings
from claros.signing import FileSigner
from claros.store.dynamo import DynamoStore
from claros.wiring import Services
from tests.api.seed import install_clock, utc_ms


@pytest.fixture
def services(dynamo_store: DynamoStore, tmp_path: Path) -> Services:
    s = dynamo_store
    settings = Settings(
        data_dir=tmp_path / "data", store="dynamodb", ledger_table=s.ledger_table,
        records_table=s.records_table, state_table=s.state_table, checkpoint_every=1000,
        checkpoint_max_age_s=300, inline_checkpoints=False,
    )  # fmt: skip
    return Services(settings, s, FileSigner(tmp_path / "data"))


@pytest.mark.parametrize("planted", ["bad-fields", "bad-seq"])
def test_a_planted_head_in_one_workspace_leaves_the_others_signed(
    services: Services, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    store = services.store
    assert isinstance(store, DynamoStore)
    clock = install_clock(monkeypatch, utc_ms(2026, 3, 2, 9))
    for workspace in ("aaa-planted", "zzz-healthy"):
        ensure_workspace(store, workspace)
        for i in range(3):
            store.append(workspace, "check", f"c{i}", {"result": "allow", "n": i})
    item = {"workspace": {"S": "aaa-planted"}, "seq": {"N": "4"}, "kind": {"N": "7"}}
    if planted == "bad-seq":
        item = {**item, "kind": {"S": "check"}, "ts": {"S": "soon"}}
    store.client.put_item(TableName=store.ledger_table, Item=item)
    clock.at(utc_ms(2026, 3, 2, 10))  # an hour on: both tails are due
    signed = on_schedule(services)
    assert [(cp.workspace, cp.seq) for cp in signed] == [("zzz-healthy", 3)]
    assert store.latest_checkpoint("aaa-planted") is None
