"""Bearer keys, workspaces and members.

Keys are stored only as their sha256; the key itself is shown once, when made. Kinds:

* ``agent``   minted by a person, acts for them;
* ``service`` a workspace key tied to nobody; the only kind that may name a workspace
  member in ``agent.on_behalf_of``;
* ``admin``   an admin's key (valid while that person is an admin);
* ``audit``   reads the ledger and its records, nothing else, valid only while its maker
  is an admin.

``python -m claros.auth create [--data DIR] [--workspace W] [--kind K] [--person EMAIL]``
prints the new key as the last line of stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import secrets
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from claros.clock import now_ms
from claros.errors import BadRequestError, ForbiddenError, UnauthorizedError
from claros.names import EMAIL
from claros.store.base import GLOBAL, ConflictError, DocWrite, Store, StoreError

__all__ = [
    "KeyKind",
    "Principal",
    "authenticate",
    "create_key",
    "ensure_member",
    "ensure_workspace",
    "workspaces",
    "hash_key",
    "require",
]

KeyKind = Literal["agent", "service", "admin", "audit"]
KEY_KINDS: tuple[str, ...] = get_args(KeyKind)
ALL_KINDS: frozenset[str] = frozenset(KEY_KINDS)
Role = Literal["admin", "member"]

_WORKSPACE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_EMAIL = re.compile(EMAIL)
_KEY = re.compile(r"^ck_[A-Za-z0-9_-]{43}$")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: resolved from the bearer key, never from what the caller sends."""

    workspace: str
    kind: str
    person: str | None
    key_id: str  # first 16 hex of the key's sha256: names the key without revealing it

    @property
    def is_admin(self) -> bool:
        return self.kind == "admin"


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


def ensure_member(store: Store, workspace: str, email: str, role: Role) -> None:
    """Add ``email`` to the workspace, or raise them to admin; never lowers a role."""
    email = check_email(email)
    doc = store.get_doc(workspace, "member", email)
    if doc and (doc.value.get("role") == "admin" or role == "member"):
        return
    value = {"email": email, "role": role, "added_at": now_ms()}
    store.write_docs([DocWrite(workspace, "member", email, value, doc.rev if doc else 0)])


def create_key(
    store: Store,
    workspace: str,
    kind: str,
    *,
    person: str | None = None,
    made_by: str | None = None,
    label: str = "",
) -> str:
    """Make a key and return it (the only time it is seen in clear)."""
    if kind not in KEY_KINDS:
        raise BadRequestError(f"kind must be one of {', '.join(KEY_KINDS)}, not {kind!r}")
    ensure_workspace(store, workspace)
    if kind in ("agent", "admin") and not person:
        raise BadRequestError(f"an {kind} key belongs to a person: give --person")
    if kind == "service" and person:
        raise BadRequestError("a service key is tied to nobody: leave out --person")
    if person:
        person = check_email(person)
    if kind == "admin" and person:
        ensure_member(store, workspace, person, "admin")
    elif kind == "agent" and person:
        ensure_member(store, workspace, person, "member")
    if kind == "audit":
        made_by = made_by or person
        if not made_by or member_role(store, workspace, made_by) != "admin":
            raise ForbiddenError("an audit key is made by a workspace admin: give --person ADMIN")
        person = None
    key = "ck_" + secrets.token_urlsafe(32)
    doc = {
        "workspace": workspace,
        "kind": kind,
        "person": person,
        "made_by": made_by or person,
        "label": label,
        "created_at": now_ms(),
    }
    store.write_docs([DocWrite(GLOBAL, "key", hash_key(key), doc, 0)])
    return key


def authenticate(store: Store, authorization: str | None) -> Principal:
    """The caller behind an ``Authorization: Bearer <key>`` header, or 401."""
    if not authorization:
        raise UnauthorizedError("no key: send Authorization: Bearer <key>")
    scheme, _, key = authorization.strip().partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise UnauthorizedError("Authorization must be 'Bearer <key>'")
    if not _KEY.match(key):
        raise UnauthorizedError("not a Claros key")
    return key_principal(store, hash_key(key))


class KeyRefused(UnauthorizedError):
    """A key that no longer stands: ``problem`` is "revoked" (or unknown), "admin" (its
    person is no longer an admin) or "audit" (its maker is no longer an admin)."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


def key_principal(store: Store, digest: str) -> Principal:
    """Who a key (by its hash) is, checked as every request checks it: for a bearer key
    and for the key a web session was opened with alike. KeyRefused when it no longer
    stands."""
    doc = store.get_doc(GLOBAL, "key", digest)
    if doc is None or doc.value.get("revoked_at"):
        raise KeyRefused("unknown or revoked key", "revoked")
    info = doc.value
    workspace, kind = str(info["workspace"]), str(info["kind"])
    person = info.get("person")
    if kind == "admin" and member_role(store, workspace, str(person)) != "admin":
        raise KeyRefused("this admin key's person is no longer a workspace admin", "admin")
    if kind == "audit" and member_role(store, workspace, str(info.get("made_by"))) != "admin":
        raise KeyRefused("this audit key's maker is no longer a workspace admin", "audit")
    return Principal(workspace, kind, str(person) if person else None, digest[:16])


def require(principal: Principal, kinds: frozenset[str] | set[str]) -> Principal:
    if principal.kind not in kinds:
        allowed = ", ".join(sorted(kinds))
        raise ForbiddenError(f"{principal.kind} keys cannot do this (allowed: {allowed})")
    return principal


# --- python -m claros.auth create ------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    from claros.config import ConfigError, Settings
    from claros.wiring import open_store

    parser = argparse.ArgumentParser(prog="python -m claros.auth", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", help="make a key and print it as the last line")
    create.add_argument("--data", help="data directory (local mode; default $CLAROS_DATA)")
    create.add_argument("--workspace", default="default")
    create.add_argument("--kind", choices=KEY_KINDS, default="service")
    create.add_argument("--person", help="the person the key belongs to (or, audit: its maker)")
    create.add_argument("--label", default="")
    args = parser.parse_args(argv)

    try:
        settings = Settings.from_env()
        if args.data:
            settings = settings.model_copy(update={"data_dir": args.data})
        store = open_store(settings)  # the first key of a new install makes its data
        try:
            key = create_key(store, args.workspace, args.kind, person=args.person, label=args.label)
        finally:
            store.close()
    except (BadRequestError, ForbiddenError) as exc:
        print(f"claros.auth: {exc.message}", file=sys.stderr)
        return 2
    except (ConfigError, StoreError, OSError) as exc:
        print(f"claros.auth: {exc}", file=sys.stderr)
        return 2
    who = f" for {args.person}" if args.person else ""
    print(f"# {args.kind} key in workspace {args.workspace}{who}; shown only now:")
    print(key)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
