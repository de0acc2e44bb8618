"""The web app end to end in headless Chromium (Debian's chromium + chromium-driver),
driven by Selenium against a real local server.

httpx plays the guard (check -> ask -> approve in the browser -> the check again with the
approval -> allow); ``claros login`` and ``claros verify`` run as subprocesses. A
screenshot of each page is kept in the module's pytest tmp dir (or ``$CLAROS_SCREENSHOTS``).

CI installs the browser: ``apt-get update && apt-get install -y chromium chromium-driver``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys as K
from selenium.webdriver.support.ui import WebDriverWait

from claros.auth import create_key
from claros.config import Settings
from claros.local import LocalServer
from claros.signing import FileSigner
from claros.store.sqlite import SqliteStore
from claros.wiring import Services
from tests.web.conftest import ADMIN, PERSON, WORKSPACE, bearer, check_body, rule

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 10.0

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
    reason="headless Chromium is not installed: apt-get update && apt-get install -y "
    "chromium chromium-driver (gives /usr/bin/chromium and /usr/bin/chromedriver)",
)

IGNORED = (NoSuchElementException, StaleElementReferenceException)
# What Chromium says when a node found in the page being replaced is read after the
# new page is in: the same race as a stale element, under a generic error.
REPLACED_PAGE = (
    "does not belong to the document",
    "Execution context was destroyed",
    "Cannot find context with specified id",
)


@dataclass
class World:
    server: LocalServer
    admin: str
    agent: str  # what the guard (httpx) runs with
    person: str  # Dana signs in with this one (the asking key cannot answer)
    downloads: Path
    shots: Path
    tmp: Path

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("browser")
    settings = Settings(data_dir=tmp / "data", checkpoint_every=5, checkpoint_max_age_s=3600)
    store = SqliteStore(tmp / "claros.db")
    services = Services(settings, store, FileSigner(settings.data_dir))
    admin = create_key(store, WORKSPACE, "admin", person=ADMIN)
    agent = create_key(store, WORKSPACE, "agent", person=PERSON, label="guard")
    person = create_key(store, WORKSPACE, "person", person=PERSON, label="browser")
    # Under the test's own tmp dir unless asked for elsewhere: a test writes nothing into
    # the checkout (another worker may be building from it).
    shots = Path(os.environ.get("CLAROS_SCREENSHOTS") or tmp / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    downloads = tmp / "downloads"
    downloads.mkdir()
    server = LocalServer(services, "127.0.0.1", 0).start()
    try:
        yield World(server, admin, agent, person, downloads, shots, tmp)
    finally:
        server.stop()
        store.close()


@pytest.fixture(scope="module")
def driver(world: World) -> Iterator[Any]:
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={world.tmp / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    options.add_experimental_option(
        "prefs",
        {
            "download.default_directory": str(world.downloads),
            "download.prompt_for_download": False,
            "safebrowsing.enabled": False,
        },
    )
    # The Debian driver, named explicitly: Selenium must not look for or download one.
    browser = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    browser.set_page_load_timeout(WAIT_S * 2)
    browser.execute_cdp_cmd(
        "Browser.setDownloadBehavior",
        {"behavior": "allow", "downloadPath": str(world.downloads)},
    )
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def api(world: World) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=world.url, timeout=30) as client:
        yield client


def _wait(driver: Any, until: Callable[[Any], Any], what: str) -> Any:
    def settled(d: Any) -> Any:
        try:
            return until(d)
        except WebDriverException as error:
            if any(race in (error.msg or "") for race in REPLACED_PAGE):
                return False
            raise

    try:
        # Elements go stale (or are not there yet) while a page is being replaced.
        waiting = WebDriverWait(driver, WAIT_S, poll_frequency=0.05, ignored_exceptions=IGNORED)
        return waiting.until(settled)
    except TimeoutException:
        raise AssertionError(f"timed out after {WAIT_S} s waiting for {what}") from None


def _shot(driver: Any, world: World, name: str) -> Path:
    """A full-page screenshot (the window grown to the page's height)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(900, min(int(height), 4000)))
    path = world.shots / f"{name}.png"
    assert driver.save_screenshot(str(path)), path
    driver.set_window_size(1280, 900)
    return path


def _sign_in(driver: Any, world: World, key: str) -> None:
    driver.delete_all_cookies()
    driver.get(f"{world.url}/app/signin")
    field = driver.find_element(By.ID, "key")
    field.send_keys(key, K.ENTER)
    _wait(driver, lambda d: d.current_url.rstrip("/").endswith("/app"), "Home after sign-in")


def _h1(driver: Any) -> str:
    return str(driver.find_element(By.TAG_NAME, "h1").text)


def test_sign_in_with_the_keyboard(driver: Any, world: World) -> None:
    driver.delete_all_cookies()
    driver.get(f"{world.url}/app")
    _wait(driver, lambda d: "/app/signin" in d.current_url, "the redirect to sign-in")
    _shot(driver, world, "01-sign-in")
    # The key field has focus; Enter submits.
    assert driver.switch_to.active_element.get_attribute("id") == "key"
    label = driver.find_element(By.CSS_SELECTOR, "label[for=key]").text
    assert label == "Your key"
    driver.switch_to.active_element.send_keys(world.person, K.ENTER)
    _wait(driver, lambda d: d.current_url.rstrip("/").endswith("/app"), "Home")
    assert _h1(driver) == "Home"
    # Tab from the top reaches the skip link first, and focus is visible.
    driver.find_element(By.TAG_NAME, "body").send_keys(K.TAB)
    focused = driver.switch_to.active_element
    assert focused.get_attribute("class") == "skip" and focused.is_displayed()
    outline = driver.execute_script("return getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", "")
    focused.send_keys(K.ENTER)
    assert driver.switch_to.active_element.get_attribute("id") == "main"


def test_approve_an_ask_and_the_call_goes_through(
    driver: Any, world: World, api: httpx.Client
) -> None:
    written = api.put(
        "/api/rules/refund-half",
        json={"rule": rule(), "made_by": "expert"},
        headers=bearer(world.admin),
    )
    assert written.status_code == 200, written.text
    call = check_body(arguments={"order": "1187", "amount": 80, "order_total": 100})
    asked = api.post("/v1/check", json=call, headers=bearer(world.agent)).json()
    assert asked["result"] == "ask", asked
    ask_id = asked["ask"]["ask_id"]

    _sign_in(driver, world, world.person)
    card = driver.find_element(By.CSS_SELECTOR, f"form[action='/app/asks/{ask_id}/answer']")
    assert "Refund is over half of the order" in driver.find_element(By.ID, "asks").text
    _shot(driver, world, "02-home-ask")
    card.find_element(By.NAME, "note").send_keys("Checked order 1187: fine")
    card.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
    notice = _wait(
        driver,
        lambda d: (
            "answered=" in d.current_url and d.find_element(By.CSS_SELECTOR, "[role=status]").text
        ),
        "the answer to land",
    )
    assert notice == f"You approved ask {ask_id}."
    assert "Nothing is waiting for you." in driver.find_element(By.ID, "asks").text
    assert "Checked order 1187: fine" in driver.find_element(By.ID, "answered").text
    _shot(driver, world, "03-home-answered")

    again = api.post(
        "/v1/check", json={**call, "approval": ask_id}, headers=bearer(world.agent)
    ).json()
    assert again["result"] == "allow" and again["approval"]["decided_by"] == PERSON


def test_rules_page(driver: Any, world: World, api: httpx.Client) -> None:
    # v1 as the ask test writes it, so this test stands alone (on any worker, in any order).
    if api.get("/api/rules/refund-half", headers=bearer(world.admin)).status_code == 404:
        api.put(
            "/api/rules/refund-half",
            json={"rule": rule(), "made_by": "expert"},
            headers=bearer(world.admin),
        ).raise_for_status()
    edited = rule(response="stop", title="Refunds over half the order total are stopped")
    api.put(
        "/api/rules/refund-half",
        json={"rule": edited, "made_by": "override"},
        headers=bearer(world.admin),
    ).raise_for_status()
    _sign_in(driver, world, world.admin)
    driver.find_element(By.LINK_TEXT, "Rules").click()
    _wait(driver, lambda d: _h1(d) == "Rules", "the Rules page")
    versions = driver.find_element(By.CSS_SELECTOR, "#rule-refund-half table.versions").text
    assert "v2" in versions and "v1" in versions and "OVERRIDE" in versions
    current = driver.find_element(By.CSS_SELECTOR, "a[aria-current=page]").text
    assert current == "Rules"
    _shot(driver, world, "04-rules")


def _downloaded(world: World, prefix: str) -> Path:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        done = [
            p
            for p in world.downloads.iterdir()
            if p.name.startswith(prefix) and not p.name.endswith((".crdownload", ".tmp"))
        ]
        if done:
            return done[0]
        time.sleep(0.05)
    raise AssertionError(f"no download starting {prefix!r} in {WAIT_S} s")


def _claros(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "claros_guard.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)


def test_evidence_download_and_verify_offline(driver: Any, world: World, api: httpx.Client) -> None:
    # Five checks cross a multiple of checkpoint_every (5), so today's checkpoints hold one
    # whichever of this file's tests ran before this one (on any worker, in any order).
    for _ in range(5):
        made = api.post("/v1/check", json=check_body(), headers=bearer(world.agent))
        assert made.status_code == 200, made.text
    _sign_in(driver, world, world.admin)
    driver.find_element(By.LINK_TEXT, "Evidence").click()
    _wait(driver, lambda d: _h1(d) == "Evidence", "the Evidence page")
    assert "The chain verifies." in driver.find_element(By.ID, "chain").text
    _shot(driver, world, "05-evidence")
    driver.find_element(By.PARTIAL_LINK_TEXT, "today's checkpoints").click()
    checkpoints = _downloaded(world, "claros-checkpoints-")
    driver.find_element(By.PARTIAL_LINK_TEXT, "evidence export").click()
    export = _downloaded(world, "claros-evidence-")
    done = _claros("verify", "--export", str(export), "--checkpoints", str(checkpoints))
    assert done.returncode == 0, done.stdout + done.stderr
    tampered = world.tmp / "tampered.jsonl"
    lines = export.read_text().splitlines()
    middle = len(lines) // 2
    lines[middle] = lines[middle].replace('"seq":', '"seq": ', 1).replace("refund", "refunx", 1)
    tampered.write_text("\n".join(lines) + "\n")
    broken = _claros("verify", "--export", str(tampered))
    assert broken.returncode == 1, broken.stdout + broken.stderr


def test_the_printable_monthly_report(driver: Any, world: World, api: httpx.Client) -> None:
    body = {"rule": rule(), "made_by": "expert"}
    api.put("/api/rules/refund-half", json=body, headers=bearer(world.admin)).raise_for_status()
    _sign_in(driver, world, world.admin)
    driver.get(f"{world.url}/app/evidence#reports")
    driver.find_element(By.XPATH, "//button[normalize-space()='Open the printable report']").click()
    _wait(
        driver,
        lambda d: (
            "format=html" in d.current_url and "refunds" in d.find_element(By.TAG_NAME, "body").text
        ),
        "the report",
    )
    assert (
        "/api/evidence/report?" in driver.current_url
        and "workflow_id=refunds" in driver.current_url
    )
    assert "refunds" in driver.find_element(By.TAG_NAME, "body").text
    _shot(driver, world, "09-monthly-report")


def test_make_an_audit_key(driver: Any, world: World, api: httpx.Client) -> None:
    _sign_in(driver, world, world.admin)
    driver.get(f"{world.url}/app/evidence#audit")
    driver.find_element(By.ID, "audit-label").send_keys("Auditor, Q4")
    driver.find_element(By.XPATH, "//button[normalize-space()='Make an audit key']").click()
    _wait(driver, lambda d: _h1(d) == "Audit key made", "the new key")
    key = driver.find_element(By.ID, "audit-key").get_attribute("value")
    assert key and key.startswith("ck_")
    _shot(driver, world, "06-audit-key")
    entries = api.get("/v1/ledger/entries", headers=bearer(key))
    assert entries.status_code == 200 and '"event"' in entries.text


def test_device_sign_in_with_claros_login(driver: Any, world: World) -> None:
    config = world.tmp / "xdg"
    env = {**os.environ, "XDG_CONFIG_HOME": str(config), "PYTHONUNBUFFERED": "1"}
    env.pop("CLAROS_KEY", None)
    login = subprocess.Popen(
        [sys.executable, "-m", "claros_guard.cli", "login", "--url", world.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert login.stdout is not None
        page = ""
        deadline = time.monotonic() + WAIT_S
        while not page and time.monotonic() < deadline:
            line = login.stdout.readline()
            if "/app/device?code=" in line:
                page = line.strip()
        assert page, "claros login printed no page to open"
        code = page.rsplit("=", 1)[1]
        _sign_in(driver, world, world.person)
        driver.get(page)
        assert driver.find_element(By.CSS_SELECTOR, ".bigcode").text == code
        _shot(driver, world, "07-device")
        driver.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
        _wait(
            driver,
            lambda d: "Go back to your terminal" in d.find_element(By.TAG_NAME, "main").text,
            "the approval",
        )
        _shot(driver, world, "08-device-approved")
        out, err = login.communicate(timeout=30)
    finally:
        if login.poll() is None:
            login.kill()
            login.wait(5)
    assert login.returncode == 0, out + err
    assert f"Signed in as {PERSON}" in out
    saved = config / "claros" / "credentials.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    # The saved key is what the client commands use without CLAROS_KEY.
    done = _claros("verify", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
