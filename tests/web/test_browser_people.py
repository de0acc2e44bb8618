"""Asks and Keys & people in headless Chromium against a real local server (issue 13):
an admin revokes a key in the page and that key is refused, a member's session ends when
their key is revoked, and a person answers the 51st open ask from the queue's second page.

Screenshots at 1280 and 420 px wide go under the pytest tmp dir (``screenshots/``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

from claros.auth import create_key
from claros.config import Settings
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.sqlite import SqliteStore
from claros.wiring import Services
from tests.web.conftest import ADMIN, PERSON, WORKSPACE, bearer, check_body, rule
from tests.web.test_browser import (  # noqa: F401 - the driver fixture, and its helpers
    CHROMEDRIVER,
    CHROMIUM,
    _h1,
    _sign_in,
    _wait,
    driver,
)

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
    reason="headless Chromium is not installed: apt-get update && apt-get install -y "
    "chromium chromium-driver",
)


@dataclass
class World:
    server: LocalServer
    admin: str
    agent: str
    person: str
    downloads: Path
    shots: Path
    tmp: Path
    store: SqliteStore

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("people")
    settings = Settings(data_dir=tmp / "data", checkpoint_every=50, checkpoint_max_age_s=3600)
    store = SqliteStore(tmp / "claros.db")
    services = Services(settings, store, FileSigner(settings.data_dir))
    admin = create_key(store, WORKSPACE, "admin", person=ADMIN)
    agent = create_key(store, WORKSPACE, "agent", person=PERSON, label="guard")
    person = create_key(store, WORKSPACE, "person", person=PERSON, label="browser")
    shots = tmp / "screenshots"
    shots.mkdir()
    downloads = tmp / "downloads"
    downloads.mkdir()
    server = LocalServer(services, "127.0.0.1", 0).start()
    try:
        yield World(server, admin, agent, person, downloads, shots, tmp, store)
    finally:
        server.stop()
        store.close()


@pytest.fixture
def api(world: World) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=world.url, timeout=30) as client:
        yield client


def shots(browser: Any, world: World, name: str) -> list[Path]:
    """Full-page screenshots at 1280 and 420 px wide; nothing in the page's content may
    stick out sideways."""
    paths = []
    for width in (1280, 420):
        browser.set_window_size(width, 900)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(width, max(900, min(int(height), 6000)))
        path = world.shots / f"{name}-{width}.png"
        assert browser.save_screenshot(str(path)), path
        wide = browser.execute_script(
            "const w = document.documentElement.clientWidth; return [...document.querySelectorAll"
            "('main *')].filter(e => e.getBoundingClientRect().right > w + 1).slice(0, 5)"
            ".map(e => e.tagName + '.' + e.className + ' ' + (e.id || ''))"
        )
        # The page's own content (the top bar's tabs are the layout's, issue 13 item 8).
        assert not wide, f"{name} at {width} px: sticking out sideways: {wide}"
        paths.append(path)
    browser.set_window_size(1280, 900)
    return paths


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def test_revoke_a_key_in_the_page_and_it_is_refused(
    driver: Any,  # noqa: F811 - the imported fixture
    world: World,
    api: httpx.Client,
) -> None:
    guard = create_key(world.store, WORKSPACE, "agent", person=PERSON, label="ci")
    assert api.post("/v1/check", json=check_body(), headers=bearer(guard)).status_code == 200
    _sign_in(driver, world, world.admin)
    driver.find_element(By.LINK_TEXT, "Keys & people").click()
    _wait(driver, lambda d: _h1(d) == "Keys & people", "the Keys & people page")
    row = driver.find_element(By.ID, f"key-{key_id(guard)}")
    assert "agent" in row.text and PERSON in row.text and "ci" in row.text
    assert "active" in row.text.lower() and "never" not in row.text  # its check was its last use
    people = driver.find_element(By.ID, "members").text
    assert ADMIN in people and PERSON in people
    shots(driver, world, "keys-before")
    row.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    notice = _wait(
        driver,
        lambda d: "revoked=" in d.current_url and d.find_element(By.CSS_SELECTOR, "[role=status]"),
        "the revocation",
    )
    assert notice.text == f"Revoked key {key_id(guard)}."
    row = driver.find_element(By.ID, f"key-{key_id(guard)}")
    assert "revoked" in row.text.lower() and f"by {ADMIN}" in row.text
    assert not row.find_elements(By.CSS_SELECTOR, "button")
    shots(driver, world, "keys-revoked")

    refused = api.post("/v1/check", json=check_body(), headers=bearer(guard))
    assert refused.status_code == 401 and "revoked" in refused.json()["message"]


def test_a_member_whose_key_is_revoked_is_signed_out(
    driver: Any,  # noqa: F811 - the imported fixture
    world: World,
    api: httpx.Client,
) -> None:
    store = world.store
    eve = create_key(store, WORKSPACE, "person", person="eve@acme.test", label="browser")
    own = create_key(store, WORKSPACE, "agent", person="eve@acme.test", label="laptop")
    _sign_in(driver, world, eve)
    driver.get(f"{world.url}/app/keys")
    assert _h1(driver) == "Your keys"
    table = driver.find_element(By.ID, "keys").text
    assert key_id(eve) in table and key_id(own) in table and key_id(world.admin) not in table
    # Her agent key she may revoke herself; her sign-in key has no button.
    mine = driver.find_element(By.ID, f"key-{key_id(eve)}")
    assert not mine.find_elements(By.CSS_SELECTOR, "button")
    assert not driver.find_elements(By.ID, "members")  # people are the admins' to manage
    shots(driver, world, "keys-member")
    done = api.post(f"/api/keys/{key_id(eve)}/revoke", headers=bearer(world.admin))
    assert done.status_code == 200, done.text
    driver.get(f"{world.url}/app/keys")
    _wait(driver, lambda d: "/app/signin" in d.current_url, "the sign-in page")
    assert "Sign in" in _h1(driver)


def test_answer_the_51st_open_ask(
    driver: Any,  # noqa: F811 - the imported fixture
    world: World,
    api: httpx.Client,
) -> None:
    written = api.put(
        "/api/rules/refund-half",
        json={"rule": rule(), "made_by": "expert"},
        headers=bearer(world.admin),
    )
    assert written.status_code == 200, written.text
    asked = []
    for i in range(51):
        call = check_body(arguments={"order": str(2000 + i), "amount": 80, "order_total": 100})
        answer = api.post("/v1/check", json=call, headers=bearer(world.agent)).json()
        assert answer["result"] == "ask", answer
        asked.append((call, answer["ask"]["ask_id"]))
    last_call, last = asked[-1]

    _sign_in(driver, world, world.person)
    home = driver.find_element(By.ID, "asks").text
    assert "Showing 50 of 51 open asks." in home
    driver.find_element(By.LINK_TEXT, "See them all in Asks").click()
    _wait(driver, lambda d: _h1(d) == "Asks", "the Asks page")
    queue = driver.find_element(By.ID, "queue")
    assert "51 open asks routed to you" in queue.text
    assert len(queue.find_elements(By.CSS_SELECTOR, "article.ask")) == 50
    assert not driver.find_elements(By.CSS_SELECTOR, f"form[action='/app/asks/{last}/answer']")
    assert "Showing 50 of 51 open asks." in queue.text
    shots(driver, world, "asks-first-page")
    driver.find_element(By.LINK_TEXT, "Show the next").click()
    card = _wait(
        driver,
        lambda d: d.find_element(By.CSS_SELECTOR, f"form[action='/app/asks/{last}/answer']"),
        "the 51st ask on the next page",
    )
    assert len(driver.find_elements(By.CSS_SELECTOR, "article.ask")) == 1
    assert "2050" in driver.find_element(By.ID, "queue").text  # its order number
    shots(driver, world, "asks-second-page")
    card.find_element(By.NAME, "note").send_keys("The 51st: fine")
    card.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
    notice = _wait(
        driver,
        lambda d: "answered=" in d.current_url and d.find_element(By.CSS_SELECTOR, "[role=status]"),
        "the answer to land",
    )
    assert notice.text == f"You approved ask {last}."
    assert "/app/asks" in driver.current_url
    assert "50 open asks routed to you" in driver.find_element(By.ID, "queue").text
    shots(driver, world, "asks-answered")

    again = api.post(
        "/v1/check", json={**last_call, "approval": last}, headers=bearer(world.agent)
    ).json()
    assert again["result"] == "allow" and again["approval"]["decided_by"] == PERSON
