"""The admin's acknowledgement of tampering (AWS; claros.tamper).

``POST /api/evidence/tampering/{tamper_id}/acknowledge`` (admins): after looking into a
``LedgerTampered`` alarm (and restoring the tables from point-in-time recovery if they were
rewritten), an admin says so. The acknowledgement is a ledger entry of its own (kind
``tampering_ack``: who, when, their note), once per tampering record; signing for the
workspace resumes when none is left unacknowledged, and verify keeps listing both.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claros.api.http import ClarosResolver, json_response, parse_body, routed
from claros.auth import Principal
from claros.checkpoints import record
from claros.clock import now_ms
from claros.errors import ConflictError, NotFoundError
from claros.store.base import ConflictError as StoreConflictError
from claros.store.base import DocWrite, NewRecord
from claros.tamper import ACK_KIND, ACKS, acknowledgement_doc, doc_recorded

__all__ = ["register"]

ADMINS = frozenset({"admin"})


class Acknowledgement(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    note: str = Field(min_length=1, max_length=2000)


def register(app: ClarosResolver) -> None:
    services = app.services

    @routed(app, "POST", "/api/evidence/tampering/{tamper_id}/acknowledge", ADMINS)
    def acknowledge(principal: Principal, tamper_id: str) -> Any:
        body = parse_body(app, Acknowledgement)
        log = services.tamper
        found = None
        if log is not None:
            found = next((t for t in log.list(principal.workspace) if t.id == tamper_id), None)
        if found is None:
            raise NotFoundError(f"no tampering {tamper_id!r} is recorded for this workspace")
        ack = {
            "tampering": found.to_json(),
            "by": principal.person or principal.key_id,
            "at": now_ms(),
            "note": body.note,
        }
        # A doc there with no entry of its own counts for nothing (claros.tamper.
        # doc_recorded: put by this function's role around the route) and is replaced.
        before = acknowledgement_doc(services.store, principal.workspace, tamper_id)
        if before is not None and doc_recorded(services.store, principal.workspace, before):
            raise ConflictError(f"tampering {tamper_id} is acknowledged already")
        try:
            # The entry, and the doc the signer reads (claros.tamper.acknowledgement),
            # which only this function's role may write (written once: a second answer
            # is a 409): one transaction. The entry's ref_id carries the time, so that a
            # tampering_ack record put there before (by a role that may append, or by an
            # acknowledgement of an earlier version, which the signer no longer reads)
            # never stands in the admin's way.
            [entry] = record(
                services,
                principal.workspace,
                [NewRecord(ACK_KIND, f"{tamper_id}@{ack['at']}", ack)],
                [DocWrite(principal.workspace, ACKS, tamper_id, ack,
                          before.rev if before is not None else 0)],
            )  # fmt: skip
        except StoreConflictError as exc:
            raise ConflictError(f"tampering {tamper_id} is acknowledged already") from exc
        return json_response({**ack, "seq": entry.seq}, 201)
