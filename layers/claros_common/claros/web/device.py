"""Device sign-in, the RFC 8628 way: a CLI gets an agent key for the person who approves it.

1. ``POST /v1/device/code`` (no key): ``{device_code, user_code, verification_uri,
   verification_uri_complete, expires_in, interval}``. The device code is the CLI's secret
   (stored only as its sha256); the user code (``BCDF-GHJK``) is what the person checks.
2. The person, signed in, opens ``/app/device?code=...`` and approves or denies it.
3. The CLI polls ``POST /v1/device/token {device_code}``: ``authorization_pending`` until
   then; ``slow_down`` when it polls faster than ``interval`` (which then grows by 5 s);
   ``access_denied``; ``expired_token``. The first poll after the approval gets a new
   agent key minted for the approver, and the code is used up; ``access_denied`` when the
   key that approved it no longer stands by then (revoked, its person removed or demoted).

Only a person approves a code: with their person key or an admin key, in a session or as a
bearer (agent and service keys are refused by the route, and by ``answer_device`` too). The
key minted records the approving key as its parent, with its lineage.

Codes expire 10 minutes after they are made and work once. One address may start at most
``CODES_PER_WINDOW`` sign-ins per 10 minutes.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from claros.auth import PERSON_KINDS, Principal, create_key, key_id_refusal
from claros.clock import now_ms
from claros.errors import BadRequestError, ClarosError, ConflictError, ForbiddenError, NotFoundError
from claros.store.base import GLOBAL, DocWrite, Store
from claros.store.base import ConflictError as StoreConflictError

__all__ = [
    "CODES_PER_WINDOW",
    "DEVICE_TTL_S",
    "INTERVAL_S",
    "DeviceFlowError",
    "TooManyRequestsError",
    "answer_device",
    "device_view",
    "format_user_code",
    "normalize_user_code",
    "poll_device",
    "start_device",
]

DEVICE_TTL_S = 600
INTERVAL_S = 5
SLOW_DOWN_S = 5
CODES_PER_WINDOW = 10
WINDOW_S = 600
ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"  # no vowels (no words), nothing that looks alike
CODE_LETTERS = 8
DEVICE = "device"  # key: the user code (8 letters)
SECRET = "device_secret"  # key: sha256 of the device code -> the user code
EXPIRY = "device_expiry"  # "<expires_at:013d>:<user code>", swept when codes are made
BY_ADDRESS = "device_address"  # key: the caller's address -> this window's count
_SWEEP = 25


class DeviceFlowError(ClarosError):
    """An RFC 8628 token error: ``code`` is authorization_pending, slow_down, access_denied
    or expired_token."""

    status = 400

    def __init__(self, code: str, message: str, *, interval: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.interval = interval

    def to_json(self) -> dict[str, Any]:
        body = super().to_json()
        if self.interval is not None:
            body["interval"] = self.interval
        return body


class TooManyRequestsError(ClarosError):
    status, code = 429, "too_many_requests"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _secret_hash(device_code: str) -> str:
    return hashlib.sha256(device_code.encode("utf-8")).hexdigest()


def format_user_code(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


def normalize_user_code(text: str) -> str:
    """What a person typed (``bcdf ghjk``, ``BCDF-GHJK``) as the stored code, or 400."""
    code = "".join(ch for ch in text.upper() if ch.isalnum())
    if len(code) != CODE_LETTERS or any(ch not in ALPHABET for ch in code):
        raise BadRequestError(
            f"a sign-in code is {CODE_LETTERS} letters, like {format_user_code('BCDFGHJK')}"
        )
    return code


def _limit(store: Store, address: str, now: int) -> None:
    doc = store.get_doc(GLOBAL, BY_ADDRESS, address)
    start, count = (int(doc.value["start"]), int(doc.value["count"])) if doc else (now, 0)
    if now - start >= WINDOW_S * 1000:
        start, count = now, 0
    if count >= CODES_PER_WINDOW:
        wait = max(1, (start + WINDOW_S * 1000 - now) // 1000)
        raise TooManyRequestsError(
            f"at most {CODES_PER_WINDOW} sign-ins per {WINDOW_S // 60} minutes from one "
            f"address; try again in {wait} s",
            retry_after_s=int(wait),
        )
    value = {"start": start, "count": count + 1}
    try:
        store.write_docs([DocWrite(GLOBAL, BY_ADDRESS, address, value, doc.rev if doc else 0)])
    except StoreConflictError as exc:
        raise TooManyRequestsError("sign-ins are being started too fast", retry_after_s=1) from exc


def _sweep(store: Store, now: int) -> None:
    writes: list[DocWrite] = []
    for doc in store.query_docs(GLOBAL, EXPIRY, limit=_SWEEP):
        expires, _, code = doc.key.partition(":")
        if int(expires) > now:
            break
        found = store.get_doc(GLOBAL, DEVICE, code)
        writes.append(DocWrite(GLOBAL, EXPIRY, doc.key, None))
        if found is not None:
            writes += [
                DocWrite(GLOBAL, DEVICE, code, None),
                DocWrite(GLOBAL, SECRET, str(found.value["secret_hash"]), None),
            ]
    if writes:
        store.write_docs(writes)


def start_device(
    store: Store, *, client: str, name: str, address: str, now: int | None = None
) -> dict[str, Any]:
    """A new pending sign-in: ``{device_code, user_code, expires_in, interval}``."""
    now = now or now_ms()
    _limit(store, address or "unknown", now)
    _sweep(store, now)
    expires = now + DEVICE_TTL_S * 1000
    for _ in range(5):
        code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LETTERS))
        device_code = secrets.token_urlsafe(32)
        digest = _secret_hash(device_code)
        doc = {
            "secret_hash": digest,
            "status": "pending",
            "client": client,
            "name": name,
            "address": address,
            "created_at": now,
            "expires_at": expires,
            "interval": INTERVAL_S,
        }
        try:
            store.write_docs(
                [
                    DocWrite(GLOBAL, DEVICE, code, doc, 0),
                    DocWrite(GLOBAL, SECRET, digest, {"user_code": code}, 0),
                    DocWrite(GLOBAL, EXPIRY, f"{expires:013d}:{code}", {}, 0),
                ]
            )
        except StoreConflictError:
            continue  # that user code is taken: draw another
        return {
            "device_code": device_code,
            "user_code": format_user_code(code),
            "expires_in": DEVICE_TTL_S,
            "interval": INTERVAL_S,
        }
    raise ConflictError("could not find a free sign-in code; try again")


def device_view(store: Store, user_code: str, *, now: int | None = None) -> dict[str, Any]:
    """What the approving person sees of a code (never its device code)."""
    code = normalize_user_code(user_code)
    doc = store.get_doc(GLOBAL, DEVICE, code)
    if doc is None:
        raise NotFoundError(f"no sign-in with code {format_user_code(code)}: check the code")
    value = doc.value
    status = str(value["status"])
    if status == "pending" and int(value["expires_at"]) <= (now or now_ms()):
        status = "expired"
    view = {k: value.get(k) for k in ("client", "name", "address", "created_at", "expires_at")}
    return {**view, "user_code": format_user_code(code), "status": status}


def answer_device(
    store: Store, principal: Principal, user_code: str, decision: str, *, now: int | None = None
) -> dict[str, Any]:
    """Approve (the CLI gets an agent key for this person) or deny a pending sign-in."""
    if not principal.person or principal.kind not in PERSON_KINDS:
        raise ForbiddenError(
            f"{principal.kind} keys never approve device sign-ins: a person approves with "
            "their person key (or an admin with the admin key)"
        )
    if decision not in ("approve", "deny"):
        raise BadRequestError("decision must be approve or deny")
    now = now or now_ms()
    code = normalize_user_code(user_code)
    doc = store.get_doc(GLOBAL, DEVICE, code)
    if doc is None:
        raise NotFoundError(f"no sign-in with code {format_user_code(code)}: check the code")
    if doc.value["status"] != "pending":
        raise ConflictError(f"sign-in {format_user_code(code)} was answered already")
    if int(doc.value["expires_at"]) <= now:
        raise ConflictError(
            f"sign-in {format_user_code(code)} expired; run claros login again for a new code"
        )
    value = {
        **doc.value,
        "status": "approved" if decision == "approve" else "denied",
        "workspace": principal.workspace,
        "person": principal.person,
        "answered_by_key": principal.key_id,
        "answered_by_kind": principal.kind,
        "answered_by_lineage": list(principal.lineage),
        "answered_at": now,
    }
    try:
        store.write_docs([DocWrite(GLOBAL, DEVICE, code, value, doc.rev)])
    except StoreConflictError as exc:
        raise ConflictError(f"sign-in {format_user_code(code)} was answered meanwhile") from exc
    return device_view(store, code, now=now)


def _used_up(code: str, digest: str, expires: int, rev: int | None = None) -> list[DocWrite]:
    return [
        DocWrite(GLOBAL, DEVICE, code, None, rev),
        DocWrite(GLOBAL, SECRET, digest, None),
        DocWrite(GLOBAL, EXPIRY, f"{expires:013d}:{code}", None),
    ]


def poll_device(store: Store, device_code: str, *, now: int | None = None) -> dict[str, Any]:
    """The CLI's poll: the new key once approved, else a ``DeviceFlowError``."""
    now = now or now_ms()
    digest = _secret_hash(device_code)
    secret = store.get_doc(GLOBAL, SECRET, digest)
    doc = store.get_doc(GLOBAL, DEVICE, str(secret.value["user_code"])) if secret else None
    if secret is None or doc is None:
        raise NotFoundError("no such sign-in (unknown, used or expired): run claros login again")
    code, value = doc.key, doc.value
    expires = int(value["expires_at"])
    status = value["status"]
    if expires <= now and status in ("pending", "approved"):
        store.write_docs(_used_up(code, digest, expires))
        raise DeviceFlowError("expired_token", "the sign-in code expired: start again")
    if status == "denied":
        store.write_docs(_used_up(code, digest, expires))
        raise DeviceFlowError("access_denied", "the sign-in was denied")
    if status == "pending":
        _pending(store, doc.key, value, doc.rev, now)
    if status != "approved":
        raise DeviceFlowError("expired_token", "this sign-in was used already")
    # Approved: use the code up first (a conditional write only one poll can win), then
    # mint the key, so that a code never yields two keys.
    try:
        store.write_docs(_used_up(code, digest, expires, doc.rev))
    except StoreConflictError as exc:
        raise DeviceFlowError("expired_token", "this sign-in was used already") from exc
    person, workspace = str(value["person"]), str(value["workspace"])
    # The approval stands only while the key that gave it does: revoked, or its person
    # removed (or demoted, for an admin key) since, and no key comes of it.
    refused = key_id_refusal(store, workspace, str(value["answered_by_key"]), now)
    if refused is not None:
        raise DeviceFlowError(
            "access_denied",
            f"the key that approved this sign-in no longer stands ({refused}): "
            "run claros login again",
        )
    label = f"claros login: {value.get('name') or value.get('client') or 'cli'}"[:200]
    parent = Principal(
        workspace,
        str(value.get("answered_by_kind") or "person"),
        person,
        str(value["answered_by_key"]),
        tuple(str(k) for k in value.get("answered_by_lineage") or ()),
    )
    try:
        key = create_key(store, workspace, "agent", person=person, made_by=person, label=label,
                         parent=parent, with_member=False)  # fmt: skip
    except ForbiddenError as exc:  # removed between the check above and the key
        raise DeviceFlowError("access_denied", f"{exc}: run claros login again") from exc
    return {"key": key, "kind": "agent", "workspace": workspace, "person": person}


def _pending(store: Store, code: str, value: dict[str, Any], rev: int, now: int) -> None:
    """Record this poll; always raises (pending, or slow_down when polled too fast)."""
    interval = int(value.get("interval") or INTERVAL_S)
    last = value.get("last_poll_at")
    too_fast = last is not None and now - int(last) < interval * 1000 - 500
    if too_fast:
        interval += SLOW_DOWN_S
    updated = {**value, "last_poll_at": now, "interval": interval}
    try:
        store.write_docs([DocWrite(GLOBAL, DEVICE, code, updated, rev)])
    except StoreConflictError as exc:  # two polls at once, or the approval just landed
        raise DeviceFlowError("slow_down", "poll more slowly", interval=interval) from exc
    if too_fast:
        raise DeviceFlowError("slow_down", f"poll at most every {interval} s", interval=interval)
    raise DeviceFlowError(
        "authorization_pending", "waiting for the person to approve the code", interval=interval
    )
