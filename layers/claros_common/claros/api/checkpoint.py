"""Routes and events of the checkpoint function, which signs (as the signer role).

* ``POST /v1/ledger/checkpoints`` (admins): sign a checkpoint at the head now;
* the ledger table's stream: sign at every entry whose seq is a multiple of N, at every
  ``prune`` entry (the prune waits for it before it deletes) and at every ``public_key``
  entry (rotate-key waits for it before it moves the workspace's alias to the new key);
* the ledger and records tables' streams: a MODIFY or REMOVE outside a prune is tampering
  (claros.tamper): recorded, counted as ``LedgerTampered``, and signing stops;
* the schedule: sign any workspace whose tail stayed unsigned too long.

A stream record is only a hint of where to look: the entry signed is the one the ledger
holds at that seq, after the chain up to it verified (``sign_checkpoint``), so a made-up
event signs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from claros.api.http import ClarosResolver, json_response, routed
from claros.auth import Principal, workspaces
from claros.checkpoints import Tail, entry_at, sign_checkpoint, sign_due, unsigned_tails
from claros.clock import now_ms
from claros.errors import ConflictError
from claros.evidence.verified import catch_up_quietly
from claros.ledger import PRUNE_KIND, PUBLIC_KEY_KIND, Checkpoint, Entry
from claros.signing import SigningError
from claros.tamper import DynamoItems, PruneReads, tampering_in
from claros.wiring import Services

log = logging.getLogger("claros.checkpoint")

__all__ = ["on_schedule", "on_stream", "register"]

# The entries a checkpoint covers as soon as the stream shows them (whatever their seq):
# someone who may not sign waits for that checkpoint to go on.
SIGNED_AT_ONCE = frozenset({PRUNE_KIND, PUBLIC_KEY_KIND})


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


def _items(services: Services) -> DynamoItems | None:
    """The watched tables, read back to check a stream record against (AWS only)."""
    client = getattr(services.store, "client", None)
    if client is None:
        return None
    settings = services.settings
    return DynamoItems(client, settings.ledger_table, settings.records_table)


def _watch(services: Services, record: Mapping[str, Any], reads: PruneReads | None) -> None:
    if services.tamper is None:
        return
    found = tampering_in(record, services.tamper, _items(services), reads)
    if found is not None and services.tamper.record(found):
        log.error(
            "LEDGER TAMPERED: %s of a %s item %s in workspace %s; signing is stopped",
            found.event, found.table, found.key, found.workspace,
        )  # fmt: skip
        services.metric("LedgerTampered", 1)


def on_stream(services: Services, event: Mapping[str, Any]) -> list[Checkpoint]:
    """DynamoDB stream batch: tampering is recorded first; then each new entry at a
    multiple of N is signed, if the ledger holds that very entry and its chain verifies."""
    every = services.settings.checkpoint_every
    records = list(event.get("Records", []))
    reads = PruneReads(services.tamper) if services.tamper is not None else None
    for record in records:
        _watch(services, record, reads)
    signed = []
    for record in records:
        if record.get("eventName") != "INSERT" or "NewImage" not in record.get("dynamodb", {}):
            continue
        try:
            claimed = _entry_from_image(record["dynamodb"]["NewImage"])
        except (KeyError, ValueError, TypeError):
            log.warning("a stream record that is no ledger entry: %s", record.get("eventID"))
            continue
        # A prune's entry is signed at once too: the prune function (which may not sign)
        # waits for this checkpoint before it drops anything (claros.evidence.retention);
        # so is a key's announcement: the operator's rotate-key (who may not sign either)
        # waits for the old key's checkpoint over it before the new key becomes active.
        if claimed.seq % every != 0 and claimed.kind not in SIGNED_AT_ONCE:
            continue
        stored = entry_at(services.store, claimed.workspace, claimed.seq)
        if stored != claimed:
            log.warning(
                "not signing workspace %s seq %s: the stream record is not the ledger's entry",
                claimed.workspace, claimed.seq,
            )  # fmt: skip
            services.metric("CheckpointRefused", 1)
            continue
        try:
            signed.append(sign_checkpoint(services.store, services.signer, stored, services.anchor))
        except SigningError as exc:
            # Retrying the batch would not help; the refusal is logged and counted.
            log.error("CHECKPOINT REFUSED: %s", exc)
            services.metric("CheckpointRefused", 1)
    _catch_up(services, {cp.workspace for cp in signed})
    return signed


def _catch_up(services: Services, names: Iterable[str]) -> None:
    """The verified-through state of each workspace, made or moved on one bounded step
    (claros.evidence.verified.catch_up): only this function's role may keep it."""
    if not services.settings.keeps_verified_state:
        return
    for workspace in sorted(names):
        catch_up_quietly(services.store, workspace)


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
    signed = sign_due(
        services.store,
        services.signer,
        tails,
        every=settings.checkpoint_every,
        max_age_s=settings.checkpoint_max_age_s,
        now=now,
        anchor=services.anchor,
    )
    # Every workspace, signed now or not: an idle ledger's first state is made (a step
    # per tick) even when no new checkpoint comes.
    _catch_up(services, workspaces(services.store))
    return signed
