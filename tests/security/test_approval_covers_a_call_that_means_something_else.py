"""THREATS.md §1: an approval covers exactly the call the person approved.

The attack: the agent gets a harmless-looking call approved, then uses that approval for
a call that a server reads differently but that hashed the same. The approval was bound
to sha256 of the call as the ledger's canonical JSON writes it, and that form is lossy on
purpose: it leaves out null, "", [] and {} at every depth, and writes every number as its
double. So ``{"user": "bob", "display_name": "Bob"}`` approved also covered
``{..., "mfa_devices": []}`` (wipe Bob's second factor), and deleting channel
1234567890123456789 approved also covered channel 1234567890123456800 (ids past 2**53
round to one double).

The guard only sends ``approval`` for the very call it asked about, but it keeps that
pairing in memory, and the Claude Code hooks keep it in a file of the peer directory that
the agent's own shell may write (``hook-asks.json``): the check API's binding is the one
that counts. The checks here go to the real local server with the agent's key.
"""

# ruff: noqa: F811

from __future__ import annotations

import json

import httpx
import pytest

from tests.api.conftest import Keys, bearer, check_body, put_rule


def _check(http: httpx.Client, key: str, raw_arguments: str, approval: str | None = None):  # noqa: ANN202
    """A check whose arguments are sent as written (numbers included, not as Python
    floats)."""
    body = check_body(tool="member_update", arguments={})
    if approval:
        body["approval"] = approval
    text = json.dumps(body).replace('"arguments": {}', f'"arguments": {raw_arguments}')
    return http.post(
        "/v1/check",
        content=text,
        headers={**bearer(key), "Content-Type": "application/json"},
    )


CASES = {
    "an empty list the ledger leaves out": (
        '{"user": "bob", "display_name": "Bob"}',
        '{"user": "bob", "display_name": "Bob", "mfa_devices": []}',
    ),
    "an empty string": (
        '{"user": "bob", "display_name": "Bob"}',
        '{"user": "bob", "display_name": "Bob", "email": ""}',
    ),
    "a null": ('{"user": "bob"}', '{"user": "bob", "expires_at": null}'),
    "an empty object deep down": (
        '{"user": "bob", "filter": {"team": "ops"}}',
        '{"user": "bob", "filter": {"team": "ops", "roles": {}}}',
    ),
    "an id past 2**53": ('{"user": 1234567890123456789}', '{"user": 1234567890123456800}'),
    "a fraction past a double": (
        '{"user": "bob", "quota": 0.1}',
        '{"user": "bob", "quota": 0.10000000000000000001}',
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_approval_does_not_cover_a_call_that_only_hashes_alike(
    http: httpx.Client, keys: Keys, case: str
) -> None:
    approved, other = CASES[case]
    put_rule(http, keys.admin, id="members", tools=["member_update"], when="1 == 1",
             title="Member changes need approval")  # fmt: skip
    asked = _check(http, keys.agent, approved)
    assert asked.status_code == 200 and asked.json()["result"] == "ask", asked.text
    ask_id = asked.json()["ask"]["ask_id"]
    answered = http.post(
        f"/api/asks/{ask_id}/answer", json={"decision": "approve"}, headers=bearer(keys.person)
    )
    assert answered.status_code == 200, answered.text

    used = _check(http, keys.agent, other, approval=ask_id)
    assert used.status_code == 409, f"{case}: {used.json().get('result')} for {other}"
    assert "different call" in used.json()["message"]

    # The call the person approved still runs under it, once.
    exact = _check(http, keys.agent, approved, approval=ask_id)
    assert exact.status_code == 200 and exact.json()["result"] == "allow", exact.text
