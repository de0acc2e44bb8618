"""The pages over HTTP (no browser): who sees which page, every route with a session
cookie, the public routes, escaping of user content, answering an ask, Evidence and Rules."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from nacl.signing import VerifyKey

from claros.api.app import FUNCTIONS, build_resolver
from claros.api.http import PERMISSIONS, PUBLIC
from claros.ledger import checkpoint_message
from claros.store.base import Store
from claros.wiring import Services
from claros_guard.verify import load_saved
from tests.web.conftest import (
    ADMIN,
    HTML,
    PERSON,
    WORKSPACE,
    Browserish,
    Keys,
    bearer,
    check_body,
    put_rule,
)

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

# The routes that take no credential, and only these: a new one is a reviewed change here.
EXPECTED_PUBLIC = {
    ("GET", "/app/signin"),
    ("POST", "/app/signin"),
    ("GET", "/app/static/{name}"),
    # template.yaml's catch-all: any other /app path gets the web app's 404 page in AWS.
    ("GET", "/app/{proxy+}"),
    ("POST", "/v1/device/code"),
    ("POST", "/v1/device/token"),
}
PAGES = ["/app", "/app/rules", "/app/evidence", "/app/evidence/checkpoints", "/app/device"]
ADMIN_ONLY = {"/app/rules", "/app/evidence", "/app/evidence/checkpoints"}


def _ask(http: httpx.Client, keys: Keys, **arguments: object) -> dict[str, object]:
    body = check_body(arguments=arguments or {"amount": 80, "order_total": 100})
    answer = http.post("/v1/check", json=body, headers=bearer(keys.agent))
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == "ask"
    return dict(answer.json())


# --- permissions ------------------------------------------------------------------------
def test_the_public_routes_are_exactly_these(http: httpx.Client, services: Services) -> None:
    build_resolver(services, FUNCTIONS)  # every function's routes, declared
    assert set(PUBLIC) == EXPECTED_PUBLIC
    assert not set(PUBLIC) & set(PERMISSIONS)
    for (method, path), reason in PUBLIC.items():
        assert reason, f"{method} {path} says why it is public"
        url = path.replace("{name}", "claros.css")
        got = http.request(method, url, json={} if method == "POST" else None)
        assert got.status_code not in (401, 403, 500), (method, path, got.status_code)


@pytest.mark.parametrize("path", PAGES)
def test_without_a_session_browsers_go_to_sign_in_and_scripts_get_401(
    http: httpx.Client, path: str
) -> None:
    page = http.get(path, headers=HTML)
    assert page.status_code == 303
    assert page.headers["location"].startswith("/app/signin?next=")
    assert http.get(path).status_code == 401


@pytest.mark.parametrize("path", PAGES)
def test_each_page_by_kind(
    sign_in: Callable[[str], Browserish], keys: Keys, person_key: str, path: str
) -> None:
    admin, person = sign_in(keys.admin), sign_in(person_key)
    assert admin.get(path).status_code == 200
    got = person.get(path)
    if path in ADMIN_ONLY:
        assert got.status_code == 403
        assert "person keys cannot do this (allowed: admin)" in got.text
        assert got.headers["content-type"].startswith("text/html")
    else:
        assert got.status_code == 200


def test_every_route_with_a_session_cookie(
    sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    """GET routes read with the session as the person's key would; /app forms change state
    with the session and its CSRF token; the API's other writes never take the cookie."""
    sessions = {"admin": sign_in(keys.admin), "person": sign_in(person_key)}
    failures = []
    for (method, path), kinds in sorted(PERMISSIONS.items()):
        if (method, path) == ("POST", "/app/signout"):
            continue  # would end the session; test_sessions covers it
        url = re.sub(r"\{[^}]+\}", "x", path)
        for kind, browser in sessions.items():
            headers = {"accept": "application/json", "origin": browser.origin}
            if path.startswith("/app/") and method != "GET":
                headers["x-csrf-token"] = browser.csrf
                headers["x-claros-hand"] = browser.hand
            body = None if method == "GET" else {}
            got = browser.client.request(method, url, json=body, headers=headers).status_code
            takes_cookie = method == "GET" or path.startswith("/app/")
            if not takes_cookie:
                if got != 401:
                    failures.append(f"{method} {path} as {kind} session: {got}, expected 401")
            elif kind in kinds and got in (401, 403):
                failures.append(f"{method} {path} as {kind} session: {got}, expected access")
            elif kind not in kinds and got != 403:
                failures.append(f"{method} {path} as {kind} session: {got}, expected 403")
    assert not failures, "\n".join(failures)


def test_pages_carry_security_headers(sign_in: Callable[[str], Browserish], keys: Keys) -> None:
    page = sign_in(keys.admin).get("/app")
    assert page.headers["cache-control"] == "no-store"
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    assert '<html lang="en">' in page.text and '<main id="main"' in page.text
    assert 'href="#main"' in page.text  # the skip link


@pytest.mark.parametrize(
    ("name", "status", "content_type"),
    [
        ("claros.css", 200, "text/css"),
        ("claros.js", 200, "text/javascript"),
        ("nope.css", 404, "application/json"),
        ("..%2Fpages.py", 404, "application/json"),
    ],
)
def test_static_files(http: httpx.Client, name: str, status: int, content_type: str) -> None:
    got = http.get(f"/app/static/{name}")
    assert got.status_code == status
    assert got.headers["content-type"].startswith(content_type)


# --- escaping ---------------------------------------------------------------------------
EVIL_TITLE = '<script>alert("title")</script> & "quotes"'
EVIL_MESSAGE = "<img src=x onerror=alert('message')>"
EVIL_NOTE = "<b onmouseover=alert('note')>fine</b>"


def test_user_content_is_escaped_everywhere(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    put_rule(http, keys.admin, title=EVIL_TITLE, message=EVIL_MESSAGE)
    asked = _ask(http, keys, amount=80, order_total=100, memo="<svg onload=alert(1)>")
    dana = sign_in(person_key)
    home = dana.get("/app").text
    assert EVIL_MESSAGE not in home and "<svg onload" not in home
    # Home is a Jinja2 template now: markupsafe writes ' as &#39; (html.esc wrote &#x27;).
    assert "&lt;img src=x onerror=alert(&#39;message&#39;)&gt;" in home
    assert "&lt;svg onload=alert(1)&gt;" in home
    ask_id = str(dict(asked["ask"])["ask_id"])  # type: ignore[call-overload]
    answered = dana.post_form(
        f"/app/asks/{ask_id}/answer", {"decision": "approve", "note": EVIL_NOTE}
    )
    assert answered.status_code == 303
    home = dana.get("/app").text
    assert EVIL_NOTE not in home and "&lt;b onmouseover=alert(&#39;note&#39;)&gt;fine" in home
    rules = sign_in(keys.admin).get("/app/rules").text
    assert EVIL_TITLE not in rules and "<script>alert" not in rules
    # The Rules page is a Jinja2 template now, which writes a quote as &#34; (html.escape
    # wrote &quot;): the same text.
    assert "&lt;script&gt;alert(&#34;title&#34;)&lt;/script&gt; &amp; &#34;quotes&#34;" in rules


# --- Home -------------------------------------------------------------------------------
def test_approving_an_ask_on_home_lets_the_call_through(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    put_rule(http, keys.admin)
    asked = _ask(http, keys)
    ask_id = str(dict(asked["ask"])["ask_id"])  # type: ignore[call-overload]
    dana = sign_in(person_key)
    home = dana.get("/app").text
    assert f'action="/app/asks/{ask_id}/answer"' in home
    assert "Refund is over half of the order" in home
    # Each answer form carries a one-use token of its own (docs/web.md), as on Asks.
    [once] = re.findall(
        rf'action="/app/asks/{ask_id}/answer".*?name="once" value="([^"]+)"', home, flags=re.S
    )
    answer = {"decision": "approve", "note": "", "once": once}
    done = dana.post_form(f"/app/asks/{ask_id}/answer", answer)
    assert done.status_code == 303
    assert done.headers["location"] == f"/app?answered={ask_id}&decision=approved#asks"
    assert "You approved ask" in dana.get(done.headers["location"]).text
    body = check_body(arguments={"amount": 80, "order_total": 100})
    body["approval"] = ask_id
    again = http.post("/v1/check", json=body, headers=bearer(keys.agent)).json()
    assert again["result"] == "allow" and again["approval"]["decided_by"] == PERSON
    twice = dana.post_form(f"/app/asks/{ask_id}/answer", {"decision": "deny"})
    assert twice.status_code == 409 and "already" in twice.text
    reload = dana.post_form(f"/app/asks/{ask_id}/answer", answer)
    assert reload.status_code == 409 and "this form was already sent" in reload.text


def test_the_key_that_asked_cannot_answer_in_the_browser(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    # Agent keys cannot sign in at all, so the key that asks here is the admin's: its
    # session is the asking key, and may not answer.
    put_rule(http, keys.admin)
    body = check_body(arguments={"amount": 80, "order_total": 100})
    asked = http.post("/v1/check", json=body, headers=bearer(keys.admin)).json()
    assert asked["result"] == "ask" and asked["ask"]["route"] == "self", asked
    ask_id = str(asked["ask"]["ask_id"])
    admin = sign_in(keys.admin)
    home = admin.get("/app").text
    assert "it cannot answer this ask" in home
    assert re.search(r'value="approve"\s+disabled', home)
    refused = admin.post_form(f"/app/asks/{ask_id}/answer", {"decision": "approve"})
    assert refused.status_code == 403 and "cannot answer its own ask" in refused.text


def test_home_shows_your_agents_and_timeline(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, person_key: str
) -> None:
    put_rule(http, keys.admin, id="big-refund", response="stop", when="amount > 1000",
             title="Refunds over 1,000 are stopped")  # fmt: skip
    for amount in (5, 2000):
        body = check_body(arguments={"amount": amount, "order_total": 5000})
        assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 200
    unchecked = {"app": "shop", "tool": "refund_create", "arguments": {},
                 "agent": check_body()["agent"], "reason": "fail-open"}  # fmt: skip
    assert http.post("/v1/unchecked", json=unchecked, headers=bearer(keys.agent)).status_code == 201
    home = sign_in(person_key).get("/app").text
    agents = home.split('id="agents"')[1].split("</section>")[0]
    assert "claude-code" in agents and "Refunds over 1,000 are stopped" in agents
    assert "67%" in agents and "2 checked · 1 ran unchecked" in agents
    timeline = home.split('id="timeline"')[1]
    assert timeline.count("<tr>") == 3  # the header and two checks


# --- Rules and Evidence -----------------------------------------------------------------
def test_rules_show_versions_with_hash_and_confirm(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    first = put_rule(http, keys.admin, made_by="expert")
    second = put_rule(http, keys.admin, made_by="override", response="stop")
    page = sign_in(keys.admin).get("/app/rules").text
    assert first["hash"][:12] in page and second["hash"][:12] in page
    assert f'title="{second["hash"]}"' in page
    assert "v1" in page and "v2" in page and "expert" in page and "override" in page
    assert "replaced by an edit" in page and PERSON in page and ADMIN in page


def test_evidence_page_and_todays_checkpoints(
    http: httpx.Client, sign_in: Callable[[str], Browserish], keys: Keys, tmp_path: Path
) -> None:
    put_rule(http, keys.admin)
    assert http.post("/v1/ledger/checkpoints", headers=bearer(keys.admin)).status_code == 201
    admin = sign_in(keys.admin)
    page = admin.get("/app/evidence").text
    assert "The chain verifies." in page
    assert 'href="/api/evidence/export"' in page and 'id="retention"' in page
    download = admin.get("/app/evidence/checkpoints")
    assert download.status_code == 200
    assert re.fullmatch(
        r'attachment; filename="claros-checkpoints-\d{4}-\d{2}-\d{2}\.json"',
        download.headers["content-disposition"],
    )
    saved = download.json()
    assert saved["workspace"] == WORKSPACE and saved["format"] == "claros-checkpoints/1"
    keys_by_id = {k["key_id"]: k for k in saved["public_keys"]}
    # The tail was signed for the file: its last checkpoint is the head.
    head = http.get("/v1/ledger/entries", headers=bearer(keys.admin)).headers["x-claros-next"]
    assert saved["checkpoints"][-1]["seq"] == int(head)
    for cp in saved["checkpoints"]:
        public = base64.b64decode(keys_by_id[cp["key_id"]]["public_key"])
        message = checkpoint_message(cp["workspace"], cp["seq"], cp["hash"], cp["ts"])
        VerifyKey(public).verify(message, base64.b64decode(cp["signature"]))
    file = tmp_path / "saved.json"
    file.write_bytes(download.content)
    loaded = load_saved(str(file))  # what claros verify --checkpoints reads
    assert loaded.workspace == WORKSPACE and loaded.keys


def test_the_export_link_takes_the_session(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client
) -> None:
    put_rule(http, keys.admin)
    got = sign_in(keys.admin).client.get("/api/evidence/export")
    assert got.status_code == 200
    assert "attachment" in got.headers["content-disposition"]
    assert json.loads(got.text.splitlines()[0])
    month = time.strftime("%Y-%m", time.gmtime())
    report = sign_in(keys.admin).client.get(
        f"/api/evidence/report?workflow_id=refunds&month={month}&format=html"
    )
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/html")


def test_retention_is_set_from_the_page(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client
) -> None:
    put_rule(http, keys.admin)
    admin = sign_in(keys.admin)
    low = admin.post_form("/app/evidence/retention", {"days": "30"})
    assert low.status_code == 400 and "183" in low.text
    saved = admin.post_form("/app/evidence/retention", {"days": "400"})
    assert saved.status_code == 303
    assert saved.headers["location"] == "/app/evidence?retention=saved#retention"
    page = admin.get(saved.headers["location"]).text
    assert "Retention saved." in page and "400 days" in page
    api = http.get("/api/evidence/retention", headers=bearer(keys.admin)).json()
    assert api["days"] == 400


def test_a_person_makes_an_agent_key_on_home_shown_once(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client, store: Store
) -> None:
    person = sign_in(keys.person)
    home = person.get("/app").text
    [once] = re.findall(r'action="/app/keys".*?name="once" value="([^"]+)"', home, flags=re.S)
    made = person.post_form("/app/keys", {"label": "Laptop <CC>", "once": once})
    assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
    assert "Agent key made" in made.text and "Laptop &lt;CC&gt;" in made.text
    [key] = re.findall(r'value="(ck_[A-Za-z0-9_-]{43})"', made.text)
    # The key is the person's: a check made with it acts for them.
    check = http.post("/v1/check", json=check_body(), headers=bearer(key)).json()
    row = store.get_record(WORKSPACE, "check", check["check_id"])
    assert row is not None
    assert (row["on_behalf_of"], row["obo_source"]) == (PERSON, "agent_key")
    # A reload sends the same form again: no second key.
    again = person.post_form("/app/keys", {"label": "Laptop <CC>", "once": once})
    assert again.status_code == 409 and "already sent" in again.text
    assert "ck_" not in again.text
    # An agent holding a key cannot mint another with it.
    minted = http.post("/app/keys", json={"label": "x"}, headers=bearer(key))
    assert minted.status_code == 403 and "never mint keys" in minted.json()["message"]


def test_an_audit_key_form_sent_twice_makes_one_key(
    sign_in: Callable[[str], Browserish], keys: Keys
) -> None:
    admin = sign_in(keys.admin)
    page = admin.get("/app/evidence").text
    [once] = re.findall(
        r'action="/app/evidence/audit-keys".*?name="once" value="([^"]+)"', page, flags=re.S
    )
    assert admin.post_form("/app/evidence/audit-keys", {"once": once}).status_code == 201
    again = admin.post_form("/app/evidence/audit-keys", {"once": once})
    assert again.status_code == 409 and "ck_" not in again.text


def test_an_audit_key_is_shown_once_and_reads_only_the_log(
    sign_in: Callable[[str], Browserish], keys: Keys, http: httpx.Client, store: Store
) -> None:
    put_rule(http, keys.admin)
    made = sign_in(keys.admin).post_form("/app/evidence/audit-keys", {"label": "Auditor <Q4>"})
    assert made.status_code == 201 and made.headers["cache-control"] == "no-store"
    [key] = re.findall(r'value="(ck_[A-Za-z0-9_-]{43})"', made.text)
    assert "Auditor &lt;Q4&gt;" in made.text
    entries = http.get("/v1/ledger/entries", headers=bearer(key))
    assert entries.status_code == 200 and '"event"' in entries.text
    assert http.get("/api/rules", headers=bearer(key)).status_code == 403
    refused = http.post("/app/signin", json={"key": key})
    assert refused.status_code == 403
