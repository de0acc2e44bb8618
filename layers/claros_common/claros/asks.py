"""Asks: a question to a person when a rule answers "ask", and the approval that follows.

Routing (evidence.txt): an ask from a person's agent goes to that person first when they
may answer it themselves: they own (or are one of the owners of) every rule that asked, or
are a workspace admin. Otherwise it goes to the asking rules' owners, never to that person
(owning one of two asking rules does not make the other's call theirs); when no one else
owns an asking rule, to the workspace admins.

An approval is bound to the exact call (sha256 of app, tool and the arguments as sent:
:func:`call_hash`), to the facts the asking rules read (:func:`facts_hash`), to the rule
versions asked, and to an expiry, and it is used once: the guard repeats the check with
``approval: <ask_id>``. Only a person answers (a person key or an admin key, never an
agent's or a service key), and never with the key that asked or any key derived from it
(minted from it, directly or not, or a web session opened with one of those).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from claros import cursors
from claros.ask_queue import close_writes, open_writes
from claros.auth import PERSON_KINDS, Principal, member_role
from claros.canonical import CanonicalError, out_of_range
from claros.checkpoints import record
from claros.clock import new_id, now_ms
from claros.errors import BadRequestError, ConflictError, ForbiddenError, NotFoundError
from claros.paths import get_path
from claros.rules.expr import parse_when
from claros.store.base import ConflictError as StoreConflictError
from claros.store.base import DocWrite, NewRecord, Store
from claros.wiring import Services

if TYPE_CHECKING:  # the answer's model: the admin API's and the pages' (claros.ask_answer)
    from claros.ask_answer import AnswerRequest

__all__ = [
    "ASK_FILTERS",
    "AskPage",
    "answer_ask",
    "ask_view",
    "call_hash",
    "exact_sha256",
    "facts_hash",
    "my_asks_page",
    "open_ask",
    "use_approval",
    "visible_ask",
]

COLLECTION = "ask"
_ASK_ID = re.compile(r"^ask_[0-9a-f]{28}$")


def _exact(value: Any, out: list[str]) -> None:
    """``value`` as JSON that keeps everything a server may read: empty values (the ledger's
    canonical JSON leaves out null, "", [] and {}, so ``"mfa_devices": []`` would vanish)
    and numbers as written (canonical JSON writes the double, so two ids past 2**53 that
    round to one double, or 0.1 and 0.10000000000000000001, would be one number)."""
    if isinstance(value, str):
        out.append(json.dumps(value))  # ASCII escapes: a lone surrogate is text too
    elif value is True or value is False or value is None:
        out.append("true" if value is True else "false" if value is False else "null")
    elif isinstance(value, int | Decimal | float):
        out.append(_exact_number(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, key in enumerate(sorted(value, key=str)):
            if not isinstance(key, str):
                raise CanonicalError(f"object key is not a string: {key!r}")
            out.append("," if i else "")
            out.append(json.dumps(key))
            out.append(":")
            _exact(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            out.append("," if i else "")
            _exact(item, out)
        out.append("]")
    else:
        raise CanonicalError(f"not a JSON value: {type(value).__name__}")


def _exact_number(value: int | Decimal | float) -> str:
    if isinstance(value, int):
        return str(int(value))
    if not (value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)):
        raise out_of_range(value)
    return str(value) if isinstance(value, Decimal) else repr(value)


def exact_sha256(value: Any) -> str:
    """sha256 of ``value`` written exactly (:func:`_exact`): what an approval binds to."""
    out: list[str] = []
    _exact(value, out)
    return hashlib.sha256("".join(out).encode()).hexdigest()


def call_hash(app: str, tool: str, arguments: Mapping[str, Any]) -> str:
    """The call an approval covers: app, tool and the arguments exactly as sent (two calls
    that differ in any way a server could see never share it)."""
    return exact_sha256({"app": app, "tool": tool, "arguments": arguments})


def facts_read(rules: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """The fields the asking rules' ``when`` read, sorted; None when one of them has no
    ``when`` (the judge reads every fact and the context)."""
    fields: set[str] = set()
    for rule in rules:
        when = rule["rule"].get("when")
        if not when:
            return None
        fields |= parse_when(str(when)).fields()
    return sorted(fields)


def facts_hash(
    rules: Sequence[Mapping[str, Any]], facts: Mapping[str, Any], context: Mapping[str, Any]
) -> str:
    """What the asking rules decided on: the value of every field their ``when`` read (the
    record fetched for the call included), or, for a rule the judge decides, every fact and
    the context. A record changed after the person approved (an invoice raised from 600 to
    600,000 by another write) changes it, and the approval no longer applies."""
    fields = facts_read(rules)
    if fields is None:
        return exact_sha256({"facts": facts, "context": context})
    return exact_sha256({path: get_path(facts, path) for path in fields})


def _mine(person: str) -> str:
    return f"ask_for:{person}"


def _owners(rules: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for rule in rules:
        for owner in rule["rule"].get("owners") or []:
            seen[str(owner)] = None
    return list(seen)


def _admins(store: Store, workspace: str) -> list[str]:
    return [
        doc.key
        for doc in store.query_docs(workspace, "member", limit=1000)
        if doc.value.get("role") == "admin"
    ]


def _may_answer_all(
    store: Store, workspace: str, person: str, rules: Sequence[Mapping[str, Any]]
) -> bool:
    """Whether ``person`` may answer for every asking rule: they are among each one's
    owners, or a workspace admin. Owning some of them is not enough: the others' owners
    would never see a call made under their rule."""
    if _owns_all(person, (rule["rule"] for rule in rules)):
        return True
    return member_role(store, workspace, person) == "admin"


def _owns_all(person: str, specs: Iterable[Mapping[str, Any]]) -> bool:
    """Whether ``person`` is among the owners of every rule written in ``specs`` (and
    there is at least one); stops at the first they do not own."""
    found = False
    for spec in specs:
        if person not in (spec.get("owners") or []):
            return False
        found = True
    return found


def open_ask(
    services: Services,
    principal: Principal,
    *,
    check_id: str,
    app: str,
    tool: str,
    arguments: Mapping[str, Any],
    rules: Sequence[Mapping[str, Any]],
    on_behalf_of: str | None,
    messages: list[dict[str, str]],
    decided_on: str,
) -> tuple[dict[str, Any], list[DocWrite]]:
    """The ask doc and the writes that open it (in the check's own transaction)."""
    store, workspace = services.store, principal.workspace
    owners = _owners(rules)
    others = [owner for owner in owners if owner != on_behalf_of]
    if on_behalf_of and _may_answer_all(store, workspace, on_behalf_of, rules):
        routed_to, route = [on_behalf_of], "self"
    elif others:
        routed_to, route = others, "owners"
    else:
        routed_to, route = _admins(store, workspace), "admins"
    now = now_ms()
    ask_id = new_id("ask")
    ask: dict[str, Any] = {
        "ask_id": ask_id,
        "workspace": workspace,
        "check_id": check_id,
        "status": "open",
        "app": app,
        "tool": tool,
        "call_hash": call_hash(app, tool, arguments),
        "facts_hash": decided_on,
        "rules": [{"id": r["id"], "version": r["version"], "hash": r["hash"]} for r in rules],
        "owners": owners,
        "routed_to": routed_to,
        "route": route,
        "on_behalf_of": on_behalf_of,
        "key_id": principal.key_id,
        "messages": messages,
        "opened_at": now,
        "expires_at": now + services.settings.ask_ttl_s * 1000,
    }
    writes = [DocWrite(workspace, COLLECTION, ask_id, ask, 0)]
    writes += [DocWrite(workspace, _mine(p), ask_id, {"ask_id": ask_id}, 0) for p in routed_to]
    writes += open_writes(ask)  # the asks queue (claros.ask_queue)
    return ask, writes


def ask_view(ask: Mapping[str, Any], now: int | None = None) -> dict[str, Any]:
    """What the guard and the asked person see."""
    now = now or now_ms()
    status = ask["status"]
    if status == "open" and now > int(ask["expires_at"]):
        status = "expired"
    view = {
        k: ask.get(k)
        for k in (
            "ask_id", "check_id", "app", "tool", "rules", "routed_to", "route",
            "on_behalf_of", "messages", "opened_at", "expires_at", "decision",
            "decided_by", "authority", "decided_at", "note", "approval_expires_at",
        )
    }  # fmt: skip
    view["status"] = status
    return {k: v for k, v in view.items() if v is not None}


def get_ask(store: Store, workspace: str, ask_id: str) -> tuple[dict[str, Any], int]:
    doc = store.get_doc(workspace, COLLECTION, ask_id)
    if doc is None:
        raise NotFoundError(f"no ask {ask_id!r}")
    return dict(doc.value), doc.rev


def visible_ask(store: Store, principal: Principal, ask_id: str) -> dict[str, Any]:
    """An ask as the guard waiting on it reads it: only the key that made the check (and
    the workspace's admins) see it; to any other key it does not exist (404)."""
    ask, _ = get_ask(store, principal.workspace, ask_id)
    if ask.get("key_id") != principal.key_id and not principal.is_admin:
        raise NotFoundError(f"no ask {ask_id!r}")
    return ask


ASK_FILTERS = ("open", "all", "answered")  # which of the person's asks a listing shows
# Asks read per page at most: a listing of answered asks skips the open ones (and the
# reverse), so a page may come back short, with a cursor to read on (as Activity does).
ASK_SCAN_LIMIT = 1_000
_ASK_CURSOR = "a1:"


def encode_ask_cursor(ask_id: str) -> str:
    return cursors.encode(_ASK_CURSOR, ask_id)


def decode_ask_cursor(cursor: str) -> str:
    return cursors.decode(_ASK_CURSOR, _ASK_ID, cursor)


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class AskPage(NamedTuple):
    asks: list[dict[str, Any]]  # ask views, newest first
    next: str | None  # the cursor of the next page (opaque), None on the last


def _wanted(show: str, view: Mapping[str, Any]) -> bool:
    if show == "all":
        return True
    return bool(view["status"] == "open") == (show == "open")


def my_asks_page(
    store: Store,
    principal: Principal,
    *,
    show: str = "open",
    limit: int = 50,
    cursor: str | None = None,
) -> AskPage:
    """A page of the asks routed to the caller, newest first: the open ones, every one
    (``all``) or those no longer open (``answered``: approved, denied or expired). The page
    ends with a cursor whenever more may follow, so no listing stops silently."""
    if not principal.person:
        raise ForbiddenError("asks are answered by people: use a person's key")
    if show not in ASK_FILTERS:
        raise BadRequestError(f"show must be one of {', '.join(ASK_FILTERS)}, not {show!r}")
    after = decode_ask_cursor(cursor) if cursor else None
    out: list[dict[str, Any]] = []
    now = now_ms()
    scanned = 0
    last: str | None = None  # the last key read: where the next page starts
    while True:
        page = store.query_docs(
            principal.workspace, _mine(principal.person), after=after, limit=100, descending=True
        )
        for doc in page:
            ask = store.get_doc(principal.workspace, COLLECTION, doc.key)
            if ask is not None and _wanted(show, view := ask_view(ask.value, now)):
                if len(out) == limit:  # one past the page: there is a next page
                    return AskPage(out, encode_ask_cursor(str(last)))
                out.append(view)
            last = doc.key
            scanned += 1
            if scanned >= ASK_SCAN_LIMIT:  # a short page; read on from here
                return AskPage(out, encode_ask_cursor(doc.key))
        if len(page) < 100:
            return AskPage(out, None)
        after = page[-1].key


def _owns_every_rule(store: Store, workspace: str, person: str, ask: Mapping[str, Any]) -> bool:
    """Whether ``person`` is an owner of every rule version the ask was opened under (as
    those versions were written: the ask holds only to them, claros.asks.use_approval)."""
    versions = (
        store.get_record(workspace, "rule_version", f"{rule['id']}@{rule['version']}") or {}
        for rule in ask.get("rules") or []
    )
    return _owns_all(person, (version.get("rule") or {} for version in versions))


def _authority(store: Store, principal: Principal, ask: Mapping[str, Any]) -> str:
    person = principal.person
    if not person or principal.kind not in PERSON_KINDS:
        raise ForbiddenError(
            f"{principal.kind} keys never answer asks: a person answers with their person key"
        )
    if principal.key_id == ask["key_id"]:
        raise ForbiddenError("the key that asked cannot answer its own ask")
    if principal.derives_from(str(ask["key_id"])):
        raise ForbiddenError(
            "this key is derived from the key that made the check (minted from it): it "
            "cannot answer that check's ask"
        )
    if person == ask.get("on_behalf_of"):
        # Their own agent's call is theirs to approve while they may answer for every
        # asking rule: they own each one, or they are a workspace admin. Decided now, not
        # when the ask opened: an admin demoted since answers it no more ("self" routed it
        # to her then), and one made admin since may (routed past her then).
        if member_role(store, principal.workspace, person) == "admin":
            return "self" if ask["route"] == "self" else "admin"
        if ask["route"] == "self" and _owns_every_rule(store, principal.workspace, person, ask):
            return "self"
        raise ForbiddenError(
            f"{person} may not answer an ask from their own agent under rules they do not "
            f"own, not being a workspace admin (it is routed to {', '.join(ask['routed_to'])})"
        )
    if person in (ask.get("owners") or []):
        return "owner"
    if member_role(store, principal.workspace, person) == "admin":
        return "admin"
    raise ForbiddenError(
        f"{person} may not answer this ask (it is routed to {', '.join(ask['routed_to'])})"
    )


def answer_ask(
    services: Services, principal: Principal, ask_id: str, answer: AnswerRequest
) -> dict[str, Any]:
    store, workspace = services.store, principal.workspace
    ask, rev = get_ask(store, workspace, ask_id)
    now = now_ms()
    if ask["status"] != "open":
        raise ConflictError(f"ask {ask_id} is {ask['status']} already")
    if now > int(ask["expires_at"]):
        raise ConflictError(f"ask {ask_id} expired; the agent must ask again")
    authority = _authority(store, principal, ask)
    decision = "approved" if answer.decision == "approve" else "denied"
    updated = {
        **ask,
        "status": decision,
        "decision": answer.decision,
        "decided_by": principal.person,
        "authority": authority,
        "decided_at": now,
        "note": answer.note,
    }
    if decision == "approved":
        updated["approval_expires_at"] = now + services.settings.approval_ttl_s * 1000
    approval = {
        "workspace": workspace,
        "ask_id": ask_id,
        "check_id": ask["check_id"],
        "decision": answer.decision,
        "authority": authority,
        "decided_by": principal.person,
        "note": answer.note,
        "opened_at": ask["opened_at"],
        "decided_at": now,
        "call_hash": ask["call_hash"],
        "facts_hash": ask.get("facts_hash"),
        "rules": ask["rules"],
        "on_behalf_of": ask.get("on_behalf_of"),
        "expires_at": updated.get("approval_expires_at"),
    }
    try:
        record(
            services,
            workspace,
            [NewRecord("approval", ask_id, approval)],
            [DocWrite(workspace, COLLECTION, ask_id, updated, rev), *close_writes(ask)],
        )
    except StoreConflictError as exc:  # lost a race with another answer
        raise ConflictError(f"ask {ask_id} was answered meanwhile") from exc
    return ask_view(updated, now)


def use_approval(
    store: Store,
    principal: Principal,
    ask_id: str,
    *,
    app: str,
    tool: str,
    arguments: Mapping[str, Any],
    deciding: Sequence[Mapping[str, Any]],
    decided_on: str,
) -> tuple[dict[str, Any], DocWrite]:
    """Check an approval against the call it is used for and the facts its rules read now
    (``decided_on``: :func:`facts_hash`); the write marks it used."""
    workspace = principal.workspace
    ask, rev = get_ask(store, workspace, ask_id)
    if ask["key_id"] != principal.key_id:
        raise ForbiddenError("an approval is used by the key that asked for it")
    if ask["status"] == "used":
        raise ConflictError(f"approval {ask_id} was used already; ask again")
    if ask["status"] != "approved":
        raise ConflictError(f"ask {ask_id} is {ask_view(ask)['status']}, not approved")
    if now_ms() > int(ask["approval_expires_at"]):
        raise ConflictError(f"approval {ask_id} expired; ask again")
    if ask["call_hash"] != call_hash(app, tool, arguments):
        raise ConflictError(f"approval {ask_id} was given for a different call")
    if ask.get("facts_hash") != decided_on:
        read = facts_read(deciding)
        what = ", ".join(read) if read else "the facts the judge read"
        raise ConflictError(
            f"approval {ask_id} was given on other facts than the call has now ({what} read "
            "otherwise when it was asked); ask again"
        )
    asked = {(r["id"], r["version"], r["hash"]) for r in ask["rules"]}
    now_deciding = {(r["id"], r["version"], r["hash"]) for r in deciding}
    if not now_deciding <= asked:
        raise ConflictError(
            f"approval {ask_id} was given under other rule versions than apply now; ask again"
        )
    used = {**ask, "status": "used", "used_at": now_ms()}
    return ask, DocWrite(workspace, COLLECTION, ask_id, used, rev)
