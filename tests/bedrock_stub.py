"""Bedrock's Converse in tests, answered by botocore's Stubber: a client that needs no
credentials, and the answer a model gives when it calls a tool (the judge's ``verdict``, the
mapper's ``mapping``)."""

from __future__ import annotations

from typing import Any

import boto3

JUDGE_MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
MAPPER_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def bedrock_client() -> Any:
    """A bedrock-runtime client for a Stubber: test credentials, no request leaves."""
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def tool_use(name: str, answer: Any, tool_use_id: str = "t1") -> dict[str, Any]:
    """One content block: the model calling tool ``name`` with ``answer``."""
    return {"toolUse": {"toolUseId": tool_use_id, "name": name, "input": answer}}


def converse_answer(*content: dict[str, Any]) -> dict[str, Any]:
    """A Converse answer whose message holds ``content`` (tool uses), stopped to use them."""
    return {
        "output": {"message": {"role": "assistant", "content": list(content)}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
