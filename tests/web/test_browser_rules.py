"""The Rules page's forms, the error page and the printable report in headless Chromium,
at 1280 and 420 px wide (screenshots in the pytest tmp dir, ``screens/``).

At 420 px nothing may stick out of the screen: the page is never wider than the window,
and tables are stacked cards (each cell labelled with its column)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

from tests.web.conftest import bearer, rule
from tests.web.test_browser import (  # noqa: F401 - the module's fixtures and helpers
    CHROMEDRIVER,
    CHROMIUM,
    World,
    _h1,
    _sign_in,
    _wait,
    api,
    driver,
    world,
)

pytestmark = pytest.mark.skipif(
    not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
    reason="headless Chromium is not installed: apt-get install -y chromium chromium-driver",
)


@pytest.fixture(scope="module")
def screens(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screens")


def _shots(browser: Any, screens: Path, name: str) -> list[Path]:
    """Full-page screenshots at 1280 and 420 px; at 420 the page must fit the window."""
    out = []
    for width in (1280, 420):
        browser.set_window_size(width, 900)
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(width, max(900, min(int(height), 6000)))
        if width == 420:
            _fits(browser, name)
        path = screens / f"{name}-{width}.png"
        assert browser.save_screenshot(str(path)), path
        out.append(path)
    browser.set_window_size(1280, 900)
    return out


def _fits(browser: Any, name: str) -> None:
    inner = browser.execute_script("return document.documentElement.clientWidth")
    wide = browser.execute_script(
        "return [...document.querySelectorAll('main *')].filter(e => {"
        " const r = e.getBoundingClientRect();"
        " if (e.closest('thead')) return false;"
        " return r.width > 0 && (r.right > document.documentElement.clientWidth + 1 || r.left < -1)"
        "}).map(e => e.tagName + '.' + e.className).slice(0, 5)"
    )
    scroll = browser.execute_script("return document.documentElement.scrollWidth")
    assert scroll <= inner + 1 and not wide, f"{name}: wider than {inner} px: {wide}"


@pytest.fixture(scope="module")
def rules_world(world: World) -> Iterator[World]:  # noqa: F811 - the imported fixture
    with httpx.Client(base_url=world.url, timeout=30) as http:
        admin = bearer(world.admin)
        http.put("/api/rules/refund-half", json={"rule": rule()}, headers=admin).raise_for_status()
        long_id = rule(id="payout-" + "x" * 40, title="A rule with a long id", tools=["payout"])
        http.put(f"/api/rules/{long_id['id']}", json={"rule": long_id}, headers=admin)
        tools = [{"name": "order_read", "read": True}, {"name": "refund_create", "read": False}]
        http.post("/v1/apps/shop/tools", json={"tools": tools}, headers=bearer(world.agent))
        fetch = {"tool": "order_read", "arguments": {"id": "$order"}, "into": "order"}
        mapping = {"app": "shop", "tool": "refund_create", "fetch": fetch}
        saved = http.put(
            "/api/mappings/shop/refund_create", json={"mapping": mapping}, headers=admin
        )
        saved.raise_for_status()
    yield world


def test_an_admin_edits_a_rule_and_closes_a_mapping_in_the_browser(
    driver: Any,  # noqa: F811
    rules_world: World,
    screens: Path,
) -> None:
    w = rules_world
    _sign_in(driver, w, w.admin)
    driver.get(f"{w.url}/app/rules")
    _wait(driver, lambda d: _h1(d) == "Rules", "the Rules page")
    card = driver.find_element(By.ID, "rule-refund-half")
    # The push-time warning for order_total (no argument or mapping provides it) is beside it.
    assert "order_total" in card.find_element(By.CSS_SELECTOR, ".warnings-box").text
    _shots(driver, screens, "rules")

    # Bad YAML: the form comes back open, with what was typed and one plain sentence.
    card.find_element(By.CSS_SELECTOR, "details.edit > summary").click()
    area = card.find_element(By.NAME, "text")
    area.clear()
    area.send_keys("title: [unclosed")
    card.find_element(By.CSS_SELECTOR, "details.edit button[type=submit]").click()
    alert = _wait(
        driver,
        lambda d: d.find_element(By.CSS_SELECTOR, "#rule-refund-half [role=alert]").text,
        "the form back with its message",
    )
    assert alert.startswith("The rule is not valid YAML or JSON near line 1")
    card = driver.find_element(By.ID, "rule-refund-half")
    assert card.find_element(By.NAME, "text").get_attribute("value") == "title: [unclosed"
    _shots(driver, screens, "rules-bad-text")

    # A good edit: a new version, confirmed by the admin.
    area = card.find_element(By.NAME, "text")
    area.clear()
    text = "\n".join(
        [
            "workflow_id: refunds",
            "app: shop",
            "tools: [refund_create]",
            "title: Refunds over half the order are stopped",
            "when: amount > order_total / 2",
            "response: stop",
        ]
    )
    area.send_keys(text)
    card.find_element(By.CSS_SELECTOR, "details.edit button[type=submit]").click()
    notice = _wait(
        driver,
        lambda d: (
            "done=" in d.current_url and d.find_element(By.CSS_SELECTOR, "[role=status]").text
        ),
        "the saved notice",
    )
    assert notice == "Saved rule refund-half as a new version."
    card = driver.find_element(By.ID, "rule-refund-half")
    assert "Refunds over half the order are stopped" in card.text
    versions = card.find_element(By.CSS_SELECTOR, "table.versions").text
    assert "v2" in versions and "v1" in versions and "replaced by an edit" in versions

    # Close the mapping: its card says closed, by whom and why.
    mapping = driver.find_element(By.CSS_SELECTOR, "article.mapping")
    mapping.find_element(By.CSS_SELECTOR, "details.close > summary").click()
    mapping.find_element(By.NAME, "reason").send_keys("Orders moved to the new shop")
    mapping.find_element(By.CSS_SELECTOR, "details.close button[type=submit]").click()
    _wait(driver, lambda d: "mapping_closed" in d.current_url, "the mapping closed")
    mapping = driver.find_element(By.CSS_SELECTOR, "article.mapping")
    assert "CLOSED" in mapping.find_element(By.CSS_SELECTOR, ".badges").text
    assert "Orders moved to the new shop" in mapping.text
    _shots(driver, screens, "rules-after")
    # At 420 px the versions table is a stack of labelled cards.
    driver.set_window_size(420, 900)
    cell = driver.find_element(By.CSS_SELECTOR, "#rule-refund-half table.versions td")
    assert cell.get_attribute("data-label") == "Version"
    assert driver.execute_script("return getComputedStyle(arguments[0]).display", cell) == "grid"
    driver.set_window_size(1280, 900)


def test_pages_fit_a_narrow_screen_and_errors_are_pages(
    driver: Any,  # noqa: F811
    rules_world: World,
    screens: Path,
) -> None:
    w = rules_world
    driver.delete_all_cookies()
    driver.get(f"{w.url}/app/signin")
    _shots(driver, screens, "sign-in")
    _sign_in(driver, w, w.admin)
    driver.get(f"{w.url}/app/no-such-page")
    assert _h1(driver) == "Not found"
    assert "There is no such page" in driver.find_element(By.TAG_NAME, "main").text
    _shots(driver, screens, "not-found")
    driver.get(f"{w.url}/app/signout")
    assert _h1(driver) == "Use the button"
    driver.get(f"{w.url}/app/device")
    assert _h1(driver) == "Sign in a device"
    _shots(driver, screens, "device")


def test_the_printable_report_in_the_viewers_zone(
    driver: Any,  # noqa: F811
    rules_world: World,
    screens: Path,
) -> None:
    w = rules_world
    _sign_in(driver, w, w.admin)
    driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Europe/Berlin"})
    try:
        month = driver.execute_script("return new Date().toISOString().slice(0, 7)")
        driver.get(f"{w.url}/api/evidence/report?workflow_id=refunds&month={month}&format=html")
        assert _h1(driver).startswith("Claros monthly report: refunds")
        first = driver.find_element(By.CSS_SELECTOR, ".lede time")
        # Written in UTC, shown in the viewer's zone (Berlin: GMT+1 or GMT+2, CET or CEST).
        assert first.get_attribute("title").endswith("UTC")
        assert any(zone in first.text for zone in ("GMT+1", "GMT+2", "CET", "CEST")), first.text
        _shots(driver, screens, "report")
    finally:
        driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})
