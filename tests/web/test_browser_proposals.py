"""The mapper in headless Chromium: the Rules page's "Propose mapping" button, the proposal
page (draft, reasons, confidence), and saving it. Screenshots at 1280 and 420 px wide go
to the test's tmp dir (and build/screenshots, as the other browser tests')."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import yaml
from selenium.webdriver.common.by import By

from tests.mapping.examples import EXAMPLES, registrations
from tests.web import test_browser
from tests.web.conftest import bearer
from tests.web.test_browser import World, _h1, _sign_in, _wait

# The browser tests' fixtures and marks, shared (assigned, so parameters may take the names).
api = test_browser.api
driver = test_browser.driver
world = test_browser.world
pytestmark = test_browser.pytestmark


def _shots(driver: Any, world: World, tmp_path: Path, name: str) -> list[Path]:
    out = []
    for width in (1280, 420):
        driver.set_window_size(width, 900)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, max(900, min(int(height), 4000)))
        for folder in (tmp_path, world.shots):
            path = folder / f"{name}-{width}.png"
            assert driver.save_screenshot(str(path)), path
            out.append(path)
    driver.set_window_size(1280, 900)
    return out


def test_propose_a_mapping_from_an_apps_page_and_save_it(
    driver: Any, world: World, api: httpx.Client, tmp_path: Path
) -> None:
    for app, tools in registrations().items():
        api.post(f"/v1/apps/{app}/tools", json={"tools": tools},
                 headers=bearer(world.agent)).raise_for_status()  # fmt: skip
    for rule in yaml.safe_load((EXAMPLES / "rules.yaml").read_text())["rules"]:
        api.put(f"/api/rules/{rule['id']}", json={"rule": rule},
                headers=bearer(world.admin)).raise_for_status()  # fmt: skip
    _sign_in(driver, world, world.admin)
    driver.get(f"{world.url}/app/rules#tools")
    _wait(driver, lambda d: _h1(d) == "Rules", "the Rules page")
    # The Rules page lists the apps, one row each; an app's page has its tools.
    driver.find_element(By.CSS_SELECTOR, "#tools a[href='/app/apps/accounting']").click()
    _wait(driver, lambda d: _h1(d) == "App accounting", "the accounting app's page")
    _shots(driver, world, tmp_path, "05-app-tools")
    button = driver.find_element(
        By.CSS_SELECTOR, "button[aria-label='Propose a mapping for credit_note_create']"
    )
    assert not driver.find_elements(
        By.CSS_SELECTOR, "button[aria-label='Propose a mapping for order_read']"
    ), "a read tool has no Propose button"
    button.click()
    _wait(driver, lambda d: _h1(d) == "Proposed mapping", "the proposal page")
    reasons = driver.find_element(By.ID, "proposal-parts").text
    assert "lookups[0]" in reasons and "shop.order_read" in reasons and "70%" in reasons
    draft = driver.find_element(By.ID, "mapping-text").get_attribute("value")
    assert yaml.safe_load(draft) == next(
        m for m in yaml.safe_load((EXAMPLES / "mappings.yaml").read_text())["mappings"]
        if m["tool"] == "credit_note_create"
    )  # fmt: skip
    _shots(driver, world, tmp_path, "06-proposal")
    driver.find_element(By.XPATH, "//button[text()='Save this mapping']").click()
    _wait(driver, lambda d: _h1(d) == "Rules", "the Rules page after saving")
    notice = driver.find_element(By.CSS_SELECTOR, ".notice").text
    assert notice == "Mapping saved: accounting credit_note_create v1."
    saved = api.get("/api/mappings/accounting/credit_note_create", headers=bearer(world.admin))
    assert saved.json()["confirm"]["made_by"] == "proposed"
    assert saved.json()["confirm"]["confirmed_by"] == "admin@acme.test"
