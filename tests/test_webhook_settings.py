"""Where the ask webhook is kept: its own collection (the roles that deliver no ask are
denied it in AWS), with ``settings`` saying only that one is set; a hook saved in
``settings`` by an earlier version is still delivered to until it is saved again."""

from __future__ import annotations

from claros.store.base import DocWrite, Store
from claros.webhook import get_webhook, set_webhook, webhook_configured
from claros.webhook_settings import WebhookSettings

WS = "acme"
HOOK = WebhookSettings.model_validate({"url": "https://hooks.acme.test/asks", "secret": "s" * 32})


def test_the_hook_is_kept_apart_from_settings(store: Store) -> None:
    assert get_webhook(store, WS) is None and webhook_configured(store, WS) is False
    set_webhook(store, WS, HOOK)
    assert get_webhook(store, WS) == {"url": "https://hooks.acme.test/asks", "secret": "s" * 32}
    settings = store.get_doc(WS, "settings", "ask_webhook")
    assert settings is not None and settings.value == {"configured": True}  # no secret
    assert webhook_configured(store, WS) is True
    set_webhook(store, WS, None)
    assert get_webhook(store, WS) is None and webhook_configured(store, WS) is False
    assert store.get_doc(WS, "ask_webhook", "ask_webhook") is None


def test_a_hook_saved_by_an_earlier_version_is_read_until_saved_again(store: Store) -> None:
    old = {"url": "https://old.acme.test/asks", "secret": "o" * 32}
    store.write_docs([DocWrite(WS, "settings", "ask_webhook", old)])
    assert get_webhook(store, WS) == old and webhook_configured(store, WS) is True
    set_webhook(store, WS, HOOK)  # saved again: moved, and the secret leaves settings
    settings = store.get_doc(WS, "settings", "ask_webhook")
    assert settings is not None and "secret" not in settings.value
    assert get_webhook(store, WS) == {"url": "https://hooks.acme.test/asks", "secret": "s" * 32}
