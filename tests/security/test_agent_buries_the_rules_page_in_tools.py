"""Attack: an agent buries the admin's Rules page under tool registrations.

A guard registers its server's tools with the agent's own key (``POST
/v1/apps/{app}/tools``, up to 1,000 tools an app). The Rules page listed every tool of
every app, one table row each with a form: an agent that registered app after app of
1,000 write tools made the page grow without bound (20 apps: 20,000 rows, megabytes of
HTML read from the store and rendered on every visit), so the admin could no longer use
the page where tools held as writes are confirmed and rules are edited. With the Lambda
stack, each visit read every app's doc (up to 400 KB each) as well.

Now a workspace registers at most ``MAX_APPS`` apps (a new one past that is a 409 that says
so), and the Rules page shows one row per app, with the tools that wait for the admin
(held as writes) beside it; each app's tools are listed on the app's own page.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.api.conftest import Keys, bearer
from tests.web.conftest import Browserish, sign_in  # noqa: F401 - a fixture

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

TOOLS = 1_000
APPS = 12


def _register(http: httpx.Client, key: str, app: str, *, read: bool = False) -> httpx.Response:
    tools = [{"name": f"{app}_tool_{i:04d}", "read": read} for i in range(TOOLS)]
    return http.post(f"/v1/apps/{app}/tools", json={"tools": tools}, headers=bearer(key))


def test_many_apps_of_many_tools_leave_the_rules_page_small(
    http: httpx.Client,
    keys: Keys,
    sign_in: Callable[[str], Browserish],  # noqa: F811
) -> None:
    for n in range(APPS):
        answer = _register(http, keys.agent, f"app{n:02d}")
        assert answer.status_code == 200, answer.text
    # One app's tools turn to reads: Claros holds them as writes until the admin confirms.
    answer = _register(http, keys.agent, "app00", read=True)
    assert answer.status_code == 200, answer.text

    admin = sign_in(keys.admin)
    page = admin.get("/app/rules")
    assert page.status_code == 200, page.text
    # Old code: every tool a row (12,000 rows, several MB). Now one row per app.
    assert len(page.content) < 400_000, f"the Rules page is {len(page.content):,} bytes"
    assert page.text.count("app05_tool_") == 0, "another app's tools are all on the page"
    for n in range(APPS):
        assert f'href="/app/apps/app{n:02d}"' in page.text
    # The held tools still wait on the page for the admin, with a confirm form each (a
    # page of them at most; the app's page has the rest).
    assert "/app/apps/app00/tools/app00_tool_0000/confirm" in page.text
    assert page.text.count("/confirm") == 50
    assert (
        "Showing 50 of 1000 tools waiting. Each app's page above lists all of its own." in page.text
    )

    # The app's own page lists its tools.
    one = admin.get("/app/apps/app05")
    assert one.status_code == 200, one.text
    assert one.text.count("app05_tool_") >= TOOLS
    assert admin.get("/app/apps/no-such-app").status_code == 404


def test_a_workspace_registers_at_most_max_apps(
    http: httpx.Client, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claros.mapping.tools import MAX_APPS

    assert MAX_APPS >= 100  # a workspace of many apps still fits
    monkeypatch.setattr("claros.mapping.tools.MAX_APPS", 3)
    for n in range(3):
        answer = http.post(
            f"/v1/apps/small{n}/tools", json={"tools": [{"name": "t", "read": False}]},
            headers=bearer(keys.agent),
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
    answer = http.post(
        "/v1/apps/small3/tools", json={"tools": [{"name": "t", "read": False}]},
        headers=bearer(keys.agent),
    )  # fmt: skip
    assert answer.status_code == 409, answer.text
    assert "3 apps" in answer.json()["message"]
    # An app already registered registers again (its guard restarts) whatever the count.
    again = http.post(
        "/v1/apps/small0/tools", json={"tools": [{"name": "t", "read": False}]},
        headers=bearer(keys.agent),
    )  # fmt: skip
    assert again.status_code == 200, again.text
