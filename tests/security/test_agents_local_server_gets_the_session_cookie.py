"""A coding agent runs a web server of its own on the person's machine (a dev server, a
"preview", a port a dev container forwards to localhost) and asks the person to open it.
Cookies are not kept apart by port (RFC 6265, section 8.5): the browser sends every cookie
of the host, ``claros_session`` included, to ``http://127.0.0.1:<any port>``. The agent
reads the session id from the request, loads a page of the app with it, takes the form's
CSRF token from the page (or computes it: a hash of the session id), and tries to approve
its own ask in the person's name.

Real Chromium (Debian's, driven by Selenium), a real ``claros serve``-style local server,
and a plain stdlib HTTP server standing for the agent's.

Seen working on the old code (Chromium 156): the agent's server was sent
``claros_session`` and the agent's POST to ``/app/asks/{id}/answer`` was a 303, the ask
``approved`` in Dana's name. This test, run on that code: "the agent approved its own ask
with the session cookie its server was sent ([303, 409, 409], cookie sent to the agent's
port: True)" (the first replay approved; the other two found it answered), and no hand in
the browser's storage.

Closed: a session has a second secret, the hand, that never travels in a cookie. Sign-in
answers with a page whose claros.js keeps it in the app origin's localStorage (an origin,
unlike a cookie, includes the port), and every state-changing request carried by the
cookie must send it. The agent's server still gets the cookie (this test checks so: the
browser has not changed), and reading with it still works (docs/web.md says so), but its
answer is a 403 and the ask stays open; Dana's own approval in the browser still works.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from claros.auth import create_key
from claros.config import Settings
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.sqlite import SqliteStore
from claros.web.sessions import csrf_token
from claros.wiring import Services
from tests.web.conftest import ADMIN, PERSON, WORKSPACE, bearer, check_body, rule

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 10.0
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
HAND_REFUSED = "this browser did not sign in here, or its sign-in was cleared: sign in again to act"

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
    reason="headless Chromium is not installed: apt-get update && apt-get install -y "
    "chromium chromium-driver",
)


class _AgentsServer:
    """The agent's own local web server: it keeps the Cookie header each request brings."""

    def __init__(self) -> None:
        self.cookies: list[str] = []
        self.seen = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                outer.cookies.append(self.headers.get("Cookie") or "")
                outer.seen.set()
                body = b"<!doctype html><title>Preview</title><p>Your preview is ready."
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def __enter__(self) -> _AgentsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=WAIT_S)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[tuple[LocalServer, Services]]:
    settings = Settings(data_dir=tmp_path / "data", checkpoint_every=5, checkpoint_max_age_s=3600)
    store = SqliteStore(tmp_path / "claros.db")
    services = Services(settings, store, FileSigner(settings.data_dir))
    server = LocalServer(services, "127.0.0.1", 0).start()
    try:
        yield server, services
    finally:
        server.stop()
        store.close()


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):  # fmt: skip
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    browser.set_page_load_timeout(WAIT_S * 2)
    try:
        yield browser
    finally:
        browser.quit()


def _sign_in(driver: Any, url: str, key: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys as K
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/app/signin")
    driver.find_element(By.ID, "key").send_keys(key, K.ENTER)
    WebDriverWait(driver, WAIT_S).until(lambda d: d.current_url.rstrip("/").endswith("/app"))


def test_agents_local_server_cannot_approve_with_the_session_it_was_sent(
    local: tuple[LocalServer, Services], driver: Any
) -> None:
    server, services = local
    admin = create_key(services.store, WORKSPACE, "admin", person=ADMIN)
    person = create_key(services.store, WORKSPACE, "person", person=PERSON, label="browser")
    with httpx.Client(base_url=server.url, timeout=30) as api:
        spec = rule()  # ask; owned by PERSON, so her own agent's ask is routed to her
        put = api.put(f"/api/rules/{spec['id']}", json={"rule": spec, "made_by": "manual"},
                      headers=bearer(admin))  # fmt: skip
        assert put.status_code == 200, put.text
        made = api.post("/app/keys", json={"label": "agent"}, headers=bearer(person))
        agent = str(made.json()["key"])
        asked = api.post("/v1/check", json=check_body(arguments={"amount": 80, "order_total": 100}),
                         headers=bearer(agent))  # fmt: skip
        assert asked.json()["result"] == "ask", asked.text
        ask_id = asked.json()["ask"]["ask_id"]

    _sign_in(driver, server.url, person)  # Dana, in her browser
    with _AgentsServer() as agents:
        driver.get(agents.url)  # "I started the preview on ..., have a look"
        assert agents.seen.wait(WAIT_S), "the browser never reached the agent's server"
    sent = "; ".join(agents.cookies)

    # The agent, with what its server was sent and nothing else.
    found = re.search(r"claros_session=([^;\s]+)", sent)
    # The browser still sends the cookie to every port: what changed is what it is worth.
    assert found, f"the agent's server was not sent the session cookie ({sent!r})"
    stolen = {"claros_session": found.group(1)}
    with httpx.Client(base_url=server.url, timeout=30, cookies=stolen) as thief:
        page = thief.get("/app/asks", headers={"accept": "text/html"})
        assert page.status_code == 200, "reading with the cookie alone still works"
        token = _CSRF.search(page.text)
        assert token, "the page's CSRF token"
        assert token.group(1) == csrf_token(found.group(1))  # computed from the cookie
        answers = [
            thief.post(  # the form, as the page has it, with the scraped token
                f"/app/asks/{ask_id}/answer",
                data={"decision": "approve", "back": "asks", "once": "o1",
                      "csrf": token.group(1)},
                headers={"accept": "text/html"},
            ),
            thief.post(  # a guessed hand
                f"/app/asks/{ask_id}/answer",
                data={"decision": "approve", "back": "asks", "once": "o2",
                      "csrf": token.group(1), "hand": found.group(1)},
                headers={"accept": "text/html"},
            ),
            thief.post(  # the script's way, with the computed token
                f"/app/asks/{ask_id}/answer",
                json={"decision": "approve"},
                headers={"x-csrf-token": csrf_token(found.group(1))},
            ),
        ]  # fmt: skip
    with httpx.Client(base_url=server.url, timeout=30) as api:
        view = api.get(f"/v1/asks/{ask_id}", headers=bearer(agent)).json()
    assert view["status"] == "open", (
        f"the agent approved its own ask with the session cookie its server was sent "
        f"({[a.status_code for a in answers]}, cookie sent to the agent's port: {bool(found)})"
    )
    assert [a.status_code for a in answers] == [403, 403, 403]
    assert "did not sign in here" in answers[0].text and 'role="alert"' in answers[0].text
    assert answers[2].json()["message"] == HAND_REFUSED

    # Dana, in her own browser (claros.js adds the hand to the form), still approves.
    _approve_in_the_browser(driver, server.url, ask_id)
    with httpx.Client(base_url=server.url, timeout=30) as api:
        view = api.get(f"/v1/asks/{ask_id}", headers=bearer(agent)).json()
    assert view["status"] == "approved" and view["decided_by"] == PERSON, view


def _approve_in_the_browser(driver: Any, url: str, ask_id: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/app/asks")
    form = driver.find_element(By.CSS_SELECTOR, f"form[action='/app/asks/{ask_id}/answer']")
    form.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: "answered=" in d.current_url)


def _stored_hand(driver: Any) -> str | None:
    return driver.execute_script("return window.localStorage.getItem('claros-hand');")  # type: ignore[no-any-return]


def test_the_hand_is_kept_per_origin_and_signing_out_forgets_it(
    local: tuple[LocalServer, Services], driver: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server, services = local
    person = create_key(services.store, WORKSPACE, "person", person=PERSON, label="browser")
    _sign_in(driver, server.url, person)
    hand = _stored_hand(driver)
    assert hand and len(hand) >= 43
    # The page that answered the sign-in is gone from history (location.replace), and no
    # cookie holds the hand.
    assert hand not in "; ".join(f"{c['name']}={c['value']}" for c in driver.get_cookies())
    with _AgentsServer() as agents:  # another port of the same host: not the app's origin
        driver.get(agents.url)
        assert agents.seen.wait(WAIT_S)
        assert _stored_hand(driver) is None
    driver.get(f"{server.url}/app")
    driver.find_element(By.CSS_SELECTOR, "form[action='/app/signout'] button").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: "signed_out=1" in d.current_url)
    assert _stored_hand(driver) is None
