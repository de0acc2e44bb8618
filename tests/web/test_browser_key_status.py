"""The Keys & people page in headless Chromium says what auth would do with each key
(issue 13): a removed member's keys and a demoted admin's admin key are shown refused,
with the reason a request with them is answered with, not "active".

Screenshots at 1280 and 420 px wide go under the pytest tmp dir (``screenshots/``)."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
from selenium.webdriver.common.by import By

from claros.auth import create_key
from tests.web.conftest import WORKSPACE, bearer, check_body
from tests.web.test_browser import _h1, _sign_in, _wait, driver  # noqa: F401 - the fixture
from tests.web.test_browser_people import (  # noqa: F401 - the fixtures, and the shots
    World,
    api,
    pytestmark,
    shots,
    world,
)


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def test_keys_page_shows_removed_and_demoted_peoples_keys_as_refused(
    driver: Any,  # noqa: F811 - the imported fixture
    world: World,  # noqa: F811
    api: httpx.Client,  # noqa: F811
) -> None:
    eve = create_key(world.store, WORKSPACE, "agent", person="eve@acme.test", label="eve's bot")
    kim = create_key(world.store, WORKSPACE, "admin", person="kim@acme.test", label="kim")
    assert api.post("/v1/check", json=check_body(), headers=bearer(eve)).status_code == 200
    removed = api.delete("/api/members/eve@acme.test", headers=bearer(world.admin))
    assert removed.status_code == 200, removed.text
    demoted = api.put("/api/members/kim@acme.test", json={"role": "member"},
                      headers=bearer(world.admin))  # fmt: skip
    assert demoted.status_code == 200, demoted.text

    _sign_in(driver, world, world.admin)
    driver.find_element(By.LINK_TEXT, "Keys & people").click()
    _wait(driver, lambda d: _h1(d) == "Keys & people", "the Keys & people page")
    row = driver.find_element(By.ID, f"key-{key_id(eve)}").text.lower()
    assert "refused" in row and "no longer a member of the workspace" in row
    assert "active" not in row
    row = driver.find_element(By.ID, f"key-{key_id(kim)}").text.lower()
    assert "refused" in row and "no longer a workspace admin" in row
    mine = driver.find_element(By.ID, f"key-{key_id(world.admin)}").text.lower()
    assert "active" in mine and "refused" not in mine
    shots(driver, world, "keys-refused")
    # What the page says is what auth does.
    refused = api.post("/v1/check", json=check_body(), headers=bearer(eve))
    assert refused.status_code == 401 and "no longer a member" in refused.json()["message"]
    assert api.get("/api/members", headers=bearer(kim)).status_code == 401
