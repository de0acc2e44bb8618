"""THREATS.md §3: what a compromised function may do to the checkpoint anchors.

Checkpoints are anchored under S3 Object Lock (compliance mode, by default). Object Lock
keeps every version for its retention, but a role that could delete versions, shorten a
retention, lift a legal hold or rewrite the bucket's lock, versioning or lifecycle would
still be a way around it. The template's real policies, evaluated by tests/iam.py: only
the signer role may put anchors (under ``checkpoints/``), and no role of the stack may do
anything else to the anchor bucket or its objects.
"""

# ruff: noqa: F811 - the tests take the role tests' fixtures, imported below, by name

from __future__ import annotations

import pytest

from tests.iam import Request, allowed, role_of
from tests.security.aws.test_aws_roles_cannot_rewrite import (
    SIGNER,
    World,
    _functions,
)
from tests.stack import (
    STACK_WARNINGS,
)

pytestmark = STACK_WARNINGS

OBJECT_ACTIONS = (
    "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutObjectRetention",
    "s3:PutObjectLegalHold", "s3:BypassGovernanceRetention", "s3:PutObjectAcl",
    "s3:PutObjectVersionAcl", "s3:RestoreObject", "s3:ReplicateDelete",
)  # fmt: skip
BUCKET_ACTIONS = (
    "s3:PutBucketObjectLockConfiguration", "s3:PutBucketVersioning",
    "s3:PutLifecycleConfiguration", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy",
    "s3:DeleteBucket", "s3:PutReplicationConfiguration", "s3:PutBucketOwnershipControls",
    "s3:PutBucketAcl", "s3:PutEncryptionConfiguration",
)  # fmt: skip


def test_only_the_signer_puts_anchors_and_nobody_loosens_them(world: World) -> None:
    bucket = f"arn:aws:s3:::{world.table('AnchorBucket')}"
    anchor = f"{bucket}/checkpoints/acme/{1:020d}.json"
    for function in _functions(world):
        statements = world.statements(function)
        for action in OBJECT_ACTIONS:
            assert not allowed(statements, Request(action, anchor)), (function, action)
        for action in BUCKET_ACTIONS:
            assert not allowed(statements, Request(action, bucket)), (function, action)
        may_put = allowed(statements, Request("s3:PutObject", anchor))
        assert may_put == (role_of(world.stack.cfn, function) == role_of(world.stack.cfn, SIGNER))
        # Not even the signer writes outside checkpoints/ (nothing reads there to trust).
        assert not allowed(statements, Request("s3:PutObject", f"{bucket}/other")), function


@pytest.mark.parametrize("name", ["AnchorBucket"])
def test_the_anchor_bucket_locks_every_version_in_compliance_mode(world: World, name: str) -> None:
    props = world.stack.sam["Resources"][name]["Properties"]
    assert props["ObjectLockEnabled"] is True
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    rule = props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]
    assert rule["Mode"] == "COMPLIANCE"
    # No bucket policy in the stack could hand any of it out.
    kinds = {r["Type"] for r in world.stack.cfn["Resources"].values()}
    assert "AWS::S3::BucketPolicy" not in kinds
