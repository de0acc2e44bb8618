"""THREATS.md §3: a signing function moves the workspace's key alias to a key anyone can use.

The signer role runs the checkpoint function and the export function, both internet-facing
(``POST /v1/ledger/checkpoints``, ``GET /api/evidence/export``, ``/report``). docs/deploy.md
accepts that a compromise of either "can sign" while it lasts. But the role also held
``kms:UpdateAlias`` on the stack's aliases and every key of the account, which neither
function ever uses (rotation is the operator's ``rotate-key``, run with an operator role).
With it, a compromised export function makes an Ed25519 key whose policy (CreateKey takes
any policy: no IAM condition sees it) lets an outside account sign, and points
``alias/claros/<stack>/ledger-<workspace>`` at it: every checkpoint from then on is signed
with a key the outsider may use too, for good, after the function is patched, and the
outsider can sign checkpoints of their own. "KMS Sign is allowed to the checkpoint role
only" no longer holds.

Closed: the signer role keeps ``kms:CreateAlias`` (a workspace's first key, made by the first
signature) and loses ``kms:UpdateAlias``: an alias, once made, names the key it was made
with until an operator rotates it.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import json

from tests.iam import ACCOUNT, REGION, Request, allowed, kms_allowed
from tests.security.aws.test_aws_roles_cannot_rewrite import World, _seed
from tests.stack import STACK_WARNINGS, WS, Json

pytestmark = STACK_WARNINGS

OUTSIDER = "arn:aws:iam::999999999999:root"
SIGNING_FUNCTIONS = ("ExportFunction", "CheckpointFunction")


def _policy(key_id: str, world: World) -> Json:
    text = world.kms.get_key_policy(KeyId=key_id, PolicyName="default")["Policy"]
    return dict(json.loads(text))


def _outsiders_key(world: World, role_arn: str) -> tuple[str, str, Json]:
    """A key made as the signer role may make one (the tags and spec its CreateKey needs),
    with a policy of the attacker's choosing: the outsider may sign with it."""
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
             "Action": "kms:*", "Resource": "*"},
            {"Effect": "Allow", "Principal": {"AWS": [role_arn, OUTSIDER]},
             "Action": ["kms:Sign", "kms:GetPublicKey", "kms:DescribeKey"], "Resource": "*"},
        ],
    }  # fmt: skip
    made = world.kms.create_key(
        KeySpec="ECC_NIST_EDWARDS25519",
        KeyUsage="SIGN_VERIFY",
        Policy=json.dumps(policy),
        Tags=[{"TagKey": "claros:workspace", "TagValue": WS},
              {"TagKey": "claros:purpose", "TagValue": "ledger-checkpoint"}],
    )  # fmt: skip
    meta = made["KeyMetadata"]
    return str(meta["KeyId"]), str(meta["Arn"]), policy


def test_a_signing_function_cannot_move_the_workspace_key_alias(world: World) -> None:
    _seed(world)  # the workspace's key, made by the checkpoint function, and its alias
    alias = world.stack.env("checkpoint")["CLAROS_KMS_ALIAS_PREFIX"] + WS
    alias_arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:{alias}"
    old = world.kms.describe_key(KeyId=alias)["KeyMetadata"]
    moved: dict[str, str] = {}
    for function in SIGNING_FUNCTIONS:
        statements, role_arn = world.statements(function), world.role_arn(function)
        create = Request("kms:CreateKey", "*", {
            "kms:KeySpec": ["ECC_NIST_EDWARDS25519"], "kms:KeyUsage": ["SIGN_VERIFY"],
            "aws:RequestTag/claros:purpose": ["ledger-checkpoint"],
            "aws:RequestTag/claros:workspace": [WS],
            "aws:TagKeys": ["claros:workspace", "claros:purpose"],
        })  # fmt: skip
        # A workspace's first signature makes its key: the role may still make keys.
        assert allowed(statements, create), function
        key_id, key_arn, policy = _outsiders_key(world, role_arn)
        # UpdateAlias is authorized on the alias, the key it names and the key it will name.
        may_move = (
            allowed(statements, Request("kms:UpdateAlias", alias_arn))
            and kms_allowed(_policy(old["KeyId"], world), statements,
                            Request("kms:UpdateAlias", old["Arn"], {}, role_arn))
            and kms_allowed(policy, statements, Request("kms:UpdateAlias", key_arn, {}, role_arn))
        )  # fmt: skip
        if may_move:
            world.kms.update_alias(AliasName=alias, TargetKeyId=key_id)
            now = world.kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"]
            signs = kms_allowed(policy, [], Request("kms:Sign", key_arn, {}, OUTSIDER))
            moved[function] = f"alias now names {now}; the outside account may sign: {signs}"
            world.kms.update_alias(AliasName=alias, TargetKeyId=old["KeyId"])
    assert not moved, f"a signing function moved {alias} to a key of its own: {moved}"
    assert world.kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"] == old["KeyId"]
