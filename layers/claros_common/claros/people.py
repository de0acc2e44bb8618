"""Keys and people: list and revoke keys, add members, change their role, remove them.

Who may do what:

* an admin (the admin key, or a session opened with it) lists every key of the workspace,
  revokes any of them, and adds, promotes, demotes and removes members; never the last
  admin (the workspace would have nobody left to run it);
* any other person (a person key) sees their own keys and revokes their own agent keys;
* agent, service and audit keys do none of this (the routes accept person credentials only).

A revoked key is refused on its next request, and a web session opened with it ends (the
session re-checks its key on every request, ``claros.web.sessions``). Every change is a
ledger entry, so an auditor sees who could act when: ``key_revoked`` (ref_id: the key id)
and ``member_role`` (ref_id: ``<email>/<id>``; role ``admin``, ``member`` or ``removed``).
The server side (``python -m claros.auth revoke|demote``) records ``changed_by`` as
``SERVER``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, NamedTuple

from claros.auth import (
    DAY_MS,
    KEY_IDS,
    KEY_LIST,
    KEY_USE,
    PERSON_KINDS,
    Principal,
    audit_expiry,
    check_email,
    ensure_workspace,
    key_index_writes,
    key_refusal,
    key_writes,
    last_used,
    member_role,
    new_term,
)
from claros.checkpoints import record
from claros.clock import new_id, now_ms
from claros.errors import BadRequestError, ConflictError, ForbiddenError, NotFoundError
from claros.store.base import GLOBAL, MAX_BATCH_RECORDS, Doc, DocWrite, NewRecord, Store
from claros.store.base import ConflictError as StoreConflictError
from claros.wiring import Services

__all__ = [
    "Actor",
    "KeyPage",
    "SERVER",
    "add_person",
    "change_role",
    "find_key",
    "list_keys",
    "list_members",
    "make_key",
    "remove_member",
    "revoke_key",
    "server_keys",
]

SERVER = "server (python -m claros.auth)"  # who a change made on the server side is by
INDEXED = "key_index"  # (workspace, INDEXED, "v1"): the workspace's older keys are listed
MAX_ADMINS = 50  # the other admins' docs are checked in the same transaction as a demotion
PAGE = 50
Role = Literal["admin", "member"]


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class Actor(NamedTuple):
    """Who makes a change: a signed-in person (their principal) or the server side."""

    workspace: str
    name: str
    principal: Principal | None = None

    @classmethod
    def of(cls, principal: Principal) -> Actor:
        return cls(principal.workspace, principal.person or principal.key_id, principal)

    @property
    def is_admin(self) -> bool:
        return self.principal is None or self.principal.is_admin


# A NamedTuple, not a frozen dataclass: cheaper to define at cold start (claros.store.base).
class KeyPage(NamedTuple):
    keys: list[dict[str, Any]]
    next: str | None  # the cursor of the next page, None on the last


def _require_person(principal: Principal) -> None:
    if principal.kind not in PERSON_KINDS or not principal.person:
        raise ForbiddenError(
            f"{principal.kind} keys never list or revoke keys: a person does, with their "
            "person key (or an admin with the admin key)"
        )


def _require_admin(actor: Actor, what: str) -> None:
    if not actor.is_admin:
        raise ForbiddenError(f"only a workspace admin {what} (sign in with the admin key)")


# --- listing ----------------------------------------------------------------------------
def ensure_indexed(store: Store, workspace: str) -> bool:
    """List the keys made before keys were listed per workspace (once per workspace): a
    walk over every key, then a mark. A key made meanwhile is listed by create_key. True
    when the walk ran now (False: the keys were listed already)."""
    if store.get_doc(workspace, INDEXED, "v1") is not None:
        return False
    after: str | None = None
    while True:
        page = store.query_docs(GLOBAL, "key", after=after, limit=100)
        writes = [
            DocWrite(w.workspace, w.collection, w.key, w.value)  # unconditional: idempotent
            for doc in page
            if doc.value.get("workspace") == workspace
            for w in key_index_writes(workspace, doc.key, int(doc.value.get("created_at") or 0))
        ]
        for start in range(0, len(writes), 50):
            store.write_docs(writes[start : start + 50])
        if len(page) < 100:
            break
        after = page[-1].key
    store.write_docs([DocWrite(workspace, INDEXED, "v1", {"at": now_ms()})])
    return True


def server_keys(store: Store, workspace: str) -> Iterator[Doc]:
    """Every key of the workspace, newest first (the server side's list)."""
    for _, doc in _listed(store, workspace, after=None):
        yield doc


def key_view(store: Store, doc: Doc, now: int | None = None) -> dict[str, Any]:
    """What a key list shows of a key: never its hash beyond the 16-hex key id. Its
    ``status`` is what auth would do with it now (``claros.auth.key_refusal``, the check
    every request makes): ``active``, ``revoked`` (revoked itself), ``expired`` (an audit
    key past its expiry) or ``refused`` (it stands no more: ``refused`` says why, in the
    words a request with it is answered with, and ``refused_for`` names the cause:
    ``member``, ``admin``, ``audit`` or ``revoked``, a key it was minted from)."""
    info = doc.value
    now = now or now_ms()
    view: dict[str, Any] = {
        "key_id": doc.key[:16],
        "kind": info.get("kind"),
        "person": info.get("person"),
        "label": info.get("label") or "",
        "created_at": info.get("created_at"),
        "made_by": info.get("made_by"),
        "parent": (info.get("parent") or {}).get("key_id"),
        "parent_kind": (info.get("parent") or {}).get("kind"),
        "last_used_at": last_used(doc, store.get_doc(GLOBAL, KEY_USE, doc.key)),
        "revoked_at": info.get("revoked_at"),
        "revoked_by": info.get("revoked_by"),
        "status": "active",
    }
    if info.get("kind") == "audit":
        view["expires_at"] = audit_expiry(info)
    refusal = key_refusal(store, doc, now)
    if info.get("revoked_at"):
        view["status"] = "revoked"
    elif refusal is not None and refusal.problem == "expired":
        view["status"] = "expired"
    elif refusal is not None:
        view.update(status="refused", refused=refusal.message, refused_for=refusal.problem)
    return {k: v for k, v in view.items() if v is not None}


def _listed(store: Store, workspace: str, *, after: str | None) -> Iterator[tuple[str, Doc]]:
    """The workspace's keys, newest first, after the cursor ``after``: (cursor, key doc)."""
    ensure_indexed(store, workspace)
    while True:
        page = store.query_docs(workspace, KEY_LIST, after=after, limit=100, descending=True)
        for entry in page:
            doc = store.get_doc(GLOBAL, "key", str(entry.value["digest"]))
            if doc is not None:
                yield entry.key, doc
        if len(page) < 100:
            return
        after = page[-1].key


def list_keys(
    store: Store, principal: Principal, *, after: str | None = None, limit: int = PAGE
) -> KeyPage:
    """Keys newest first: an admin sees every key of the workspace, anyone else their own
    (the keys whose person they are). ``after``: the cursor a previous page gave."""
    _require_person(principal)
    if after is not None and (len(after) > 40 or not after.replace("-", "").isalnum()):
        raise BadRequestError("after is not a position in the key list")
    out: list[dict[str, Any]] = []
    now = now_ms()
    last: str | None = None
    for cursor, doc in _listed(store, principal.workspace, after=after):
        if not principal.is_admin and doc.value.get("person") != principal.person:
            continue
        if len(out) == limit:
            return KeyPage(out, last)
        out.append(key_view(store, doc, now))
        last = cursor
    return KeyPage(out, None)


def find_key(store: Store, workspace: str, key_id: str) -> Doc:
    """A key of the workspace by its 16-hex id, or 404."""
    if len(key_id) != 16 or not all(c in "0123456789abcdef" for c in key_id):
        raise NotFoundError(f"no key {key_id!r}: a key id is 16 hex digits")
    ensure_indexed(store, workspace)
    ref = store.get_doc(workspace, KEY_IDS, key_id)
    doc = store.get_doc(GLOBAL, "key", str(ref.value["digest"])) if ref else None
    if doc is None or doc.value.get("workspace") != workspace:
        raise NotFoundError(f"no key {key_id!r} in workspace {workspace}")
    return doc


# --- revoking ---------------------------------------------------------------------------
def _minted_from(store: Store, workspace: str, key_id: str) -> list[Doc]:
    """The workspace's standing keys minted from ``key_id``, at any depth (its lineage
    names it), oldest first, so that parents are revoked before their children."""
    found = [
        doc
        for _, doc in _listed(store, workspace, after=None)
        if key_id in (doc.value.get("lineage") or ()) and not doc.value.get("revoked_at")
    ]
    return found[::-1]


def _revocation(actor: Actor, doc: Doc, now: int, minted_from: str | None) -> tuple[
    NewRecord, DocWrite
]:  # fmt: skip
    """A key's ``key_revoked`` entry and the write that marks it, conditioned on the doc's
    revision (its last use noted meanwhile makes the transaction retry)."""
    info, key_id = doc.value, doc.key[:16]
    revoked = {**info, "revoked_at": now, "revoked_by": actor.name}
    entry = {
        "workspace": actor.workspace,
        "key_id": key_id,
        "kind": info.get("kind"),
        "person": info.get("person"),
        "made_by": info.get("made_by"),
        "label": info.get("label"),
        "created_at": info.get("created_at"),
        "revoked_by": actor.name,
        "revoked_by_key": actor.principal.key_id if actor.principal else None,
        "revoked_at": now,
        # A key revoked because it was minted from the key being revoked names that key.
        "minted_from": minted_from,
    }
    write = DocWrite(GLOBAL, "key", doc.key, revoked, doc.rev)
    return NewRecord("key_revoked", key_id, entry), write


def _revoke_batch(
    services: Services, actor: Actor, keys: list[tuple[str, str | None]], now: int
) -> None:
    """Revoke the keys ((digest, the key id it was minted from or None) each) and write
    their entries in one transaction: a key is never marked revoked without its entry, nor
    the other way round. A key revoked meanwhile is left out; a key whose doc changed
    meanwhile (its last use noted) is read again."""
    store = services.store
    for _ in range(5):
        pairs = []
        for digest, minted_from in keys:
            doc = store.get_doc(GLOBAL, "key", digest)
            if doc is not None and not doc.value.get("revoked_at"):
                pairs.append(_revocation(actor, doc, now, minted_from))
        if not pairs:
            return
        try:
            record(services, actor.workspace, [p[0] for p in pairs], [p[1] for p in pairs])
        except StoreConflictError:
            continue
        return
    raise ConflictError("the keys kept changing while they were revoked; try again")


def revoke_key(services: Services, actor: Actor, key_id: str) -> dict[str, Any]:
    """Revoke a key: an admin any key of the workspace, a person their own agent keys. The
    key is refused from its next request on; its web sessions end with it.

    Every key minted from it, at any depth (a person's agent keys, the sign-in key of a
    member an admin key added, what those minted), is revoked with it, each with its own
    ``key_revoked`` entry naming the key it was minted from (``minted_from``): whoever held
    the revoked key could have minted them. They are refused from the next request even
    before they are marked (``claros.auth`` checks every key's lineage), so revoking many
    in several transactions (at most ``MAX_BATCH_RECORDS`` entries each) leaves no gap;
    a revocation cut short is finished by revoking the key again."""
    store = services.store
    if actor.principal is not None:
        _require_person(actor.principal)
    doc = find_key(store, actor.workspace, key_id)
    info = doc.value
    if not actor.is_admin:
        principal = actor.principal
        assert principal is not None
        if info.get("person") != principal.person:
            # Someone else's key does not exist for them (as another's ask does not).
            raise NotFoundError(f"no key {key_id!r} among your keys")
        if info.get("kind") != "agent":
            raise ForbiddenError(
                f"you may revoke your own agent keys; a {info.get('kind')} key is "
                "revoked by a workspace admin"
            )
    minted = _minted_from(store, actor.workspace, key_id)
    if info.get("revoked_at") and not minted:
        raise ConflictError(f"key {key_id} is revoked already")
    now = now_ms()
    # The key itself first, in one transaction with as many of its children as fit.
    todo: list[tuple[str, str | None]] = [] if info.get("revoked_at") else [(doc.key, None)]
    todo += [(d.key, key_id) for d in minted]
    for start in range(0, len(todo), MAX_BATCH_RECORDS):
        _revoke_batch(services, actor, todo[start : start + MAX_BATCH_RECORDS], now)
    done = store.get_doc(GLOBAL, "key", doc.key)
    assert done is not None
    return {**key_view(store, done, now), "also_revoked": [d.key[:16] for d in minted]}


# --- members ----------------------------------------------------------------------------
def list_members(store: Store, workspace: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        page = store.query_docs(workspace, "member", after=after, limit=100)
        out += [
            {"email": d.key, "role": d.value.get("role"), "added_at": d.value.get("added_at")}
            for d in page
        ]
        if len(page) < 100:
            return out
        after = page[-1].key


def _role_entry(actor: Actor, email: str, role: str, previous: str | None) -> NewRecord:
    entry = {
        "workspace": actor.workspace,
        "person": email,
        "role": role,
        "previous": previous,
        "changed_by": actor.name,
        "changed_by_key": actor.principal.key_id if actor.principal else None,
        "changed_at": now_ms(),
    }
    return NewRecord("member_role", f"{email}/{new_id('mr')}", entry)


def _other_admins_unchanged(store: Store, workspace: str, email: str) -> list[DocWrite]:
    """The other admins' docs as they are, conditioned on their revision: two admins
    demoting each other at once cannot both succeed and leave nobody. Raises when
    ``email`` is the last admin."""
    others = [
        d
        for d in store.query_docs(workspace, "member", limit=1000)
        if d.value.get("role") == "admin" and d.key != email
    ]
    if not others:
        raise ConflictError(
            f"{email} is the workspace's last admin: make another member admin first"
        )
    return [DocWrite(workspace, "member", d.key, d.value, d.rev) for d in others[:MAX_ADMINS]]


def change_role(services: Services, actor: Actor, email: str, role: str) -> dict[str, Any]:
    """Make a member admin or member. Promoting makes them an admin key, returned once as
    ``key`` (their person key stays a person's: admin pages need the admin key)."""
    _require_admin(actor, "changes roles")
    if role not in ("admin", "member"):
        raise BadRequestError(f"role must be admin or member, not {role!r}")
    store, workspace = services.store, actor.workspace
    email = check_email(email)
    doc = store.get_doc(workspace, "member", email)
    if doc is None:
        raise NotFoundError(f"{email} is not a member of workspace {workspace}")
    previous = str(doc.value.get("role"))
    if previous == role:
        raise ConflictError(f"{email} is {'an admin' if role == 'admin' else 'a member'} already")
    value = {**doc.value, "role": role}
    if role == "admin":
        value["admin_term"] = new_term()  # admin keys of an earlier admin term stay refused
    writes = [DocWrite(workspace, "member", email, value, doc.rev)]
    if previous == "admin":
        writes += _other_admins_unchanged(store, workspace, email)
    answer: dict[str, Any] = {"email": email, "role": role, "previous": previous}
    if role == "admin":
        # Their admin key is made in the same transaction as the role and its entry: no
        # admin without a key to act with, no key without the entry that made them admin.
        parent = actor.principal if actor.principal and actor.principal.is_admin else None
        answer["key"], made = key_writes(
            store, workspace, "admin", person=email, made_by=actor.name, label="admin",
            parent=parent, with_member=False, member=value,
        )  # fmt: skip
        writes += made
    try:
        record(services, workspace, [_role_entry(actor, email, role, previous)], writes)
    except StoreConflictError as exc:
        raise ConflictError(f"{email}'s membership changed meanwhile: try again") from exc
    return answer


def remove_member(services: Services, actor: Actor, email: str) -> dict[str, Any]:
    """Remove a member: every key whose person they are is refused from then on (their
    sign-in key, their agent keys, their admin key); audit keys they made stop too."""
    _require_admin(actor, "removes members")
    store, workspace = services.store, actor.workspace
    email = check_email(email)
    doc = store.get_doc(workspace, "member", email)
    if doc is None:
        raise NotFoundError(f"{email} is not a member of workspace {workspace}")
    previous = str(doc.value.get("role"))
    writes = [DocWrite(workspace, "member", email, None, doc.rev)]
    if previous == "admin":
        writes += _other_admins_unchanged(store, workspace, email)
    try:
        record(services, workspace, [_role_entry(actor, email, "removed", previous)], writes)
    except StoreConflictError as exc:
        raise ConflictError(f"{email}'s membership changed meanwhile: try again") from exc
    return {"email": email, "role": "removed", "previous": previous}


def add_person(services: Services, actor: Actor, email: str) -> dict[str, Any]:
    """Add a member; their person key (how they sign in and answer asks) is returned once."""
    _require_admin(actor, "adds members")
    store, workspace = services.store, actor.workspace
    email = check_email(email)
    if member_role(store, workspace, email) is not None:
        raise ConflictError(f"{email} is a member already")
    parent = actor.principal if actor.principal and actor.principal.is_admin else None
    ensure_workspace(store, workspace)
    # The member, their sign-in key and the member_role entry: one transaction.
    key, writes = key_writes(store, workspace, "person", person=email, parent=parent,
                             label="sign-in")  # fmt: skip
    try:
        record(services, workspace, [_role_entry(actor, email, "member", None)], writes)
    except StoreConflictError as exc:  # added meanwhile by someone else
        raise ConflictError(f"{email} is a member already") from exc
    return {"email": email, "role": "member", "key": key}


def make_key(
    services: Services,
    actor: Actor,
    kind: str,
    *,
    person: str | None = None,
    label: str = "",
    expires_days: int | None = None,
) -> tuple[str | None, str]:
    """The server side's ``create``: (the new member's sign-in key or None, the key). A
    key for someone not yet a member adds them (an agent key: with their sign-in key, how
    they answer their agent's asks); an admin key for a member makes them admin. Such a
    change is written in one transaction with its ``member_role`` entry; a key that
    changes nobody's membership is just written."""
    store, workspace = services.store, actor.workspace
    ensure_workspace(store, workspace)
    email = check_email(person) if person else None
    previous = member_role(store, workspace, email) if email else None
    role = "admin" if kind == "admin" else "member"
    changes = (
        email is not None
        and kind in ("admin", "agent", "person")
        and (previous is None or (role == "admin" and previous != "admin"))
    )
    writes: list[DocWrite] = []
    sign_in = None
    if kind == "agent" and email and previous is None:
        sign_in, writes = key_writes(store, workspace, "person", person=email, label="sign-in")
    # The key is made in the membership its sign-in key's writes add (not written yet).
    member = next((w.value for w in writes if w.collection == "member"), None)
    key, made = key_writes(
        store, workspace, kind, person=email, label=label, expires_days=expires_days,
        with_member=sign_in is None, member=member,
    )  # fmt: skip
    writes += made
    if changes and email:
        record(services, workspace, [_role_entry(actor, email, role, previous)], writes)
    else:
        store.write_docs(writes)
    return sign_in, key


def days_left(expires_at: int, now: int) -> int:
    return max(0, (expires_at - now + DAY_MS - 1) // DAY_MS)
