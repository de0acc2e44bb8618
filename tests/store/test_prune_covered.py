"""A prune's own entry is covered by a signed checkpoint before anything is dropped, on
both stores (evidence.txt, "Retention"; THREATS.md §3-4). Locally the prune signs it
inline. In AWS the prune role may not sign: the checkpoint function signs a ``prune``
entry as soon as the ledger's stream shows it (not only at every N-th entry), and the
prune waits for that checkpoint before it deletes; without it, nothing is dropped."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from claros.api.checkpoint import on_stream
from claros.checkpoints import sign_checkpoint
from claros.config import Settings
from claros.evidence.retention import prune_through
from claros.evidence.verify import verify_workspace
from claros.ledger import Entry
from claros.signing import FileSigner
from claros.store.base import Store
from claros.wiring import Services

WS = "acme"


def _history(store: Store, signer: FileSigner) -> list[Entry]:
    entries = [store.append(WS, "check", f"c{i}", {"result": "allow", "n": i}) for i in range(6)]
    sign_checkpoint(store, signer, entries[3])  # the checkpoint at the cut
    return entries


def _insert_event(entry: Entry) -> dict[str, Any]:
    """The ledger stream's record of ``entry`` (what DynamoDB would deliver)."""
    image = {
        "workspace": {"S": entry.workspace}, "seq": {"N": str(entry.seq)},
        "kind": {"S": entry.kind}, "ref_id": {"S": entry.ref_id}, "ts": {"N": str(entry.ts)},
        "payload_sha256": {"S": entry.payload_sha256}, "prev_hash": {"S": entry.prev_hash},
        "hash": {"S": entry.hash},
    }  # fmt: skip
    return {
        "Records": [
            {
                "eventName": "INSERT",
                "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/ledger/stream/x",
                "dynamodb": {"NewImage": image},
            }
        ]
    }


def _services(store: Store, tmp_path: Path, *, inline: bool) -> Services:
    # checkpoint_every far above the history: only the prune entry can be why it signs.
    settings = Settings(data_dir=tmp_path / "data", checkpoint_every=1000,
                        inline_checkpoints=inline)  # fmt: skip
    return Services(settings, store, FileSigner(tmp_path / "data"))


def test_local_prune_signs_its_entry_before_it_drops(store: Store, tmp_path: Path) -> None:
    services = _services(store, tmp_path, inline=True)
    entries = _history(store, services.signer)
    done = prune_through(services, entries[3], 365)
    assert done["pruned"] is True, done
    head = store.head(WS)
    assert head is not None and head.kind == "prune"
    latest = store.latest_checkpoint(WS)
    assert latest is not None and latest.seq == head.seq
    assert verify_workspace(store, WS).ok


def test_aws_prune_waits_for_the_stream_to_sign_its_entry(store: Store, tmp_path: Path) -> None:
    prune_side = _services(store, tmp_path, inline=False)  # the prune role: cannot sign
    signer_side = _services(store, tmp_path, inline=False)  # the checkpoint function
    entries = _history(store, signer_side.signer)
    result: dict[str, Any] = {}
    pruning = threading.Thread(
        target=lambda: result.update(prune_through(prune_side, entries[3], 365, cover_wait_s=30))
    )
    pruning.start()
    try:
        appended = threading.Event()
        for _ in range(200):  # bounded: the prune entry is its first write
            head = store.head(WS)
            if head is not None and head.kind == "prune":
                appended.set()
                break
            appended.wait(0.05)
        assert appended.is_set(), "the prune wrote no entry"
        assert head is not None
        # Nothing is dropped before its entry is covered.
        assert [e.seq for e in store.entries(WS)][0] == 1
        [cp] = on_stream(signer_side, _insert_event(head))
        assert cp.seq == head.seq
    finally:
        pruning.join(timeout=60)
    assert not pruning.is_alive()
    assert result["pruned"] is True, result
    assert [e.seq for e in store.entries(WS)][0] == 5
    assert verify_workspace(store, WS).ok


def test_aws_prune_without_its_checkpoint_drops_nothing(store: Store, tmp_path: Path) -> None:
    services = _services(store, tmp_path, inline=False)
    entries = _history(store, services.signer)
    done = prune_through(services, entries[3], 365, cover_wait_s=0)
    assert done["pruned"] is False and "no signed checkpoint covers it" in done["message"]
    assert [e.seq for e in store.entries(WS)][0] == 1
    assert store.get_record(WS, "check", "c0") is not None
    # The stream's checkpoint arrives later: the prune run again goes on with its entry.
    head = store.head(WS)
    assert head is not None and head.kind == "prune"
    on_stream(services, _insert_event(head))
    again = prune_through(services, entries[3], 365, cover_wait_s=0)
    assert again["pruned"] is True, again
    assert store.head(WS) == head  # no second prune entry
    assert [e.seq for e in store.entries(WS)][0] == 5
    assert verify_workspace(store, WS).ok


def test_stream_does_not_sign_other_kinds_off_the_interval(store: Store, tmp_path: Path) -> None:
    services = _services(store, tmp_path, inline=False)
    entries = _history(store, services.signer)
    assert on_stream(services, _insert_event(entries[5])) == []
