"""THREATS.md §3: a compromised web function points a workspace's ask webhook elsewhere.

No page of the web function sets the ask webhook (the admin API does), but its role wrote
every doc collection (``WriteDocsOnly``: ``*#doc#*``), the hook's own
(``{workspace}#doc#ask_webhook``) included. So the web role rewrote the hook: every ask
opened from then on (the call, its arguments, who it is routed to) was posted to a URL of
its choosing, signed with a secret of its choosing, and the people's own receiver heard
nothing (as test_prune_role_redirects_the_ask_webhook.py, with the web function's role).

Closed: the web role writes an allow list of doc collections, each one a page of its
writes (template.yaml, ``WriteItsOwnDocsOnly``); neither the hook nor ``settings`` is one.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World, world
from tests.security.aws.test_request_role_loosens_a_rule_or_approves_an_ask import (
    _ask_rule,
    _check,
)
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS
_ = world  # the fixture, used by name

HOOK = {"url": "https://attacker.example/asks", "secret": "chosen-by-the-attacker"}


def test_the_web_role_cannot_redirect_the_ask_webhook(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    import claros.webhook

    queued: list[tuple[str, str]] = []

    def put(delivery: Any) -> bool:
        queued.append((delivery.url, delivery.secret))
        return True

    monkeypatch.setattr(claros.webhook._QUEUE, "put", put)
    status, body = world.functions.http(
        "admin", load_event("admin-put-ask-webhook", world.keys.admin)
    )
    assert status in (200, 201), body
    role = world.as_role("WebFunction")
    refused = []
    for collection in ("ask_webhook", "settings"):  # where the hook is read, new and old
        try:
            role.put_item(
                TableName=world.table("StateTable"),
                Item={"pk": {"S": f"{WS}#doc#{collection}"}, "sk": {"S": "ask_webhook"},
                      "rev": {"N": "2"}, "body": {"S": json.dumps(HOOK)}},
            )  # fmt: skip
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
            refused.append(collection)
    _ask_rule(world)
    asked = _check(world)
    assert asked["allowed"] is False and asked.get("ask"), asked
    # Safe behaviour: the new ask is delivered to the hook the admin set, signed with its
    # secret, and the admin API still shows that hook.
    assert queued and all("attacker.example" not in url for url, _ in queued), (
        "the ask was posted where the web role said",
        queued,
    )
    assert HOOK["secret"] not in [secret for _, secret in queued]
    status, body = world.functions.http(
        "admin", load_event("admin-get-ask-webhook", world.keys.admin)
    )
    assert status == 200 and "attacker.example" not in json.dumps(body), body
    assert refused == ["ask_webhook", "settings"]
