"""Anchoring: a copy of every signed checkpoint where Claros cannot change it.

In AWS that is an S3 bucket with Object Lock in compliance mode (template parameter
``AnchorRetentionDays``): the bucket's default retention locks each object as it lands, so
not even the account's root user can rewrite or delete it before the retention ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from claros import jsonutil
from claros.ledger import Checkpoint

__all__ = ["Anchor", "S3Anchor", "anchor_key"]

Anchor = Callable[[Checkpoint], None]


def anchor_key(cp: Checkpoint) -> str:
    return f"checkpoints/{cp.workspace}/{cp.seq:020d}.json"


class S3Anchor:
    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket

    def __call__(self, cp: Checkpoint) -> None:
        # Object Lock buckets refuse a PutObject without an integrity checksum.
        self.s3.put_object(
            Bucket=self.bucket,
            Key=anchor_key(cp),
            Body=jsonutil.dumps(cp.to_json()).encode(),
            ContentType="application/json",
            ChecksumAlgorithm="SHA256",
        )
