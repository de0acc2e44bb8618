"""Bad input on two reads and writes of a person: a timeline position that is no position
is a 400 on the API as on Home, and a member's address in a path is decoded once (the
router decodes path parameters), so ``dana%2540acme.test`` names nobody, not Dana."""

from __future__ import annotations

import httpx

from tests.api.conftest import PERSON, Keys, bearer


def test_a_timeline_position_too_long_to_be_one_is_a_400_on_the_api_and_on_home(
    http: httpx.Client, keys: Keys
) -> None:
    before = "9" * 101
    api = http.get("/api/me/timeline", params={"before": before}, headers=bearer(keys.person))
    assert api.status_code == 400, api.text
    assert api.json() == {
        "error": "bad_request",
        "message": "before is not a timeline position (a page's next)",
    }
    home = http.get("/app", params={"before": before}, headers=bearer(keys.person))
    assert home.status_code == 400 and "not a timeline position" in home.text
    # A real position pages on.
    fine = http.get("/api/me/timeline", params={"before": "9" * 100}, headers=bearer(keys.person))
    assert fine.status_code == 200, fine.text


def test_an_address_in_a_path_is_decoded_once(http: httpx.Client, keys: Keys) -> None:
    twice = PERSON.replace("@", "%2540")
    gone = http.delete(f"/api/members/{twice}", headers=bearer(keys.admin))
    assert gone.status_code in (400, 404), gone.text
    role = http.put(f"/api/members/{twice}", json={"role": "admin"}, headers=bearer(keys.admin))
    assert role.status_code in (400, 404), role.text
    members = http.get("/api/members", headers=bearer(keys.admin)).json()["members"]
    assert {m["email"]: m["role"] for m in members}[PERSON] == "member"
    # Encoded once, the address names Dana.
    once = PERSON.replace("@", "%40")
    assert http.delete(f"/api/members/{once}", headers=bearer(keys.admin)).status_code == 200
