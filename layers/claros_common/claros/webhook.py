"""The workspace ask webhook: each new ask, as JSON, signed with HMAC-SHA256.

Delivery runs apart from the check, retried with backoff, so it never delays or fails the
check that opened the ask. Receivers check ``X-Claros-Signature: sha256=<hex>`` over the
raw body with the shared secret.

Deliveries wait in one queue per process (a function instance), ordered by when each
attempt is due, and at most ``WORKERS`` threads post them: an agent that opens ask after
ask (each check a rule asks about is one) costs those few threads however slow the
receiver, never one thread per ask. A retry waits in the queue, not on a thread. At most
``MAX_QUEUED`` deliveries wait at once; past that a new ask's delivery is dropped and
logged (the ask itself is in the asks queue, where its people see it).
"""

from __future__ import annotations

import hashlib
import heapq
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
    "MAX_QUEUED",
    "WORKERS",
    "WebhookSettings",
    "deliver_in_background",
    "get_webhook",
    "set_webhook",
    "sign",
]

log = logging.getLogger("claros.webhook")
SETTINGS, KEY = "settings", "ask_webhook"
RETRIES = (0.0, 1.0, 5.0, 30.0)
WORKERS = 4  # threads posting deliveries, per process
MAX_QUEUED = 1_000  # deliveries waiting at once (their retries included), per process


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
    value = None if hook is None else {"url": str(hook.url), "secret": hook.secret}
    store.write_docs([DocWrite(workspace, SETTINGS, KEY, value)])


def get_webhook(store: Store, workspace: str) -> dict[str, Any] | None:
    doc = store.get_doc(workspace, SETTINGS, KEY)
    return dict(doc.value) if doc else None


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
    url: str
    secret: str
    body: bytes
    delays: tuple[float, ...]  # before each attempt; the first is its wait in the queue
    attempt: int  # the attempt due next, from 1


class _Queue:
    """Deliveries by when each is due, posted by at most ``WORKERS`` threads."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._due: list[tuple[float, int, _Delivery]] = []
        self._order = itertools.count()  # ties in due time: first queued, first posted
        self._workers = 0
        self._idle = 0

    def put(self, delivery: _Delivery) -> bool:
        """Queue a new delivery; False (dropped) when ``MAX_QUEUED`` wait already."""
        with self._ready:
            if len(self._due) >= MAX_QUEUED:
                return False
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
        heapq.heappush(self._due, (time.monotonic() + wait, next(self._order), delivery))
        self._ready.notify()

    def _next(self) -> _Delivery:
        with self._ready:
            while True:
                now = time.monotonic()
                if self._due and self._due[0][0] <= now:
                    return heapq.heappop(self._due)[2]
                self._idle += 1
                try:
                    self._ready.wait(self._due[0][0] - now if self._due else None)
                finally:
                    self._idle -= 1

    def _work(self) -> None:
        try:
            while True:
                d = self._next()
                try:
                    if _post(d.url, d.secret, d.body, d.attempt):
                        continue
                except Exception:  # noqa: BLE001 - one delivery's bug never stops the worker
                    log.exception("ask webhook: attempt %d could not be sent", d.attempt)
                if d.attempt < len(d.delays):
                    with self._ready:
                        self._push(d._replace(attempt=d.attempt + 1))
                else:
                    log.warning("ask webhook: gave up after %d attempts", d.attempt)
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
        queued = _QUEUE.put(_Delivery(hook["url"], hook["secret"], body, delays, 1))
    except Exception:  # noqa: BLE001 - the check is logged already: its answer must go out
        log.exception("ask webhook: the delivery of ask %s could not be queued", ask.get("ask_id"))
        return False
    if not queued:
        log.warning(
            "ask webhook: delivery of ask %s dropped: %d deliveries wait already (the ask is "
            "in the asks queue all the same)",
            ask.get("ask_id"),
            MAX_QUEUED,
        )
    return queued
