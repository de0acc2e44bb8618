"""Routes of the evidence function: the ledger, its checkpoints and keys, verification."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from claros import jsonutil
from claros.api.http import ClarosResolver, json_response, query_int, routed
from claros.auth import ALL_KINDS, Principal
from claros.evidence.verify import verify_workspace

__all__ = ["register"]

ADMINS = frozenset({"admin"})
# Admin and audit keys read records; the other kinds get the chain without them.
RECORD_READERS = frozenset({"admin", "audit"})
MAX_PAGE = 10_000


def register(app: ClarosResolver) -> None:
    store = app.services.store

    @routed(app, "GET", "/v1/ledger/pubkey", ALL_KINDS)
    def pubkeys(principal: Principal) -> Any:
        keys = store.public_keys(principal.workspace)
        return {"workspace": principal.workspace, "keys": [k.to_json() for k in keys]}

    @routed(app, "GET", "/v1/ledger/checkpoints", ALL_KINDS)
    def checkpoints(principal: Principal) -> Any:
        since = query_int(app, "since", 0)
        limit = query_int(app, "limit", 1000, minimum=1, maximum=MAX_PAGE)
        found = store.checkpoints(principal.workspace, since=since, limit=limit)
        body: dict[str, Any] = {
            "workspace": principal.workspace,
            "checkpoints": [cp.to_json() for cp in found],
        }
        if len(found) == limit:
            body["next"] = found[-1].seq
        return body

    @routed(app, "GET", "/v1/ledger/entries", ALL_KINDS)
    def entries(principal: Principal) -> Response[str]:
        since = query_int(app, "since", 0)
        limit = query_int(app, "limit", 1000, minimum=1, maximum=MAX_PAGE)
        lines = []
        last = since
        if principal.kind in RECORD_READERS:
            for entry, record in store.entries_with_records(
                principal.workspace, since=since, limit=limit
            ):
                lines.append(jsonutil.dumps({**entry.to_json(), "event": record}))
                last = entry.seq
        else:
            for entry in store.entries(principal.workspace, since=since, limit=limit):
                lines.append(jsonutil.dumps(entry.to_json()))
                last = entry.seq
        body = "".join(line + "\n" for line in lines)
        return Response(200, "application/x-ndjson", body, headers={"x-claros-next": str(last)})

    @routed(app, "GET", "/api/evidence/verify", ADMINS)
    def verify(principal: Principal) -> Any:
        return json_response(verify_workspace(store, principal.workspace).to_json())
