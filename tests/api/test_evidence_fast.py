"""The verify route answers from the verified-through state; full=true and "Verify
everything now" verify the whole chain (issue 13, item 7)."""

from __future__ import annotations

import httpx

from tests.api.conftest import Keys, bearer, check_body


def _checks(http: httpx.Client, keys: Keys, n: int) -> None:
    for i in range(n):
        body = check_body(agent={"name": "claude-code", "call_id": f"c{i}"})
        assert http.post("/v1/check", json=body, headers=bearer(keys.agent)).status_code == 200


def test_verify_answers_from_the_state_and_in_full_on_request(
    http: httpx.Client, keys: Keys
) -> None:
    _checks(http, keys, 7)  # checkpoints every 5 (tests/api/conftest.py): one signed
    fast = http.get("/api/evidence/verify", headers=bearer(keys.admin)).json()
    assert fast["ok"] is True and fast["last_seq"] == fast["entries"]
    assert fast["verified"]["seq"] == fast["last_seq"]
    full = http.get("/api/evidence/verify?full=true", headers=bearer(keys.admin)).json()
    assert {k: full[k] for k in ("ok", "entries", "last_seq", "last_hash")} == {
        k: fast[k] for k in ("ok", "entries", "last_seq", "last_hash")
    }
    assert full["verified"]["segments"] == 1 and full["verified"]["full_at"] is not None
    _checks(http, keys, 2)
    after = http.get("/api/evidence/verify", headers=bearer(keys.admin)).json()
    assert after["last_seq"] == fast["last_seq"] + 2 and after["verified"]["segments"] == 2


def test_verify_refuses_a_full_that_is_not_true_or_false(http: httpx.Client, keys: Keys) -> None:
    got = http.get("/api/evidence/verify?full=yes", headers=bearer(keys.admin))
    assert got.status_code == 400 and "full must be true or false" in got.text


def test_verify_everything_now_as_json_and_only_for_admins(http: httpx.Client, keys: Keys) -> None:
    _checks(http, keys, 3)
    done = http.post("/app/evidence/verify", headers=bearer(keys.admin))
    assert done.status_code == 200, done.text
    assert done.json()["failures"] == [] and done.json()["entries"] >= 3
    for kind in ("agent", "audit", "person"):
        refused = http.post("/app/evidence/verify", headers=bearer(keys.of(kind)))
        assert refused.status_code in (401, 403), (kind, refused.status_code)


def test_home_window_is_chosen_in_the_url(http: httpx.Client, keys: Keys) -> None:
    _checks(http, keys, 2)
    html = {"accept": "text/html", **bearer(keys.admin)}
    week = http.get("/app?days=7", headers=html)
    assert week.status_code == 200 and 'aria-current="true" class="on">7 days' in week.text
    for bad in ("12", "-7", "seven", "9" * 30):
        got = http.get(f"/app?days={bad}", headers=html)
        assert got.status_code == 400, bad
        assert "The window must be 7, 30, 90 days" in got.text
