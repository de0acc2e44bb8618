"""The stack traces every function (template.yaml: ``Tracing: Active``), yet the stack's
tests run the handlers with the Tracer off (tests/stack.py: no X-Ray daemon there). Here a
check is served as Lambda serves it: the check function's handler in a fresh interpreter
with Lambda's environment and a sampled trace header, its DynamoDB calls going to a moto
server, its segments to a UDP socket standing for the X-Ray daemon. The answer is the
same as untraced; the trace holds the handler and each DynamoDB call (botocore is what
the functions patch: claros.api.entry.TRACED) and nothing of the call it checked, whose
arguments (tool-call data) must not leave the ledger through traces."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.aws import REPO, tables_from_template
from tests.events import load_event

# In the checked call's arguments, the agent's name and session: none may be in a trace.
SECRETS = ("order-7f3c-secret", "agent-name-4b1d", "session-9e2a")
TRACE_HEADER = "Root=1-6929a4a0-2360c1885f53fe2200000001;Parent=53995c3f42cd8ad8;Sampled=1"
_SERVE = """
import json, sys
import app
class Context:
    function_name = "claros-check"; memory_limit_in_mb = 512; aws_request_id = "r1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:claros-check"
    def get_remaining_time_in_millis(self): return 30000
answer = app.lambda_handler(json.loads(sys.stdin.read()), Context())
print(json.dumps(answer))
"""


@pytest.fixture
def daemon() -> Iterator[socket.socket]:
    """A UDP socket where the X-Ray daemon listens in Lambda."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    try:
        yield sock
    finally:
        sock.close()


def _documents(sock: socket.socket) -> list[dict[str, Any]]:
    """Every segment document sent so far: each datagram is a JSON header line, then one
    document. The handler's process has exited, so all of them are in the buffer."""
    docs = [_document(sock.recv(65536))]  # the first within the timeout: tracing ran
    sock.setblocking(False)
    while True:
        try:
            docs.append(_document(sock.recv(65536)))
        except BlockingIOError:
            return docs


def _document(datagram: bytes) -> dict[str, Any]:
    header, _, body = datagram.decode().partition("\n")
    assert json.loads(header) == {"format": "json", "version": 1}
    doc: dict[str, Any] = json.loads(body)
    return doc


def _names(doc: dict[str, Any]) -> Iterator[str]:
    yield doc["name"]
    for sub in doc.get("subsegments", ()):
        yield from _names(sub)


def _seed(endpoint: str, tables: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """An agent's key in the stack's tables."""
    from claros.auth import create_key
    from claros.config import Settings
    from claros.wiring import build_services

    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    services = build_services(Settings(store="dynamodb", **tables))
    try:
        return create_key(services.store, "acme", "service", label="traced agent")
    finally:
        services.close()


def test_a_traced_check_sends_its_segments_and_nothing_of_the_call(
    moto_server: str, daemon: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    from tests.aws import STORE_TABLES

    made = tables_from_template(boto3.client("dynamodb", endpoint_url=moto_server))
    tables = {field: made[logical] for field, logical in STORE_TABLES.items()}
    key = _seed(moto_server, tables, monkeypatch)
    event = load_event("check-check", key)
    body = json.loads(event["body"])
    body["arguments"] = {"order": SECRETS[0], "amount": 120, "currency": "EUR"}
    body["agent"].update(name=SECRETS[1], session=SECRETS[2])
    event["body"] = json.dumps(body)

    function = REPO / "functions" / "check"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAROS_", "POWERTOOLS_"))}
    env.update(
        # Lambda's environment: the X-Ray SDK's Lambda sampler, the Tracer on.
        LAMBDA_TASK_ROOT=str(function), AWS_LAMBDA_FUNCTION_NAME="claros-check",
        _X_AMZN_TRACE_ID=TRACE_HEADER,
        AWS_XRAY_DAEMON_ADDRESS=f"127.0.0.1:{daemon.getsockname()[1]}",
        AWS_ENDPOINT_URL=moto_server, CLAROS_STORE="dynamodb",
        CLAROS_LEDGER_TABLE=tables["ledger_table"], CLAROS_RECORDS_TABLE=tables["records_table"],
        CLAROS_STATE_TABLE=tables["state_table"],
        POWERTOOLS_SERVICE_NAME="claros", POWERTOOLS_METRICS_NAMESPACE="Claros",
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _SERVE], cwd=function, env=env, input=json.dumps(event),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["statusCode"] == 200, answer
    assert json.loads(answer["body"])["result"] == "allow", answer["body"]
    # The X-Ray SDK says so on stderr when a subsegment finds no segment to belong to.
    assert "cannot find the current segment" not in done.stderr.lower(), done.stderr[-3000:]

    docs = _documents(daemon)
    names = {name for doc in docs for name in _names(doc)}
    assert "## lambda_handler" in names and "dynamodb" in names, names
    assert {doc["trace_id"] for doc in docs} == {"1-6929a4a0-2360c1885f53fe2200000001"}
    sent = json.dumps(docs)
    assert not [s for s in SECRETS if s in sent], sent[:3000]


def test_the_daemon_socket_reads_what_a_sender_sent(daemon: socket.socket) -> None:
    """The reader above, on a datagram it did not make: one header, one document."""
    doc = {"name": "probe", "trace_id": "1-0-0", "subsegments": [{"name": "inner"}]}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        header = json.dumps({"format": "json", "version": 1})
        sender.sendto(f"{header}\n{json.dumps(doc)}".encode(), daemon.getsockname())
    got = _documents(daemon)
    assert got == [doc] and list(_names(got[0])) == ["probe", "inner"]


def test_nothing_sent_is_a_timeout_not_an_empty_list(daemon: socket.socket) -> None:
    """A handler that traced nothing fails the test above instead of passing it vacuously."""
    daemon.settimeout(0.2)
    with pytest.raises(TimeoutError):
        _documents(daemon)
