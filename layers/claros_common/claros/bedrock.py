"""One structured answer from Amazon Bedrock: a Converse call that must answer by one tool.

The judge (and the mapper) ask a model for a JSON object of a known shape. Converse's tool
use gives exactly that: the request declares one tool whose input schema is the shape, and
``toolChoice`` forces the model to call it, so the answer is the tool call's ``input``
rather than free text to be parsed. Anything else (no tool call, another tool, more than
one call, an input that is not an object, a timeout, a refusal by the service) is a
:class:`BedrockError` and the caller falls back to what it does without a model.

boto3 is imported by the caller that builds the client (server side only); this module
takes the client, so tests hand it a client wrapped in botocore's Stubber.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BedrockError", "StructuredAsk", "ask_for_object", "bedrock_client"]

# A judge's answer is needed before the agent's write runs: bounded, and never retried
# (a retry would double the wait the guard is already counting).
TIMEOUT_S = 5.0


class BedrockError(Exception):
    """The model gave no usable answer; the message says why (it is logged, never shown
    to the agent)."""


@dataclass(frozen=True)
class StructuredAsk:
    model_id: str
    system: str  # the instructions
    prompt: str  # what this one question is about
    tool_name: str
    tool_description: str
    schema: Mapping[str, Any]  # JSON Schema of the answer
    max_tokens: int = 512


def bedrock_client(timeout_s: float = TIMEOUT_S, region: str | None = None) -> Any:
    """A bedrock-runtime client with the judge's bounds: connect and read within
    ``timeout_s``, one attempt."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return boto3.client("bedrock-runtime", region_name=region, config=config)


def ask_for_object(client: Any, ask: StructuredAsk) -> dict[str, Any]:
    """The object the model passed to ``ask.tool_name``, or BedrockError."""
    from botocore.exceptions import BotoCoreError, ClientError

    request = {
        "modelId": ask.model_id,
        "system": [{"text": ask.system}],
        "messages": [{"role": "user", "content": [{"text": ask.prompt}]}],
        "inferenceConfig": {"maxTokens": ask.max_tokens, "temperature": 0},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": ask.tool_name,
                        "description": ask.tool_description,
                        "inputSchema": {"json": dict(ask.schema)},
                    }
                }
            ],
            "toolChoice": {"tool": {"name": ask.tool_name}},
        },
    }
    try:
        response = client.converse(**request)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise BedrockError(f"Bedrock refused: {error.get('Code')}: {error.get('Message')}") from exc
    except BotoCoreError as exc:  # timeouts, connection errors
        raise BedrockError(f"Bedrock did not answer: {exc}") from exc
    content = (((response.get("output") or {}).get("message") or {}).get("content")) or []
    uses = [b["toolUse"] for b in content if isinstance(b, Mapping) and b.get("toolUse")]
    if len(uses) > 1:
        # Two answers in one turn (say a verdict that clears the call, then one that stops
        # it): which one is meant is not for Claros to pick, and the first was the agent's
        # (tests/security/test_two_verdicts_in_one_answer.py).
        raise BedrockError(f"the model called a tool {len(uses)} times, not once")
    for use in uses:
        if not isinstance(use, Mapping) or use.get("name") != ask.tool_name:
            name = use.get("name") if isinstance(use, Mapping) else None
            raise BedrockError(f"the model called {name!r}, not {ask.tool_name!r}")
        answer = use.get("input")
        if not isinstance(answer, dict):
            raise BedrockError(f"the model's {ask.tool_name} input is not an object")
        return answer
    raise BedrockError(
        f"the model answered without calling {ask.tool_name} "
        f"(stopReason {response.get('stopReason')!r})"
    )
