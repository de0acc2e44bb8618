"""Bad input: Activity's `until` given as the last date there is (`9999-12-31`).

A date alone as `until` means the end of that day (docs/api.md, Activity), i.e. the next
day's midnight, which for 9999-12-31 is past what a date can hold. What must hold
(THREATS.md §5; docs/api.md "Errors and limits"): a 400 naming the parameter, in the
API's error shape, never a 500 (or the page's 503) with a traceback in the log."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.api.conftest import Keys, bearer

SQLITE = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@SQLITE
@pytest.mark.parametrize("path", ["/api/checks", "/app/activity"])
def test_until_the_last_date_there_is_is_a_400_naming_it(
    http: httpx.Client, keys: Keys, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    headers = bearer(keys.admin) | {"accept": "application/json"}
    with caplog.at_level(logging.ERROR):
        response = http.get(path, params={"until": "9999-12-31"}, headers=headers)
    assert response.status_code == 400, response.text
    if path.startswith("/api/"):
        assert response.json()["error"] == "bad_request"
        assert "until" in response.json()["message"]
    else:  # the page says it on the page
        assert "until must be a date" in response.text
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
