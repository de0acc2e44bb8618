"""CSRF: a state-changing request carried by the session cookie needs the session's token
and, when the browser says where it comes from, this site's Origin. Bearer keys need
neither (browsers never attach them on their own)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from claros.local import LocalServer
from claros.store.base import Store
from tests.web.conftest import HTML, Browserish, Keys, bearer

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

FORM = ("/app/evidence/audit-keys", {"label": "csrf test"})


def _audit_keys(store: Store) -> int:
    from claros.store.base import GLOBAL

    return sum(1 for d in store.query_docs(GLOBAL, "key", limit=1000) if d.value["kind"] == "audit")


@pytest.mark.parametrize(
    ("csrf", "origin", "reason"),
    [
        ("", None, "CSRF token missing"),
        ("not-the-token", None, "CSRF token does not match this session"),
        (None, "https://evil.example", "cross-site request refused"),
        (None, "null", "cross-site request refused"),
    ],
    ids=["no-token", "wrong-token", "other-origin", "null-origin"],
)
def test_a_forged_form_is_refused_with_a_reason(
    sign_in: Callable[[str], Browserish],
    keys: Keys,
    store: Store,
    csrf: str | None,
    origin: str | None,
    reason: str,
) -> None:
    browser = sign_in(keys.admin)
    before = _audit_keys(store)
    answer = browser.post_form(*FORM, csrf=csrf, origin=origin)
    assert answer.status_code == 403
    assert reason in answer.text and 'role="alert"' in answer.text
    assert _audit_keys(store) == before  # nothing written


def test_the_refusal_is_json_for_scripts(sign_in: Callable[[str], Browserish], keys: Keys) -> None:
    browser = sign_in(keys.admin)
    answer = browser.client.post("/app/evidence/audit-keys", json={"label": "x"})
    assert answer.status_code == 403
    assert answer.json() == {
        "error": "forbidden",
        "message": "CSRF token missing: this request needs the page's form token; reload the "
        "page and try again",
    }


def test_the_referer_stands_in_for_a_missing_origin(
    sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    browser = sign_in(keys.admin)
    fields = {"label": "x", "csrf": browser.csrf, "hand": browser.hand}
    evil = browser.client.post(
        FORM[0], data=fields, headers={**HTML, "referer": "https://evil.example/page"}
    )
    assert evil.status_code == 403 and "cross-site" in evil.text
    ours = browser.client.post(
        FORM[0], data=fields, headers={**HTML, "referer": f"{browser.origin}/app/evidence"}
    )
    assert ours.status_code == 201


def test_the_right_token_from_this_site_passes(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store
) -> None:
    browser = sign_in(keys.admin)
    before = _audit_keys(store)
    answer = browser.post_form(*FORM)
    assert answer.status_code == 201 and _audit_keys(store) == before + 1
    # A script with the session uses the headers instead of the form fields.
    scripted = browser.client.post(
        FORM[0],
        json={"label": "x"},
        headers={"x-csrf-token": browser.csrf, "x-claros-hand": browser.hand},
    )
    assert scripted.status_code == 201 and scripted.json()["kind"] == "audit"


def test_a_token_belongs_to_its_session(sign_in: Callable[[str], Browserish], keys: Keys) -> None:
    first, second = sign_in(keys.admin), sign_in(keys.admin)
    assert first.csrf != second.csrf
    assert first.post_form(*FORM, csrf=second.csrf).status_code == 403


def test_bearer_keys_need_no_token(http: httpx.Client, keys: Keys) -> None:
    answer = http.post(FORM[0], json={"label": "x"}, headers=bearer(keys.admin))
    assert answer.status_code == 201


def test_api_writes_do_not_take_the_cookie(
    sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    """Only /app forms change state with a session; the API's writes want a key."""
    browser = sign_in(keys.admin)
    answer = browser.client.put(
        "/api/settings/ask-webhook",
        json={"url": "https://hooks.example/claros"},
        headers={"x-csrf-token": browser.csrf, "origin": browser.origin},
    )
    assert answer.status_code == 401 and answer.json()["error"] == "unauthorized"


def test_signing_in_from_another_site_is_refused(
    http: httpx.Client, server: LocalServer, keys: Keys
) -> None:
    answer = http.post(
        "/app/signin",
        data={"key": keys.admin},
        headers={**HTML, "origin": "https://evil.example"},
    )
    assert answer.status_code == 403 and "cross-site" in answer.text
    assert "set-cookie" not in answer.headers
