"""The session's hand: a second secret, never in a cookie, that every state-changing request
carried by the session cookie must send (claros.web.sessions). A cookie reaches every port
of its host, so the cookie alone (and the CSRF token, a hash of it) must not be enough to
act; the hand lives in the app origin's localStorage, put there by the sign-in's answer."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest

from claros.local import LocalServer
from claros.store.base import GLOBAL, DocWrite, Store
from claros.web import sessions
from tests.web.conftest import HTML, Browserish, Keys, signed_in_hand

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

FORM = ("/app/evidence/audit-keys", {"label": "hand test"})
REFUSED = "this browser did not sign in here, or its sign-in was cleared: sign in again to act"


def _audit_keys(store: Store) -> int:
    return sum(1 for d in store.query_docs(GLOBAL, "key", limit=1000) if d.value["kind"] == "audit")


def _refused_page(answer: httpx.Response) -> None:
    assert answer.status_code == 403, answer.text
    assert REFUSED in answer.text and 'role="alert"' in answer.text
    assert 'href="/app/signin?next=%2Fapp&amp;why=hand"' in answer.text  # the way on


def test_a_form_without_the_hand_is_refused(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store
) -> None:
    browser = sign_in(keys.admin)
    before = _audit_keys(store)
    _refused_page(browser.post_form(*FORM, hand=""))
    scripted = browser.client.post(
        FORM[0], json={"label": "x"}, headers={"x-csrf-token": browser.csrf}
    )
    assert scripted.status_code == 403
    assert scripted.json() == {"error": "forbidden", "message": REFUSED}
    assert _audit_keys(store) == before
    assert browser.post_form(*FORM).status_code == 201  # with it, as claros.js sends it


def test_a_wrong_hand_is_refused(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store
) -> None:
    browser, other = sign_in(keys.admin), sign_in(keys.admin)
    before = _audit_keys(store)
    session_id = browser.client.cookies["claros_session"]
    for wrong in (other.hand, session_id, browser.csrf, browser.hand + "x", "h" * 5000):
        _refused_page(browser.post_form(*FORM, hand=wrong))
        header = browser.client.post(
            FORM[0],
            json={"label": "x"},
            headers={"x-csrf-token": browser.csrf, "x-claros-hand": wrong},
        )
        assert header.status_code == 403 and header.json()["message"] == REFUSED
    assert _audit_keys(store) == before


def test_a_session_from_before_the_hand_reads_but_cannot_act(
    sign_in: Callable[[str], Browserish], keys: Keys, store: Store
) -> None:
    browser = sign_in(keys.admin)
    session_id = browser.client.cookies["claros_session"]
    doc = store.get_doc(GLOBAL, "session", sessions.session_hash(session_id))
    assert doc is not None
    old = {k: v for k, v in doc.value.items() if k != "hand_hash"}
    store.write_docs([DocWrite(GLOBAL, "session", doc.key, old, doc.rev)])
    assert browser.get("/app").status_code == 200  # reading: the cookie alone
    before = _audit_keys(store)
    _refused_page(browser.post_form(*FORM))
    assert _audit_keys(store) == before
    # The page's way on: the sign-in form, even though the cookie is still signed in.
    again = browser.get("/app/signin?next=%2Fapp&why=hand")
    assert again.status_code == 200 and 'action="/app/signin"' in again.text
    assert "can read but not act" in again.text
    # Without the reason, a signed-in browser still goes straight on, as before.
    assert browser.get("/app/signin?next=%2Fapp%2Frules").headers["location"] == "/app/rules"
    # Signing in again gives this browser a hand, and it acts.
    answer = browser.client.post(
        "/app/signin", data={"key": keys.admin, "next": "/app"},
        headers={**HTML, "origin": browser.origin},
    )  # fmt: skip
    browser.hand, _ = signed_in_hand(answer)
    browser.csrf = sessions.csrf_token(browser.client.cookies["claros_session"])
    assert browser.post_form(*FORM).status_code == 201


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("/app/rules?x=1&y=2", "/app/rules?x=1&amp;y=2"),
        ("https://evil.example/app", "/app"),
        ("//evil.example/app", "/app"),
        ("/elsewhere", "/app"),
        ("/app\r\nSet-Cookie: x=1", "/app"),
        # A path of the app, kept, and escaped into the attribute and the link:
        ('/app/"><script>alert(1)</script>', "/app/&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
    ],
)
def test_the_sign_in_answer_is_a_page_that_keeps_the_hand(
    http: httpx.Client, server: LocalServer, keys: Keys, sent: str, kept: str
) -> None:
    answer = http.post(
        "/app/signin",
        data={"key": keys.admin, "next": sent},
        headers={**HTML, "origin": server.url},
    )
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "location" not in answer.headers
    assert answer.headers["cache-control"] == "no-store"
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    assert "claros_session=" in answer.headers["set-cookie"]
    hand, _ = signed_in_hand(answer)
    assert hand not in answer.headers["set-cookie"]  # never in a cookie
    assert f'data-next="{kept}"' in answer.text
    # No inline script (the CSP forbids it): claros.js, by src, does the work.
    scripts = re.findall(r"<script\b[^>]*>", answer.text)
    assert scripts and all(re.search(r'src="/app/static/claros\.js\?v=\w+"', s) for s in scripts)
    assert re.findall(r"<script\b[^>]*>(.*?)</script>", answer.text, re.S) == [""] * len(scripts)
    assert not re.search(r"<[^>]+\son\w+=", answer.text)  # no inline handlers either
    # Without JavaScript: it says why, and links on (reading works).
    assert "<noscript>" in answer.text and "needs JavaScript" in answer.text
    assert f'<a class="btn btn-primary" href="{kept}">Continue</a>' in answer.text


def test_the_script_keeps_the_hand_and_adds_it_to_post_forms(http: httpx.Client) -> None:
    js = http.get("/app/static/claros.js").text
    assert 'const HAND_KEY = "claros-hand";' in js
    assert 'getElementById("claros-hand")' in js and "localStorage.setItem(HAND_KEY" in js
    assert "window.location.replace(" in js
    assert 'field.name = "hand";' in js and 'addEventListener("submit"' in js
    assert 'action.pathname === "/app/signout"' in js and "removeItem(HAND_KEY)" in js


def test_sign_out_needs_the_csrf_token_but_not_the_hand(
    sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    """A person can always end a session, even from a browser that lost its hand (the
    cookie may be out: ending the session is what they need then)."""
    browser = sign_in(keys.admin)
    session_id = browser.client.cookies["claros_session"]
    forged = browser.post_form("/app/signout", {}, csrf="", hand="")
    assert forged.status_code == 403 and "CSRF token missing" in forged.text
    out = browser.post_form("/app/signout", {}, hand="")
    assert out.status_code == 303 and out.headers["location"] == "/app/signin?signed_out=1"
    replay = httpx.get(f"{browser.origin}/app", headers={"cookie": f"claros_session={session_id}"})
    assert replay.status_code == 401 and "signed out" in replay.json()["message"]


def test_a_bearer_key_needs_no_hand(http: httpx.Client, keys: Keys) -> None:
    answer = http.post(
        FORM[0], json={"label": "x"}, headers={"authorization": f"Bearer {keys.admin}"}
    )
    assert answer.status_code == 201
