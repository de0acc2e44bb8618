"""The workspace ask webhook: each new ask, as JSON, signed with HMAC-SHA256.

Delivery runs on its own thread, retried with backoff, so it never delays or fails the
check that opened the ask. Receivers check ``X-Claros-Signature: sha256=<hex>`` over the
raw body with the shared secret.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from claros import jsonutil
from claros.store.base import DocWrite, Store

if TYPE_CHECKING:
    from claros.webhook_settings import WebhookSettings

__all__ = ["WebhookSettings", "deliver_in_background", "get_webhook", "set_webhook", "sign"]

log = logging.getLogger("claros.webhook")
SETTINGS, KEY = "settings", "ask_webhook"
RETRIES = (0.0, 1.0, 5.0, 30.0)


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


def _deliver(
    url: str,
    secret: str,
    payload: Mapping[str, Any],
    delays: tuple[float, ...],
    sleep: Callable[[float], None],
) -> bool:
    # Here, not at the top: httpx costs a check function's cold start ~10% of its imports,
    # and only a workspace with a webhook, on a thread after the answer, needs it.
    import httpx

    body = jsonutil.dumps({"type": "ask.opened", "ask": payload}).encode()
    headers = {"Content-Type": "application/json", "X-Claros-Signature": sign(secret, body)}
    for attempt, delay in enumerate(delays, 1):
        sleep(delay)
        try:
            response = httpx.post(url, content=body, headers=headers, timeout=10)
            if response.status_code < 300:
                return True
            log.warning("ask webhook answered %s (attempt %d)", response.status_code, attempt)
        except httpx.HTTPError as exc:
            log.warning("ask webhook failed: %s (attempt %d)", exc, attempt)
    return False


def deliver_in_background(
    store: Store,
    workspace: str,
    ask: Mapping[str, Any],
    delays: tuple[float, ...] = RETRIES,
) -> threading.Thread | None:
    hook = get_webhook(store, workspace)
    if not hook:
        return None
    thread = threading.Thread(
        target=_deliver,
        args=(hook["url"], hook["secret"], dict(ask), delays, time.sleep),
        daemon=True,
        name="claros-ask-webhook",
    )
    thread.start()
    return thread
