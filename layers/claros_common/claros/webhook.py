"""The workspace ask webhook: each new ask, as JSON, signed with HMAC-SHA256.

Delivery runs apart from the check, retried with backoff, so it never delays or fails the
check that opened the ask. Receivers check ``X-Claros-Signature: sha256=<hex>`` over the
raw body with the shared secret.

Deliveries wait in one queue per process (a function instance), ordered by when each
attempt is due, and at most ``WORKERS`` threads post them: an agent that opens ask after
ask (each check a rule asks about is one) costs those few threads however slow the
receiver, never one thread per ask. A retry waits in the queue, not on a thread. At most
``MAX_QUEUED`` deliveries wait at once, ``MAX_QUEUED_PER_WORKSPACE`` of one workspace,
and at most ``BUSY_PER_WORKSPACE`` workers post one workspace's at a time, so one
workspace's flood or silent receiver leaves the others theirs. Past its share a new ask's
delivery is dropped and logged (the ask itself is in the asks queue, where its people see
it).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from claros import jsonutil
from claros.store.base import DocWrite, Store

if TYPE_CHECKING:
    from claros.webhook_settings import WebhookSettings

__all__ = [
    "BUSY_PER_WORKSPACE",
    "MAX_QUEUED",
    "MAX_QUEUED_PER_WORKSPACE",
    "WORKERS",
    "WebhookSettings",
    "deliver_in_background",
    "get_webhook",
    "set_webhook",
    "sign",
    "webhook_configured",
]

log = logging.getLogger("claros.webhook")
# The hook (its URL and signing secret) is a collection of its own, which only the check
# function (it delivers asks) and the admin and web functions read: the other roles are
# denied it (template.yaml, TheAskWebhookIsNotTheirs). ``settings`` says only that a hook
# is set (for the AIUC-1 pack). A hook saved before this version is still read from
# ``settings`` until it is saved again (tests/security/aws/test_role_reads_the_webhook_secret.py).
HOOK, KEY = "ask_webhook", "ask_webhook"
SETTINGS = "settings"
RETRIES = (0.0, 1.0, 5.0, 30.0)
WORKERS = 4  # threads posting deliveries, per process
MAX_QUEUED = 1_000  # deliveries waiting at once (their retries included), per process
MAX_QUEUED_PER_WORKSPACE = 100  # of those, one workspace's
BUSY_PER_WORKSPACE = 2  # workers posting one workspace's deliveries at once


def __getattr__(name: str) -> Any:
    """``claros.webhook.WebhookSettings`` still answers, from claros.webhook_settings (only
    when asked: its ``HttpUrl`` costs the functions that only deliver asks a cold start)."""
    if name == "WebhookSettings":
        from claros.webhook_settings import WebhookSettings

        return WebhookSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def set_webhook(store: Store, workspace: str, hook: WebhookSettings | None) -> None:
    """Save (or, None, remove) the hook; ``settings`` keeps only that one is set, which
    replaces a hook saved there before this version."""
    value = None if hook is None else {"url": str(hook.url), "secret": hook.secret}
    is_set = None if hook is None else {"configured": True}
    store.write_docs(
        [DocWrite(workspace, HOOK, KEY, value), DocWrite(workspace, SETTINGS, KEY, is_set)]
    )


def get_webhook(store: Store, workspace: str) -> dict[str, Any] | None:
    """The hook with its secret: only for the functions that deliver or set it."""
    doc = store.get_doc(workspace, HOOK, KEY)
    if doc is None:  # saved before this version: the hook itself in ``settings``
        doc = store.get_doc(workspace, SETTINGS, KEY)
        if doc is None or "secret" not in doc.value:
            return None
    return dict(doc.value)


def webhook_configured(store: Store, workspace: str) -> bool:
    """Whether the workspace has a hook, read from ``settings``: never the hook itself."""
    return store.get_doc(workspace, SETTINGS, KEY) is not None


def _post(url: str, secret: str, body: bytes, attempt: int) -> bool:
    """One attempt; True when the receiver took it."""
    # Here, not at the top: httpx costs a check function's cold start ~10% of its imports,
    # and only a workspace with a webhook, on a worker thread after the answer, needs it.
    import httpx

    headers = {"Content-Type": "application/json", "X-Claros-Signature": sign(secret, body)}
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=10)
        if response.status_code < 300:
            return True
        log.warning("ask webhook answered %s (attempt %d)", response.status_code, attempt)
    except httpx.HTTPError as exc:
        log.warning("ask webhook failed: %s (attempt %d)", exc, attempt)
    return False


class _Delivery(NamedTuple):
    workspace: str
    url: str
    secret: str
    body: bytes
    delays: tuple[float, ...]  # before each attempt; the first is its wait in the queue
    attempt: int  # the attempt due next, from 1


class _Queue:
    """Deliveries by when each is due, posted by at most ``WORKERS`` threads; one
    workspace holds at most ``MAX_QUEUED_PER_WORKSPACE`` of them and at most
    ``BUSY_PER_WORKSPACE`` workers at once, so a flood of asks in one workspace (or its
    slow receiver) never drops or stalls another's deliveries."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._due: list[tuple[float, int, _Delivery]] = []  # (due, order, delivery)
        self._order = itertools.count()  # ties in due time: first queued, first posted
        self._held: dict[str, int] = {}  # per workspace: queued or being posted
        self._busy: dict[str, int] = {}  # per workspace: being posted
        self._workers = 0
        self._idle = 0

    def put(self, delivery: _Delivery) -> bool:
        """Queue a new delivery; False (dropped) when its workspace's share, or the
        queue, is full."""
        with self._ready:
            held = self._held.get(delivery.workspace, 0)
            if held >= MAX_QUEUED_PER_WORKSPACE or sum(self._held.values()) >= MAX_QUEUED:
                return False
            self._held[delivery.workspace] = held + 1
            self._push(delivery)
            if self._idle == 0 and self._workers < WORKERS:
                name = f"claros-ask-webhook-{self._workers + 1}"
                try:
                    threading.Thread(target=self._work, daemon=True, name=name).start()
                except RuntimeError as exc:  # no thread to be had: a later ask starts one
                    log.warning("ask webhook: cannot start a delivery thread: %s", exc)
                else:
                    self._workers += 1
            return True

    def _push(self, delivery: _Delivery) -> None:
        wait = delivery.delays[delivery.attempt - 1]
        self._due.append((time.monotonic() + wait, next(self._order), delivery))
        self._ready.notify_all()

    def _next(self) -> _Delivery:
        """The soonest due delivery of a workspace with a worker to spare, once due (at
        most ``MAX_QUEUED`` to look through)."""
        with self._ready:
            while True:
                now = time.monotonic()
                soonest: tuple[float, int, _Delivery] | None = None
                for item in self._due:
                    if self._busy.get(item[2].workspace, 0) >= BUSY_PER_WORKSPACE:
                        continue
                    if soonest is None or item[:2] < soonest[:2]:
                        soonest = item
                if soonest is not None and soonest[0] <= now:
                    self._due.remove(soonest)
                    ws = soonest[2].workspace
                    self._busy[ws] = self._busy.get(ws, 0) + 1
                    return soonest[2]
                self._idle += 1
                try:
                    self._ready.wait(None if soonest is None else soonest[0] - now)
                finally:
                    self._idle -= 1

    def _done(self, d: _Delivery, again: bool) -> None:
        """A posted attempt is over: queue the next one (``again``) or let it go."""
        with self._ready:
            ws = d.workspace
            self._busy[ws] -= 1
            if again:
                self._push(d._replace(attempt=d.attempt + 1))
            else:
                self._held[ws] -= 1
                if not self._held[ws]:
                    del self._held[ws], self._busy[ws]
            self._ready.notify_all()

    def _work(self) -> None:
        try:
            while True:
                d = self._next()
                sent = False
                try:
                    sent = _post(d.url, d.secret, d.body, d.attempt)
                except Exception:  # noqa: BLE001 - one delivery's bug never stops the worker
                    log.exception("ask webhook: attempt %d could not be sent", d.attempt)
                again = not sent and d.attempt < len(d.delays)
                if not sent and not again:
                    log.warning("ask webhook: gave up after %d attempts", d.attempt)
                self._done(d, again)
        finally:  # never expected: a worker posts until the process ends
            with self._ready:
                self._workers -= 1


_QUEUE = _Queue()


def deliver_in_background(
    store: Store,
    workspace: str,
    ask: Mapping[str, Any],
    delays: tuple[float, ...] = RETRIES,
) -> bool:
    """Queue the new ``ask`` for the workspace's webhook, if it has one (True when
    queued). Never waits on the receiver, and never fails the check that opened it."""
    try:
        hook = get_webhook(store, workspace)
        if not hook:
            return False
        body = jsonutil.dumps({"type": "ask.opened", "ask": dict(ask)}).encode()
        queued = _QUEUE.put(_Delivery(workspace, hook["url"], hook["secret"], body, delays, 1))
    except Exception:  # noqa: BLE001 - the check is logged already: its answer must go out
        log.exception("ask webhook: the delivery of ask %s could not be queued", ask.get("ask_id"))
        return False
    if not queued:
        log.warning(
            "ask webhook: delivery of ask %s dropped: %d deliveries of workspace %s, or %d in "
            "all, wait already (the ask is in the asks queue all the same)",
            ask.get("ask_id"),
            MAX_QUEUED_PER_WORKSPACE,
            workspace,
            MAX_QUEUED,
        )
    return queued
