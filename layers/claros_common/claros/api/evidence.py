"""Routes of the evidence function, which only reads: the ledger, its checkpoints and keys,
verification, the stream for SIEMs, the AIUC-1 pack and oversight per owner."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from claros.api.http import ClarosResolver, json_response, query_int, routed
from claros.auth import ALL_KINDS, Principal
from claros.errors import BadRequestError
from claros.evidence.aiuc1 import aiuc1_pack
from claros.evidence.lines import entry_line, kept_line
from claros.evidence.oversight import oversight
from claros.evidence.verified import keep_full, state_json, verified_report
from claros.evidence.verify import verify_workspace
from claros.ledger import READ_KINDS, Entry
from claros.tamper import report as tampering_report

__all__ = ["register"]

ADMINS = frozenset({"admin"})
# Admin and audit keys read records; the other kinds get the chain without them.
RECORD_READERS = frozenset({"admin", "audit"})
MAX_PAGE = 10_000
# A Lambda answers at most 6 MB (JSON-escaped): a page stops near this many bytes.
MAX_PAGE_BYTES = 4_000_000
MAX_DAYS = 3660


def register(app: ClarosResolver) -> None:
    store = app.services.store
    settings = app.services.settings

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
        readers = principal.kind in RECORD_READERS
        return _page(app, principal, with_records=readers, with_kept=readers)

    @routed(app, "GET", "/api/evidence/verify", ADMINS)
    def verify(principal: Principal) -> Any:
        """The verified-through state brought up to the head (only the new segment is
        verified: fast at any size); ``full=true`` verifies the whole chain now."""
        full = (app.current_event.query_string_parameters or {}).get("full", "false")
        if full not in ("true", "false"):
            raise BadRequestError("full must be true or false")
        workspace = principal.workspace
        keep = app.services.settings.keeps_verified_state
        if full == "true":
            report = verify_workspace(store, workspace)
            keep_full(store, workspace, report, keep=keep)
        else:
            report = verified_report(store, workspace, keep=keep)
        body = {**report.to_json(), "verified": state_json(store, workspace)}
        tamper = app.services.tamper
        if tamper is None:
            return json_response(body)
        # AWS: what the tables' streams showed; unacknowledged tampering fails the verify.
        listed, failures = tampering_report(store, tamper, workspace)
        body["failures"] = [*body["failures"], *(f.to_json() for f in failures)]
        body["ok"] = not body["failures"]
        return json_response({**body, "tampering": listed})

    @routed(app, "GET", "/api/evidence/stream", ADMINS)
    def stream(principal: Principal) -> Response[str]:
        return _page(app, principal, with_records=True)

    @routed(app, "GET", "/api/evidence/aiuc1", ADMINS)
    def aiuc1(principal: Principal) -> Any:
        days = query_int(app, "days", 90, minimum=1, maximum=MAX_DAYS)
        fast = query_int(app, "fast_seconds", settings.fast_approval_s, maximum=86_400)
        return aiuc1_pack(store, principal.workspace, days=days, fast_seconds=fast,
                          keep_state=app.services.settings.keeps_verified_state)  # fmt: skip

    @routed(app, "GET", "/api/evidence/oversight", ADMINS)
    def owners(principal: Principal) -> Any:
        days = query_int(app, "days", 90, minimum=1, maximum=MAX_DAYS)
        fast = query_int(app, "fast_seconds", settings.fast_approval_s, maximum=86_400)
        return oversight(store, principal.workspace, days=days, fast_seconds=fast)


def _page(
    app: ClarosResolver, principal: Principal, *, with_records: bool, with_kept: bool = False
) -> Response[str]:
    """One page of entries as JSON lines (the stream's shape: each record, when given, is
    its canonical JSON as ``event``), at most ``limit`` lines and about MAX_PAGE_BYTES;
    ``x-claros-next`` is the seq to resume from. ``with_kept``: the first page of a pruned
    log starts with the rule and mapping versions kept below the cut (``kept`` lines, as
    in the export), so a verifier can check them against the prune entries. Without
    ``with_records``, the records of prune and public key entries are still given (they
    hold only seqs, hashes and public keys): every verifier checks what accounts for a
    pruned log and which keys a rotation introduced."""
    since = query_int(app, "since", 0)
    limit = query_int(app, "limit", 1000, minimum=1, maximum=MAX_PAGE)
    store = app.services.store
    lines: list[bytes] = []
    size, last = 0, since
    ws = principal.workspace
    if with_kept and since == 0:
        first = next(iter(store.entries(ws, limit=1)), None)
        if first is not None and first.seq > 1:
            lines = [kept_line(k) for k in store.kept_records(ws, first.seq - 1)]
    rows: Iterator[tuple[Entry, bytes | None]] = store.entries_with_raw_records(
        ws, since=since, limit=limit
    )
    for entry, raw in rows:
        line = entry_line(entry, raw, with_record=with_records or entry.kind in READ_KINDS)
        if lines and size + len(line) > MAX_PAGE_BYTES:
            break  # the rest comes with the next page
        lines.append(line)
        size, last = size + len(line), entry.seq
    body = b"".join(lines).decode("utf-8")
    return Response(200, "application/x-ndjson", body, headers={"x-claros-next": str(last)})
