"""Routes and events of the checkpoint function, the only one that may sign.

* ``POST /v1/ledger/checkpoints`` (admins): sign a checkpoint at the head now;
* the ledger table's stream: sign at every entry whose seq is a multiple of N;
* the schedule: sign any workspace whose tail stayed unsigned too long.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from claros.api.http import ClarosResolver, json_response, routed
from claros.auth import Principal
from claros.checkpoints import Tail, sign_checkpoint, sign_due, unsigned_tails
from claros.clock import now_ms
from claros.errors import ConflictError
from claros.ledger import Checkpoint, Entry
from claros.wiring import Services

__all__ = ["on_schedule", "on_stream", "register"]


def register(app: ClarosResolver) -> None:
    services = app.services

    @routed(app, "POST", "/v1/ledger/checkpoints", frozenset({"admin"}))
    def checkpoint_now(principal: Principal) -> Any:
        head = services.store.head(principal.workspace)
        if head is None:
            raise ConflictError("the ledger is empty: nothing to sign yet")
        cp = sign_checkpoint(services.store, services.signer, head, services.anchor)
        return json_response(cp.to_json(), 201)


def _entry_from_image(image: Mapping[str, Any]) -> Entry:
    def s(name: str) -> str:
        return str(image[name]["S"])

    def n(name: str) -> int:
        return int(image[name]["N"])

    return Entry(
        s("workspace"), n("seq"), s("kind"), s("ref_id"), n("ts"),
        s("payload_sha256"), s("prev_hash"), s("hash"),
    )  # fmt: skip


def on_stream(services: Services, event: Mapping[str, Any]) -> list[Checkpoint]:
    """DynamoDB stream batch of new ledger entries: sign at each multiple of N."""
    every = services.settings.checkpoint_every
    signed = []
    for record in event.get("Records", []):
        if record.get("eventName") != "INSERT":
            continue
        entry = _entry_from_image(record["dynamodb"]["NewImage"])
        if entry.seq % every == 0:
            signed.append(sign_checkpoint(services.store, services.signer, entry, services.anchor))
    return signed


def checkpoint_lag(tails: Iterable[Tail], now: int) -> tuple[int, float]:
    """The largest (entries, seconds) any workspace's tail has stayed unsigned."""
    entries, seconds = 0, 0.0
    for tail in tails:
        entries = max(entries, tail.entries)
        seconds = max(seconds, (now - tail.oldest_ts) / 1000)
    return entries, seconds


def on_schedule(services: Services) -> list[Checkpoint]:
    settings, now = services.settings, now_ms()
    # One pass over the workspaces serves both the lag metrics and the heartbeat.
    tails = list(unsigned_tails(services.store))
    lag_entries, lag_seconds = checkpoint_lag(tails, now)
    services.metric("CheckpointLagEntries", lag_entries)
    services.metric("CheckpointLagSeconds", lag_seconds)
    return sign_due(
        services.store,
        services.signer,
        tails,
        every=settings.checkpoint_every,
        max_age_s=settings.checkpoint_max_age_s,
        now=now,
        anchor=services.anchor,
    )
