"""Bearer keys, workspaces and members.

Keys are stored only as their sha256; the key itself is shown once, when made. Kinds:

* ``agent``   minted by a person, acts for them;
* ``service`` a workspace key tied to nobody; the only kind that may name a workspace
  member in ``agent.on_behalf_of``;
* ``admin``   an admin's key (valid while that person is an admin);
* ``audit``   reads the ledger and its records, nothing else, valid only while its maker
  is an admin and until it expires (``AUDIT_DAYS`` after it was made unless told);
* ``person``  a member's own sign-in key: opens web sessions, answers asks, mints their
  agent keys; refused by ``/v1/check`` and by the guard. One is made for each member
  when they are added (``add_member``).

Only a person approves (THREATS.md §1): agent and service keys never open web sessions,
mint keys, approve device sign-ins or answer asks. A key minted by another key (in the web
app, by a device sign-in) records its ``parent`` and its ``lineage`` (the key ids of every
ancestor, parent first), so that nothing derived from the key that made a check answers
that check's ask.

A key stands while it is not revoked, no key it was minted from is revoked (its lineage
is checked on every request: a revocation reaches every key minted from the revoked one at
once), and its person is still a member (an admin key: still an admin). Its
last use is noted at most once a minute (``KEY_USE``, a doc apart from the key's:
roles that note it may not write keys), so a check does not write each time.
Each key is also listed in its workspace (``key_list`` by creation time, ``key_id`` by
id) so that keys can be listed and revoked per workspace (``claros.people``).

``claros keys create [--stack NAME | --data DIR] [--workspace W] [--kind K] [--person EMAIL]``
(the same as ``python -m claros.auth create ...``) prints the new key as the last line of
stdout; ``list``, ``revoke KEY_ID`` and ``demote EMAIL`` manage keys and admins from the
server side. ``--stack`` finds a deployed stack's tables from its outputs (AWS credentials
from the environment, as the AWS CLI finds them).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, get_args

from claros.clock import now_ms
from claros.errors import BadRequestError, ForbiddenError, UnauthorizedError
from claros.names import EMAIL
from claros.store.base import (
    GLOBAL,
    ConflictError,
    Doc,
    DocWrite,
    StorageUnavailableError,
    Store,
    StoreError,
)

if TYPE_CHECKING:  # the CLI's only (_parser imports it): every function imports this module
    import argparse

__all__ = [
    "KEY_USE",
    "KeyKind",
    "GUARD_KINDS",
    "PERSON_KINDS",
    "Principal",
    "add_member",
    "authenticate",
    "create_key",
    "ensure_member",
    "ensure_workspace",
    "workspaces",
    "hash_key",
    "last_used",
    "require",
]

log = logging.getLogger("claros.auth")

KeyKind = Literal["agent", "service", "admin", "audit", "person"]
KEY_KINDS: tuple[str, ...] = get_args(KeyKind)
ALL_KINDS: frozenset[str] = frozenset(KEY_KINDS)
# A person's own credentials: they sign in to the web app, answer asks and mint keys. An
# agent's environment never holds one (the guard and the hooks refuse them).
PERSON_KINDS: frozenset[str] = frozenset({"admin", "person"})
# The kinds a guard may run with: a person's agent key, a service key, an admin's key (the
# guard itself refuses an admin key, which can approve; scripts may still check with one).
# Never a person key: it signs in and answers asks, and an agent must never hold one.
# (Here, not in claros.api.check, so the outcome function need not import the check routes.)
GUARD_KINDS: frozenset[str] = frozenset({"agent", "service", "admin"})
MAX_LINEAGE = 16  # a key minted from a key minted from ...: far deeper than any real chain
Role = Literal["admin", "member"]

_WORKSPACE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_EMAIL = re.compile(EMAIL)
_KEY = re.compile(r"^ck_[A-Za-z0-9_-]{43}$")
AUDIT_DAYS = 90  # an audit key's life unless its maker says otherwise
MAX_AUDIT_DAYS = 3660
DAY_MS = 86_400_000
LAST_USED_EVERY_MS = 60_000  # a key's last use is written at most this often
# The workspace's own lists of its keys (the key docs themselves live under GLOBAL, by hash).
KEY_LIST = "key_list"  # "<created_at:013d>-<key_id>" -> {"digest"}
KEY_IDS = "key_id"  # key_id -> {"digest", "listed"}
# A key's last use, apart from the key's doc (GLOBAL, by hash -> {"at"}): every function
# that takes keys notes it, and in AWS only the admin and web roles may write key docs
# (template.yaml, IdentityIsNotTheirs): a role that may write a key's doc can mint keys.
KEY_USE = "key_use"


# A NamedTuple, not a frozen dataclass: every function imports this module at cold start
# (see claros.store.base's value types).
class Principal(NamedTuple):
    """Who is calling: resolved from the bearer key, never from what the caller sends."""

    workspace: str
    kind: str
    person: str | None
    key_id: str  # first 16 hex of the key's sha256: names the key without revealing it
    lineage: tuple[str, ...] = ()  # the key ids this key was minted from, parent first

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"

    def derives_from(self, key_id: str) -> bool:
        """Whether this key is ``key_id`` or was minted from it, directly or not (a web
        session acts with the key it was opened with, so it counts too)."""
        return key_id == self.key_id or key_id in self.lineage


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_workspace_name(name: str) -> str:
    if not _WORKSPACE.match(name):
        raise BadRequestError(
            f"workspace name {name!r} must be 1-63 of a-z, 0-9, '-' and '_', "
            "starting with a letter or digit"
        )
    return name


def check_email(email: str) -> str:
    if not _EMAIL.match(email):
        raise BadRequestError(f"not an email address: {email!r}")
    return email.lower()


def ensure_workspace(store: Store, workspace: str) -> None:
    check_workspace_name(workspace)
    if store.get_doc(GLOBAL, "workspace", workspace) is None:
        try:
            store.write_docs(
                [
                    DocWrite(
                        GLOBAL,
                        "workspace",
                        workspace,
                        {"name": workspace, "created_at": now_ms()},
                        0,
                    )
                ]
            )
        except ConflictError:
            pass  # made meanwhile by someone else: fine


def workspaces(store: Store) -> Iterator[str]:
    """Every workspace's name, page by page."""
    after: str | None = None
    while True:
        page = store.query_docs(GLOBAL, "workspace", after=after, limit=100)
        yield from (doc.key for doc in page)
        if len(page) < 100:
            return
        after = page[-1].key


def member_role(store: Store, workspace: str, email: str) -> str | None:
    doc = store.get_doc(workspace, "member", email.lower())
    return str(doc.value["role"]) if doc else None


def ensure_member(store: Store, workspace: str, email: str, role: Role) -> bool:
    """Add ``email`` to the workspace, or raise them to admin; never lowers a role. True
    when they were not a member before."""
    email = check_email(email)
    was = store.get_doc(workspace, "member", email)
    writes = member_writes(store, workspace, email, role)
    if writes:
        store.write_docs(writes)
    return was is None and bool(writes)


def member_writes(store: Store, workspace: str, email: str, role: Role) -> list[DocWrite]:
    """The write that adds ``email`` (or raises them to admin), conditioned on their doc as
    it is; none when nothing changes (never lowers a role)."""
    doc = store.get_doc(workspace, "member", email)
    if doc and (doc.value.get("role") == "admin" or role == "member"):
        return []
    value = {**(doc.value if doc else new_member(email)), "role": role}
    if role == "admin":
        value["admin_term"] = new_term()
    return [DocWrite(workspace, "member", email, value, doc.rev if doc else 0)]


def new_term() -> str:
    """A membership's (or an admin role's) own id. A key records the terms it was made in
    and stands only in those: a person removed and added again, or demoted and made admin
    again, does not get the keys of the earlier term back (they get new ones)."""
    return secrets.token_hex(8)


def new_member(email: str) -> dict[str, Any]:
    """A new member's doc, before its role is set."""
    return {"email": email, "added_at": now_ms(), "term": new_term()}


def _terms(kind: str, member: Mapping[str, Any] | None) -> dict[str, Any]:
    """The terms a new key of ``kind`` is made in (its person's membership, and for an
    admin key their admin role; an audit key: its maker's admin role)."""
    if member is None:
        return {}
    if kind in ("agent", "person"):
        return {"term": member.get("term")}
    if kind == "admin":
        return {"term": member.get("term"), "admin_term": member.get("admin_term")}
    if kind == "audit":
        return {"maker_admin_term": member.get("admin_term")}
    return {}


def key_index_writes(workspace: str, digest: str, created_at: int) -> list[DocWrite]:
    """The docs that list a key in its workspace (written with the key, expect absent)."""
    listed = f"{created_at:013d}-{digest[:16]}"
    return [
        DocWrite(workspace, KEY_LIST, listed, {"digest": digest}, 0),
        DocWrite(workspace, KEY_IDS, digest[:16], {"digest": digest, "listed": listed}, 0),
    ]


def add_member(
    store: Store, workspace: str, email: str, *, parent: Principal | None = None
) -> str | None:
    """Add ``email`` as a member; a new member gets their person key, returned (the only
    time it is seen). None when they were a member already (their key is theirs to keep;
    another is made with ``create --kind person``)."""
    ensure_workspace(store, workspace)
    if member_role(store, workspace, check_email(email)) is not None:
        return None
    return create_key(store, workspace, "person", person=email, parent=parent, label="sign-in")


def create_key(
    store: Store,
    workspace: str,
    kind: str,
    *,
    person: str | None = None,
    made_by: str | None = None,
    label: str = "",
    parent: Principal | None = None,
    expires_days: int | None = None,
    with_member: bool = True,
) -> str:
    """Make a key and return it (the only time it is seen in clear). ``parent``: the key
    minting it (a person's or an admin's; agent and service keys never mint keys), kept in
    the new key's record with its lineage. ``expires_days``: an audit key's life (default
    ``AUDIT_DAYS``); other kinds do not expire. ``with_member``: False for a key of someone
    who must be a member already (ForbiddenError when they are not): a key made for them,
    not a way in (key_writes)."""
    key, writes = key_writes(
        store, workspace, kind, person=person, made_by=made_by, label=label, parent=parent,
        expires_days=expires_days, with_member=with_member,
    )  # fmt: skip
    store.write_docs(writes)
    return key


def key_writes(
    store: Store,
    workspace: str,
    kind: str,
    *,
    person: str | None = None,
    made_by: str | None = None,
    label: str = "",
    parent: Principal | None = None,
    expires_days: int | None = None,
    with_member: bool = True,
    member: Mapping[str, Any] | None = None,
) -> tuple[str, list[DocWrite]]:
    """A new key and the doc writes that make it (its person's membership when it changes,
    unless ``with_member`` is False; the key; its listing), for a caller that writes them
    in one transaction with more (``claros.people``: a member's ledger entry). ``member``:
    the person's member doc as that caller writes it (default: as it is now), whose terms
    the key is made in. With ``with_member`` False, a key of a person who is not a member
    is refused (ForbiddenError): it would stand in no membership, and adding them is a
    ``member_role`` entry's job, never a side effect of a key."""
    if kind not in KEY_KINDS:
        raise BadRequestError(f"kind must be one of {', '.join(KEY_KINDS)}, not {kind!r}")
    _check_parent(parent, workspace)
    ensure_workspace(store, workspace)
    if kind in ("agent", "admin", "person") and not person:
        article = "an" if kind[0] in "aeiou" else "a"
        raise BadRequestError(f"{article} {kind} key belongs to a person: give --person")
    if kind == "service" and person:
        raise BadRequestError("a service key is tied to nobody: leave out --person")
    if person:
        person = check_email(person)
    writes: list[DocWrite] = []
    if with_member and person and kind in ("admin", "agent", "person"):
        writes += member_writes(store, workspace, person, "admin" if kind == "admin" else "member")
    if member is None and writes:
        member = writes[-1].value
    if kind == "audit":
        made_by = made_by or person
        member, person = _audit_maker(store, workspace, made_by), None
    elif member is None and person:
        member = _member_now(store, workspace, person)
    days = _life_days(kind, expires_days)
    key = "ck_" + secrets.token_urlsafe(32)
    created = now_ms()
    doc: dict[str, object] = {
        "workspace": workspace,
        "kind": kind,
        "person": person,
        "made_by": made_by or (parent.person if parent else None) or person,
        "label": label,
        "created_at": created,
        **{k: v for k, v in _terms(kind, member).items() if v is not None},
    }
    if kind == "audit":
        doc["expires_at"] = created + days * DAY_MS
    if parent is not None:
        doc["parent"] = {"key_id": parent.key_id, "kind": parent.kind, "person": parent.person}
        doc["lineage"] = [parent.key_id, *parent.lineage][:MAX_LINEAGE]
    digest = hash_key(key)
    writes += [
        DocWrite(GLOBAL, "key", digest, doc, 0),
        *key_index_writes(workspace, digest, created),
    ]
    return key, writes


def _audit_maker(store: Store, workspace: str, made_by: str | None) -> Mapping[str, Any]:
    """The member doc of an audit key's maker, who must be a workspace admin."""
    maker = store.get_doc(workspace, "member", made_by) if made_by else None
    if maker is None or maker.value.get("role") != "admin":
        raise ForbiddenError("an audit key is made by a workspace admin: give --person ADMIN")
    return maker.value


def _member_now(store: Store, workspace: str, person: str) -> Mapping[str, Any]:
    """``person``'s member doc as it is, whose terms their new key is made in; a person
    who is not a member gets no key (ForbiddenError)."""
    found = store.get_doc(workspace, "member", person)
    if found is None:
        raise ForbiddenError(f"{person} is not a member of workspace {workspace}")
    return found.value


def _check_parent(parent: Principal | None, workspace: str) -> None:
    if parent is not None and parent.kind not in PERSON_KINDS:
        raise ForbiddenError(
            f"{parent.kind} keys never mint keys: a person makes keys with their person key "
            "(or an admin with the admin key)"
        )
    if parent is not None and parent.workspace != workspace:
        raise ForbiddenError("a key mints keys in its own workspace only")


def _life_days(kind: str, expires_days: int | None) -> int:
    if kind != "audit" and expires_days is not None:
        raise BadRequestError("only an audit key expires: leave out the expiry")
    days = AUDIT_DAYS if expires_days is None else expires_days
    if not 1 <= days <= MAX_AUDIT_DAYS:
        raise BadRequestError(f"an audit key lives 1 to {MAX_AUDIT_DAYS} days, not {days}")
    return days


def authenticate(store: Store, authorization: str | None, *, note_use: bool = True) -> Principal:
    """The caller behind an ``Authorization: Bearer <key>`` header, or 401."""
    if not authorization:
        raise UnauthorizedError("no key: send Authorization: Bearer <key>")
    scheme, _, key = authorization.strip().partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise UnauthorizedError("Authorization must be 'Bearer <key>'")
    if not _KEY.match(key):
        raise UnauthorizedError("not a Claros key")
    return key_principal(store, hash_key(key), note_use=note_use)


class KeyRefused(UnauthorizedError):
    """A key that no longer stands: ``problem`` is "revoked" (or unknown), "admin" (its
    person is no longer an admin), "audit" (its maker is no longer an admin), "expired" (an
    audit key past its expiry) or "member" (its person was removed from the workspace)."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


def key_principal(store: Store, digest: str, *, note_use: bool = True) -> Principal:
    """Who a key (by its hash) is, checked as every request checks it: for a bearer key
    and for the key a web session was opened with alike. KeyRefused when it no longer
    stands. ``note_use``: write its last use (Settings.notes_key_use: not from a role that
    may not write, template.yaml)."""
    doc = store.get_doc(GLOBAL, "key", digest)
    if doc is None:
        raise KeyRefused("unknown or revoked key", "revoked")
    now = now_ms()
    refused = key_refusal(store, doc, now)
    if refused is not None:
        raise refused
    info = doc.value
    workspace, kind, person = str(info["workspace"]), str(info["kind"]), info.get("person")
    lineage = tuple(str(k) for k in info.get("lineage") or ())
    if note_use:
        _note_use(store, doc, now)
    return Principal(workspace, kind, str(person) if person else None, digest[:16], lineage)


def key_refusal(store: Store, doc: Doc, now: int) -> KeyRefused | None:
    """Why the key ``doc`` is refused at ``now``, or None when it stands. The one decision:
    every request checks its key with it (key_principal), and key lists show it
    (claros.people.key_view), so a list never says "active" of a key auth refuses."""
    info = doc.value
    if info.get("revoked_at"):
        return KeyRefused("unknown or revoked key", "revoked")
    workspace, kind = str(info["workspace"]), str(info["kind"])
    if kind in ("agent", "person", "admin"):
        member = store.get_doc(workspace, "member", str(info.get("person")))
        if member is None:
            return KeyRefused("this key's person is no longer a member of the workspace", "member")
        if info.get("term") != member.value.get("term"):
            return KeyRefused(
                "this key's person was removed from the workspace since it was made "
                "(added again, they have new keys)",
                "member",
            )
        if kind == "admin" and member.value.get("role") != "admin":
            return KeyRefused("this admin key's person is no longer a workspace admin", "admin")
        if kind == "admin" and info.get("admin_term") != member.value.get("admin_term"):
            return KeyRefused(
                "this admin key's person was demoted since it was made "
                "(made admin again, they have a new admin key)",
                "admin",
            )
    if kind == "audit":
        maker = store.get_doc(workspace, "member", str(info.get("made_by")))
        if (
            maker is None
            or maker.value.get("role") != "admin"
            or info.get("maker_admin_term") != maker.value.get("admin_term")
        ):
            return KeyRefused("this audit key's maker is no longer a workspace admin", "audit")
        if now >= audit_expiry(info):
            return KeyRefused("this audit key expired: its maker can make another", "expired")
    try:
        _check_ancestors(store, workspace, tuple(str(k) for k in info.get("lineage") or ()))
    except KeyRefused as exc:
        return exc
    return None


def key_id_refusal(store: Store, workspace: str, key_id: str, now: int) -> KeyRefused | None:
    """Why the workspace's key ``key_id`` (16 hex) no longer stands, or None: for what a key
    decided that takes effect later (a device sign-in approved, then polled), checked again
    when it does. A key id that names no key of the workspace counts as revoked."""
    doc = _key_by_id(store, workspace, key_id)
    if doc is None or doc.value.get("workspace") != workspace:
        return KeyRefused("unknown or revoked key", "revoked")
    return key_refusal(store, doc, now)


def _check_ancestors(store: Store, workspace: str, lineage: tuple[str, ...]) -> None:
    """A key minted from a revoked key is refused too, at whatever depth (KeyRefused,
    "revoked"). Read on every request, never cached: a revocation takes effect on the next
    request of every key minted from it, even before (or without) ``revoke_key`` marking
    each of them revoked. A key id that names no key of the workspace counts as revoked
    (fail closed), once the workspace's keys are listed by id (``claros.people``).

    Only revocation reaches down the lineage. A parent that stopped for its person's role
    (an admin key after a demotion, a removed member's keys) does not stop the keys it
    minted for other people (a member's sign-in key, a promoted admin's key): those stand
    or fall by their own person's role (docs/api.md, "Keys and people")."""
    for ancestor in lineage:
        parent = _key_by_id(store, workspace, ancestor)
        if parent is None or parent.value.get("revoked_at"):
            raise KeyRefused(
                f"this key was minted from key {ancestor}, which is revoked", "revoked"
            )


def _key_by_id(store: Store, workspace: str, key_id: str) -> Doc | None:
    """The key listed in ``workspace`` under ``key_id`` (16 hex), or None. Keys made before
    the lists existed are listed first, by the first request that needs it."""
    ref = store.get_doc(workspace, KEY_IDS, key_id)
    if ref is None and not _indexed_now(store, workspace):
        ref = store.get_doc(workspace, KEY_IDS, key_id)
    return store.get_doc(GLOBAL, "key", str(ref.value["digest"])) if ref else None


def _indexed_now(store: Store, workspace: str) -> bool:
    """Whether the workspace's keys were listed by id already (False: listed now, look
    again). Keys made before the lists existed are listed once, by the first request that
    needs it; a function that may not write (AWS: the evidence readers) cannot, and then
    the key is refused (fail closed) until another request has listed them."""
    from claros.people import ensure_indexed  # people builds on auth

    try:
        return not ensure_indexed(store, workspace)
    except ConflictError:
        return False  # listed meanwhile by another request: look again
    except Exception as exc:  # noqa: BLE001 - refused below, never a 500
        log.warning("could not list the keys of workspace %s: %s", workspace, exc)
        return True


def audit_expiry(info: dict[str, object]) -> int:
    """When an audit key stops (ms). One made before keys expired lives AUDIT_DAYS from
    when it was made: no audit key lasts for ever."""
    expires = info.get("expires_at")
    if isinstance(expires, int):
        return expires
    return int(str(info.get("created_at") or 0)) + AUDIT_DAYS * DAY_MS


def last_used(doc: Doc, use: Doc | None) -> int | None:
    """When the key ``doc`` was last used (ms): its ``KEY_USE`` doc, or what its own doc
    says (keys noted before the last use moved apart)."""
    times = [t for t in (doc.value.get("last_used_at"), use.value.get("at") if use else None)
             if isinstance(t, int) and not isinstance(t, bool)]  # fmt: skip
    return max(times) if times else None


# When this process last noted each key's use (by hash), so that a request reads nothing
# more to decide whether to note it: at most once a minute per key and process.
_NOTED: dict[str, int] = {}
_NOTED_MAX = 10_000


def _note_use(store: Store, doc: Doc, now: int) -> None:
    """Write the key's last use (``KEY_USE``, never the key's own doc), at most once a
    minute per key in this process (a function instance). Best effort: a request that
    meets a read-only or full disk, or a function whose role may not write docs (AWS: the
    evidence readers), is answered all the same."""
    last = _NOTED.get(doc.key)
    if last is not None and 0 <= now - last < LAST_USED_EVERY_MS:
        return
    if len(_NOTED) >= _NOTED_MAX:
        _NOTED.clear()
    _NOTED[doc.key] = now
    write = DocWrite(GLOBAL, KEY_USE, doc.key, {"at": now})
    try:
        store.write_docs([write])
    except (ConflictError, StorageUnavailableError):
        pass
    except Exception:  # noqa: BLE001 - a timestamp never fails the request it notes
        log.debug("could not note the use of key %s", doc.key[:16], exc_info=True)


def require(
    principal: Principal, kinds: frozenset[str] | set[str], refusal: str | None = None
) -> Principal:
    """``principal`` when its kind is among ``kinds``, else 403: "<kind> keys <refusal>"
    (the route's reason), or a plain "cannot do this"."""
    if principal.kind not in kinds:
        allowed = ", ".join(sorted(kinds))
        why = refusal or "cannot do this"
        raise ForbiddenError(f"{principal.kind} keys {why} (allowed: {allowed})")
    return principal


# --- python -m claros.auth create|list|revoke|demote -----------------------------------
_HELP = """{prog}: keys and admins, on the server.

  create   make a key and print it as the last line of stdout
  list     every key of the workspace: id, kind, person, made, by, last used, status
  revoke   revoke a key by its id (the 16 hex digits \"list\" shows), and every key
           minted from it; refused from their next request, and their web sessions end
  demote   make an admin a member (never the last admin); their admin keys stop

Revoke and demote are ledger entries (key_revoked, member_role), by the server side.
Errors are one line on stderr, exit 2."""


class StackError(Exception):
    """The stack named by --stack cannot be read (no such stack, no credentials)."""


# The stack's outputs (template.yaml) -> the settings they fill.
_STACK_OUTPUTS = {
    "LedgerTableName": "ledger_table",
    "RecordsTableName": "records_table",
    "StateTableName": "state_table",
}


def stack_tables(stack: str) -> dict[str, str]:
    """Settings for a deployed stack's tables, read from its outputs."""
    import boto3  # the server extra; only this option needs it
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        [found] = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        why = exc.response["Error"]["Message"]
        raise StackError(f"cannot read the stack {stack!r}: {why}") from None
    except BotoCoreError as exc:
        raise StackError(f"cannot read the stack {stack!r}: {exc}") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs", [])}
    missing = sorted(set(_STACK_OUTPUTS) - set(outputs))
    if missing:
        raise StackError(f"the stack {stack!r} is not a Claros stack (no {', '.join(missing)})")
    tables = {setting: outputs[output] for output, setting in _STACK_OUTPUTS.items()}
    return {"store": "dynamodb", **tables}


def _parser(prog: str) -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog=prog,
        description=_HELP.format(prog=prog),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group()
        where.add_argument("--data", help="data directory (local mode; default $CLAROS_DATA)")
        where.add_argument(
            "--stack", help="a deployed Claros stack's name: its tables, from the stack's outputs"
        )
        p.add_argument("--workspace", default="default")

    create = sub.add_parser("create", help="make a key and print it as the last line")
    common(create)
    create.add_argument("--kind", choices=KEY_KINDS, default="service")
    create.add_argument(
        "--person",
        help="the person the key belongs to (or, audit: its maker); required for "
        "agent, admin and person keys",
    )
    create.add_argument("--label", default="")
    create.add_argument(
        "--days", type=int, default=None, help=f"audit keys: days it lives (default {AUDIT_DAYS})"
    )
    common(sub.add_parser("list", help="list the workspace's keys"))
    revoke = sub.add_parser("revoke", help="revoke a key by its id")
    common(revoke)
    revoke.add_argument("key_id", help="the key's id: 16 hex digits, as list shows")
    demote = sub.add_parser("demote", help="make an admin a member")
    common(demote)
    demote.add_argument("email", help="the admin to demote")
    return parser


def _when(ms: object) -> str:
    import datetime as dt

    if not isinstance(ms, int):
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")


def _print_keys(store: Store, workspace: str) -> None:
    from claros.people import key_view, server_keys

    print("KEY ID            KIND     PERSON                 MADE (UTC)        BY"
          "                     LAST USED         STATUS")  # fmt: skip
    for doc in server_keys(store, workspace):
        v = key_view(store, doc)
        # The status is what a request with the key would meet (auth's own decision).
        status = f"refused: {v['refused']}" if v["status"] == "refused" else v["status"]
        print(
            f"{v['key_id']:<17} {v['kind']:<8} {v.get('person') or '-':<22} "
            f"{_when(v.get('created_at')):<17} {v.get('made_by') or '-':<22} "
            f"{_when(v.get('last_used_at')):<17} {status}"
        )


def _run(args: argparse.Namespace) -> int:
    from claros.config import Settings
    from claros.wiring import build_services, open_store

    settings = Settings.from_env()
    if args.data:
        settings = settings.replace(data_dir=args.data)
    if args.stack:
        settings = settings.replace(**stack_tables(args.stack))
    if args.command in ("revoke", "demote") or (args.command == "create" and args.person):
        # Changes are ledger entries (revoke, demote, and a create that adds a member or
        # makes one admin): they need what the server records with.
        check_workspace_name(args.workspace)
        services = build_services(settings, create=args.command == "create")
        try:
            from claros.people import SERVER, Actor, change_role, make_key, revoke_key

            actor = Actor(args.workspace, SERVER)
            if args.command == "create":
                sign_in, key = make_key(services, actor, args.kind, person=args.person,
                                        label=args.label, expires_days=args.days)  # fmt: skip
                _print_made(args, sign_in, key)
            elif args.command == "revoke":
                done = revoke_key(services, actor, args.key_id)
                print(f"revoked {done['kind']} key {done['key_id']}")
                for minted in done["also_revoked"]:  # what it minted goes with it
                    print(f"revoked key {minted}, minted from {done['key_id']}")
            else:
                done = change_role(services, actor, args.email, "member")
                print(f"{done['email']} is a member now (was {done['previous']})")
            return 0
        finally:
            services.close()
    # The first key of a new install makes its data; listing needs it there.
    store = open_store(settings, create=args.command == "create")
    try:
        if args.command == "list":
            _print_keys(store, check_workspace_name(args.workspace))
            return 0
        key = create_key(store, args.workspace, args.kind, person=args.person,
                         label=args.label, expires_days=args.days)  # fmt: skip
    finally:
        store.close()
    _print_made(args, None, key)
    return 0


def _print_made(args: argparse.Namespace, sign_in: str | None, key: str) -> None:
    """What ``create`` prints: a new member's sign-in key first (it is how they sign in and
    answer their agent's asks), the key made as the last line."""
    who = f" for {args.person}" if args.person else ""
    if sign_in:
        print(f"# {args.person} is a new member: their person key (signs in to the web app and")
        print("# answers asks; give it to them alone, never to an agent); shown only now:")
        print(sign_in)
    print(f"# {args.kind} key in workspace {args.workspace}{who}; shown only now:")
    print(key)


def main(argv: Sequence[str] | None = None, prog: str = "python -m claros.auth") -> int:
    from claros.config import ConfigError
    from claros.errors import ClarosError

    args = _parser(prog).parse_args(argv)
    # Errors name the command as the person typed it ("claros keys", "claros.auth").
    name = "claros.auth" if prog == "python -m claros.auth" else prog
    try:
        return _run(args)
    except ClarosError as exc:
        print(f"{name}: {exc.message}", file=sys.stderr)
        return 2
    except (ConfigError, StoreError, OSError, StackError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
