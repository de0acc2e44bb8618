"""Proven in moto: template.yaml, turned into plain CloudFormation by SAM's own translator,
deploys into moto's CloudFormation; each function's real handler (functions/<name>/app.py)
then serves the sample events in events/ against the tables, stream and schedule the stack
made, with the environment the template gives that function.

moto runs no Lambda code (it would need Docker), so the tests call the handlers themselves;
the ledger table's event source mapping still fires inside moto, and the batches it hands
to "Lambda" are caught (``stream_batches``) and given to the checkpoint handler.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import io
import json
import re
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import VerifyKey

from claros.api.app import FUNCTIONS, build_resolver
from claros.api.http import PERMISSIONS, PUBLIC
from claros.auth import create_key
from claros.config import Settings
from claros.evidence.report import verify_signed_report
from claros.ledger import PublicKey, checkpoint_message
from claros.store.base import Store
from claros.wiring import build_services
from claros_guard.verify import main as verify
from tests.api.seed import Clock, install_clock, utc_ms
from tests.aws import REPO, STORE_TABLES, load_template
from tests.events import KEY_PLACEHOLDER, event_names, load_event, route_of

pytestmark = [
    # moto's CloudFormation makes no API Gateway v2 resources (API, stage) and warns so; the
    # routes themselves are checked against the code below, without moto.
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    # lambda_entry.py's Metrics publish nothing on an API request, and Powertools warns
    # about it on every request. Drop this filter once the handler publishes a metric there.
]

STACK_NAME = "claros-test"
ARTIFACTS = "claros-test-artifacts"
# Small values so a test sees a checkpoint at every 2nd entry and a stale tail after 1 s.
PARAMETERS = {"CheckpointEvery": "2", "CheckpointMaxAge": "1", "AnchorRetentionDays": "1"}
WS = "acme"
ADMIN = "admin@acme.test"
PERSON = "dana@acme.test"
CODE_PROPERTY = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
}

Json = dict[str, Any]


# --- the template, translated and deployed --------------------------------------------
class _NoManagedPolicies:
    """samtranslator's managed-policy loader; asked only for policies named by name, and the
    template names none (its policies are written out)."""

    def load(self) -> dict[str, str]:
        return {}


def translate(sam: Json) -> tuple[Json, dict[str, Path]]:
    """Plain CloudFormation for ``sam`` and the local folders its code comes from, by S3
    key: local CodeUri/ContentUri become s3:// URIs first, as ``sam package`` does."""
    from samtranslator.translator.transform import transform  # type: ignore[import-untyped]

    sam = copy.deepcopy(sam)
    uploads: dict[str, Path] = {}
    for logical_id, resource in sam["Resources"].items():
        prop = CODE_PROPERTY.get(resource["Type"])
        if prop is None:
            continue
        local = resource["Properties"][prop]
        assert isinstance(local, str) and not local.startswith("s3://"), (logical_id, local)
        assert (REPO / local).is_dir(), f"{logical_id}: {prop} {local} is not a folder"
        uploads[f"{logical_id}.zip"] = REPO / local
        resource["Properties"][prop] = f"s3://{ARTIFACTS}/{logical_id}.zip"
    return transform(sam, {}, _NoManagedPolicies()), uploads


def _zip(folder: Path) -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file():
                archive.write(path, path.name)
    return data.getvalue()


@dataclass
class Stack:
    sam: Json  # template.yaml as written
    cfn: Json  # as translated and deployed
    parameters: dict[str, str]  # every parameter's value in the stack
    physical: dict[str, str]  # logical id -> physical id

    def function_id(self, name: str) -> str:
        """The logical id of the function whose code is functions/<name>/."""
        for logical_id, resource in self.sam["Resources"].items():
            code = resource.get("Properties", {}).get("CodeUri", "")
            if resource["Type"] == "AWS::Serverless::Function" and _code_name(code) == name:
                return str(logical_id)
        raise KeyError(f"template.yaml has no function with CodeUri functions/{name}/")

    def env(self, name: str) -> dict[str, str]:
        """The function's environment as Lambda would give it: Refs resolved to the
        stack's parameter values and physical ids, every value a string."""
        function = self.cfn["Resources"][self.function_id(name)]
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        return {key: self._resolve(key, value) for key, value in variables.items()}

    def condition(self, name: str) -> bool:
        return self._truth(self.cfn.get("Conditions", {})[name])

    def _truth(self, expr: Any) -> bool:
        if isinstance(expr, dict) and list(expr) == ["Fn::Not"]:
            return not self._truth(expr["Fn::Not"][0])
        if isinstance(expr, dict) and list(expr) == ["Fn::Equals"]:
            left, right = (self._resolve("condition", v) for v in expr["Fn::Equals"])
            return left == right
        if isinstance(expr, dict) and list(expr) == ["Condition"]:
            return self.condition(expr["Condition"])
        raise AssertionError(f"the test cannot evaluate the condition {expr!r}")

    def _resolve(self, key: str, value: Any) -> str:
        if isinstance(value, dict) and list(value) == ["Fn::If"]:
            name, if_true, if_false = value["Fn::If"]
            return self._resolve(key, if_true if self.condition(name) else if_false)
        if isinstance(value, dict) and list(value) == ["Ref"]:
            ref = value["Ref"]
            if ref in self.parameters:
                return self.parameters[ref]
            if ref in self.physical:
                return self.physical[ref]
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, str | int | float):
            return str(value)
        raise AssertionError(f"{key}: the test cannot resolve {value!r}; teach Stack._resolve")

    def store(self, client: Any) -> Store:
        from claros.store.dynamo import DynamoStore

        tables = {arg: self.physical[table] for arg, table in STORE_TABLES.items()}
        return DynamoStore(
            client, tables["ledger_table"], tables["records_table"], tables["state_table"]
        )


def _code_name(code_uri: Any) -> str:
    return str(code_uri).strip("/").split("/")[-1]


def deploy(sam: Json) -> Stack:
    import boto3

    cfn, uploads = translate(sam)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=ARTIFACTS)
    for key, folder in uploads.items():
        s3.put_object(Bucket=ARTIFACTS, Key=key, Body=_zip(folder))
    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(
        StackName=STACK_NAME,
        TemplateBody=json.dumps(cfn),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in PARAMETERS.items()],
        Capabilities=["CAPABILITY_IAM"],
    )
    [described] = cloudformation.describe_stacks(StackName=STACK_NAME)["Stacks"]
    if described["StackStatus"] != "CREATE_COMPLETE":
        events = cloudformation.describe_stack_events(StackName=STACK_NAME)["StackEvents"]
        reasons = [e.get("ResourceStatusReason") for e in events if e.get("ResourceStatusReason")]
        pytest.fail(f"stack is {described['StackStatus']}: {reasons}")
    resources = cloudformation.describe_stack_resources(StackName=STACK_NAME)["StackResources"]
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in resources
        if r.get("LogicalResourceId") and r.get("PhysicalResourceId")
    }
    parameters = {
        name: str(spec.get("Default", "")) for name, spec in sam["Parameters"].items()
    } | {p["ParameterKey"]: p["ParameterValue"] for p in described.get("Parameters", [])}
    return Stack(sam, cfn, parameters, physical)


@pytest.fixture
def stream_batches(moto_aws: None, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Json]]:
    """(function name, event) of every invocation moto's Lambda makes: the stack's event
    source mapping on the ledger stream invokes the checkpoint function inside moto."""
    from moto.awslambda.models import LambdaFunction

    delivered: list[tuple[str, Json]] = []

    def invoke(self: Any, body: str, request_headers: Any, response_headers: Any) -> bytes:
        delivered.append((str(self.function_name), json.loads(body)))
        return b'{"delivered": true}'  # a result: moto drops the records it handed over

    monkeypatch.setattr(LambdaFunction, "invoke", invoke)
    return delivered


@pytest.fixture
def stack(dynamodb_client: Any, kms_ed25519: Any, stream_batches: list[tuple[str, Json]]) -> Stack:
    """template.yaml deployed into moto (DynamoDB and KMS patched as in tests/aws.py)."""
    return deploy(load_template())


# --- the functions, run as Lambda runs them -------------------------------------------
@dataclass(frozen=True)
class LambdaContext:
    """What Powertools reads from the Lambda context object."""

    function_name: str
    memory_limit_in_mb: int
    invoked_function_arn: str
    aws_request_id: str
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = ""

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


class Functions:
    """Each function's handler from functions/<name>/app.py, imported once per test (a
    fresh module: ``handler_for`` caches its services on the first call, as a Lambda
    container does), invoked with the environment the stack gives that function."""

    def __init__(self, stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
        import boto3

        self.stack = stack
        self.monkeypatch = monkeypatch
        self.handlers: dict[str, Callable[[Mapping[str, Any], Any], Any]] = {}
        self.lambda_ = boto3.client("lambda")
        self.all_env = {k for name in FUNCTIONS for k in stack.env(name)}

    def _use_env(self, name: str) -> None:
        env = self.stack.env(name)
        for key in self.all_env - set(env):
            self.monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            self.monkeypatch.setenv(key, value)
        # Tests have no X-Ray daemon; the handler's Tracer must stay off.
        self.monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")

    def handler(self, name: str) -> Callable[[Mapping[str, Any], Any], Any]:
        if name not in self.handlers:
            self._use_env(name)
            resource = self.stack.sam["Resources"][self.stack.function_id(name)]
            path = REPO / resource["Properties"]["CodeUri"] / "app.py"
            spec = importlib.util.spec_from_file_location(f"lambda_{name}_{uuid.uuid4().hex}", path)
            assert spec is not None and spec.loader is not None, path
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.handlers[name] = module.lambda_handler
        return self.handlers[name]

    def context(self, name: str) -> LambdaContext:
        physical = self.stack.physical[self.stack.function_id(name)]
        config = self.lambda_.get_function_configuration(FunctionName=physical)
        return LambdaContext(
            function_name=config["FunctionName"],
            memory_limit_in_mb=int(config["MemorySize"]),
            invoked_function_arn=config["FunctionArn"],
            aws_request_id=str(uuid.uuid4()),
        )

    def invoke(self, name: str, event: Mapping[str, Any]) -> Any:
        handler = self.handler(name)
        self._use_env(name)
        return handler(event, self.context(name))

    def http(self, name: str, event: Mapping[str, Any]) -> tuple[int, Any]:
        """(status, body parsed as JSON when it is JSON) of an API event."""
        response = self.invoke(name, event)
        body = response.get("body") or ""
        if response.get("isBase64Encoded"):
            body = base64.b64decode(body).decode()
        content_type = _header(response, "content-type")
        parsed = json.loads(body) if content_type == "application/json" and body else body
        return int(response["statusCode"]), parsed


def _header(response: Mapping[str, Any], name: str) -> str:
    headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
    return str(headers.get(name, ""))


@dataclass
class Keys:
    admin: str
    agent: str


@pytest.fixture
def functions(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[Functions]:
    yield Functions(stack, monkeypatch)


@pytest.fixture
def store(stack: Stack, dynamodb_client: Any) -> Iterator[Store]:
    """The stack's own tables, seen from the test (keys are made here, as the CLI does)."""
    found = stack.store(dynamodb_client)
    yield found
    found.close()


@pytest.fixture
def keys(store: Store) -> Keys:
    return Keys(
        admin=create_key(store, WS, "admin", person=ADMIN),
        agent=create_key(store, WS, "agent", person=PERSON),
    )


def _check(functions: Functions, key: str) -> str:
    status, body = functions.http("check", load_event("check-check", key))
    assert status == 200, body
    assert body["allowed"] is True and body["check_id"].startswith("chk_")
    return str(body["check_id"])


def _entries(functions: Functions, key: str) -> list[Json]:
    status, body = functions.http("evidence", load_event("evidence-entries", key))
    assert status == 200, body
    return [json.loads(line) for line in str(body).splitlines()]


def _ledger_item(dynamodb_client: Any, stack: Stack, seq: int) -> Json:
    got = dynamodb_client.get_item(
        TableName=stack.physical["LedgerTable"],
        Key={"workspace": {"S": WS}, "seq": {"N": str(seq)}},
        ConsistentRead=True,
    )
    return dict(got["Item"])


# --- the stack ------------------------------------------------------------------------
def test_stack_makes_what_the_functions_need(stack: Stack, functions: Functions) -> None:
    import boto3

    tables = {stack.physical[t] for t in ("LedgerTable", "RecordsTable", "StateTable")}
    assert tables <= set(boto3.client("dynamodb").list_tables()["TableNames"])
    lambda_ = boto3.client("lambda")
    for name in FUNCTIONS:
        physical = stack.physical[stack.function_id(name)]
        config = lambda_.get_function_configuration(FunctionName=physical)
        assert config["Handler"] == "app.lambda_handler" and config["Runtime"] == "python3.13"
        # moto's CloudFormation drops these from the function; the translation keeps them.
        props = stack.cfn["Resources"][stack.function_id(name)]["Properties"]
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        [layer] = props["Layers"]
        assert stack.cfn["Resources"][layer["Ref"]]["Type"] == "AWS::Lambda::LayerVersion"
        # What the test gives the handler is what the stack gave the function.
        deployed = {k: str(v) for k, v in config["Environment"]["Variables"].items()}
        assert deployed == stack.env(name), name
        env = stack.env(name)
        assert env["CLAROS_LEDGER_TABLE"] == stack.physical["LedgerTable"]
        assert env["CLAROS_STORE"] == "dynamodb" and env["CLAROS_SIGNER"] == "kms"
        assert env["CLAROS_LEDGER_CHECKPOINT_EVERY"] == "2"
        settings = Settings.from_env(env)
        assert (settings.records_table, settings.state_table) == (
            stack.physical["RecordsTable"],
            stack.physical["StateTable"],
        )
        assert settings.inline_checkpoints is False  # the stream signs, not the request
    # The checkpoint function follows the ledger's stream and a schedule.
    checkpoint_arn = lambda_.get_function_configuration(
        FunctionName=stack.physical["CheckpointFunction"]
    )["FunctionArn"]
    ledger = boto3.client("dynamodb").describe_table(TableName=stack.physical["LedgerTable"])
    mappings = lambda_.list_event_source_mappings()["EventSourceMappings"]
    assert [(m["FunctionArn"], m["EventSourceArn"]) for m in mappings] == [
        (checkpoint_arn, ledger["Table"]["LatestStreamArn"])
    ]
    assert mappings[0]["StartingPosition"] == "LATEST" and mappings[0]["BatchSize"] == 100
    events = boto3.client("events")
    rule = events.describe_rule(Name=stack.physical["CheckpointFunctionSchedule"])
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert [t["Arn"] for t in targets] == [checkpoint_arn]


# --- the API functions ----------------------------------------------------------------
def test_check_logs_a_row_in_the_stack_tables(
    stack: Stack, functions: Functions, keys: Keys, dynamodb_client: Any, store: Store
) -> None:
    check_id = _check(functions, keys.agent)
    row = dynamodb_client.get_item(
        TableName=stack.physical["RecordsTable"],
        Key={"workspace": {"S": WS}, "rid": {"S": f"check#{check_id}"}},
    )
    assert "Item" in row, "the check's row is not in the stack's records table"
    entry = _ledger_item(dynamodb_client, stack, 1)
    assert entry["kind"] == {"S": "check"} and entry["ref_id"] == {"S": check_id}
    record = store.get_record(WS, "check", check_id)
    assert record is not None and record["on_behalf_of"] == PERSON


def test_a_bad_key_is_refused_by_the_real_handler(functions: Functions, keys: Keys) -> None:
    status, body = functions.http("check", load_event("check-check", "ck_" + "x" * 43))
    assert status == 401 and body["error"] == "unauthorized", body
    unfilled = load_event("check-check")  # the placeholder as it is in the file
    assert functions.http("check", unfilled)[0] == 401


def test_outcome_is_recorded_once(functions: Functions, keys: Keys) -> None:
    check_id = _check(functions, keys.agent)
    event = load_event("outcome-check-outcome", keys.agent, check_id=check_id)
    status, body = functions.http("outcome", event)
    assert status == 201, body
    again = functions.http("outcome", event)
    assert again[0] == 409, again
    others = functions.http(
        "outcome", load_event("outcome-check-outcome", keys.admin, check_id=check_id)
    )
    assert others[0] == 403, others


def test_evidence_reads_and_verifies_the_chain(functions: Functions, keys: Keys) -> None:
    check_id = _check(functions, keys.agent)
    outcome = load_event("outcome-check-outcome", keys.agent, check_id=check_id)
    assert functions.http("outcome", outcome)[0] == 201
    response = functions.invoke("evidence", load_event("evidence-entries", keys.admin))
    assert response["statusCode"] == 200
    assert _header(response, "content-type") == "application/x-ndjson"
    lines = _entries(functions, keys.admin)
    assert [(e["seq"], e["kind"]) for e in lines] == [(1, "check"), (2, "outcome")]
    assert lines[0]["event"]["check_id"] == check_id
    assert lines[1]["prev_hash"] == lines[0]["hash"]
    status, report = functions.http("evidence", load_event("evidence-verify", keys.admin))
    assert status == 200 and report["ok"] is True, report
    assert functions.http("evidence", load_event("evidence-verify", keys.agent))[0] == 403


def test_admin_edits_a_rule(functions: Functions, keys: Keys) -> None:
    status, body = functions.http("admin", load_event("admin-edit-rule", keys.admin))
    assert status == 200, body
    assert body["changed"] is True
    status, rule = functions.http("admin", load_event("admin-get-rule", keys.admin))
    assert status == 200, rule
    assert json.dumps(rule).count("refund-half") >= 1
    lines = _entries(functions, keys.admin)
    assert "rule_version" in {e["kind"] for e in lines}
    assert functions.http("admin", load_event("admin-edit-rule", keys.agent))[0] == 403


def test_every_sample_event_is_served_as_it_is(functions: Functions, keys: Keys) -> None:
    """Each HTTP sample, with an admin's key, reaches its route and passes its body's
    validation: ids that name nothing give 404 or 409, never 400 or 500. The samples fit
    together: the mapping's read tool is the one the tool list registers, first."""
    seen = 0
    first = "check-register-tools"
    for name in [first, *(n for n in event_names() if n != first)]:
        event = load_event(name)
        if "routeKey" not in event:
            continue
        function = name.split("-", 1)[0]
        status, body = functions.http(function, load_event(name, keys.admin))
        assert status in (200, 201, 404, 409), (name, status, body)
        if status >= 400:
            assert not body["message"].startswith("no route"), (name, body)
        seen += 1
    assert seen == len(event_names()) - 2  # all but the stream batch and the schedule


# --- the checkpoint function: API, stream, schedule -----------------------------------
def _verify_checkpoint(functions: Functions, key: str, cp: Json) -> None:
    status, body = functions.http("evidence", load_event("evidence-public-keys", key))
    assert status == 200, body
    [public] = [k for k in body["keys"] if k["key_id"] == cp["key_id"]]
    message = checkpoint_message(WS, cp["seq"], cp["hash"], cp["ts"])
    VerifyKey(base64.b64decode(public["public_key"])).verify(
        message, base64.b64decode(cp["signature"])
    )


def _checkpoints(functions: Functions, key: str) -> list[Json]:
    status, body = functions.http("evidence", load_event("evidence-checkpoints", key))
    assert status == 200, body
    return list(body["checkpoints"])


def test_checkpoint_route_signs_with_the_workspace_kms_key(
    functions: Functions, keys: Keys
) -> None:
    import boto3

    empty = functions.http("checkpoint", load_event("checkpoint-checkpoint-now", keys.admin))
    assert empty[0] == 409, empty
    _check(functions, keys.agent)
    status, cp = functions.http("checkpoint", load_event("checkpoint-checkpoint-now", keys.admin))
    assert status == 201, cp
    assert cp["seq"] == 1 and cp["workspace"] == WS
    _verify_checkpoint(functions, keys.agent, cp)
    kms = boto3.client("kms")
    meta = kms.describe_key(KeyId=f"alias/claros-ledger-{WS}")["KeyMetadata"]
    assert meta["KeySpec"] == "ECC_NIST_EDWARDS25519"
    # The signature is the KMS key's: verify it with KMS too.
    verified = kms.verify(
        KeyId=meta["KeyId"],
        Message=checkpoint_message(WS, cp["seq"], cp["hash"], cp["ts"]),
        MessageType="RAW",
        Signature=base64.b64decode(cp["signature"]),
        SigningAlgorithm="ED25519_SHA_512",
    )
    assert verified["SignatureValid"] is True
    assert _checkpoints(functions, keys.agent) == [cp]
    denied = functions.http("checkpoint", load_event("checkpoint-checkpoint-now", keys.agent))
    assert denied[0] == 403
    # A copy of each signed checkpoint lands in the anchor bucket. moto's CloudFormation
    # ignores a bucket's Object Lock settings, so the lock is checked in the template.
    props = functions.stack.cfn["Resources"]["AnchorBucket"]["Properties"]
    assert props["ObjectLockEnabled"] is True
    rule = props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]
    assert rule["Mode"] == "COMPLIANCE" and rule["Days"] == {"Ref": "AnchorRetentionDays"}
    bucket = functions.stack.physical["AnchorBucket"]
    key = f"checkpoints/{WS}/{cp['seq']:020d}.json"
    stored = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    assert json.loads(stored) == cp


def _stream_batch(stack: Stack, delivered: list[tuple[str, Json]]) -> Json:
    """The records the stack's event source mapping handed to Lambda since the last call,
    as one batch (Lambda batches up to BatchSize records)."""
    checkpoint_fn = stack.physical["CheckpointFunction"]
    assert {name for name, _ in delivered} <= {checkpoint_fn}, delivered
    records = [r for _, event in delivered for r in event["Records"]]
    delivered.clear()
    return {"Records": records}


def test_stream_batches_sign_every_nth_entry(
    stack: Stack,
    functions: Functions,
    keys: Keys,
    dynamodb_client: Any,
    stream_batches: list[tuple[str, Json]],
) -> None:
    _check(functions, keys.agent)
    _check(functions, keys.agent)
    batch = _stream_batch(stack, stream_batches)
    ledger_arn = dynamodb_client.describe_table(TableName=stack.physical["LedgerTable"])
    sample = load_event("checkpoint-stream")["Records"][0]
    assert [int(r["dynamodb"]["NewImage"]["seq"]["N"]) for r in batch["Records"]] == [1, 2]
    for record in batch["Records"]:
        # What the stream carries is what the ledger table holds, in the sample's shape.
        assert record["eventName"] == "INSERT" and record["eventSource"] == "aws:dynamodb"
        assert record["eventSourceARN"] == ledger_arn["Table"]["LatestStreamArn"]
        image = record["dynamodb"]["NewImage"]
        assert image == _ledger_item(dynamodb_client, stack, int(image["seq"]["N"]))
        assert set(image) == set(sample["dynamodb"]["NewImage"])
    assert functions.invoke("checkpoint", batch) == {"signed": [2]}
    [cp] = _checkpoints(functions, keys.admin)
    assert cp["seq"] == 2
    assert cp["hash"] == batch["Records"][1]["dynamodb"]["NewImage"]["hash"]["S"]
    _verify_checkpoint(functions, keys.admin, cp)
    # A redelivered batch (Lambda retries) signs nothing new.
    assert functions.invoke("checkpoint", batch) == {"signed": [2]}
    assert len(_checkpoints(functions, keys.admin)) == 1
    # An entry off the multiple: nothing to sign.
    _check(functions, keys.agent)
    assert functions.invoke("checkpoint", _stream_batch(stack, stream_batches)) == {"signed": []}


def test_schedule_signs_the_tail_once_it_is_old(
    stack: Stack, functions: Functions, keys: Keys, stream_batches: list[tuple[str, Json]]
) -> None:
    import boto3

    _check(functions, keys.agent)
    _check(functions, keys.agent)
    assert functions.invoke("checkpoint", _stream_batch(stack, stream_batches)) == {"signed": [2]}
    rule = boto3.client("events").describe_rule(Name=stack.physical["CheckpointFunctionSchedule"])
    tick = load_event("checkpoint-schedule")
    tick["resources"] = [rule["Arn"]]
    started = time.monotonic()
    _check(functions, keys.agent)  # seq 3: one past the last checkpoint, fresh
    early = functions.invoke("checkpoint", tick)
    if time.monotonic() - started < 0.9:  # the tail is younger than CheckpointMaxAge
        assert early == {"signed": []}
    time.sleep(1.1)
    assert functions.invoke("checkpoint", tick) == {"signed": [3]}
    assert functions.invoke("checkpoint", tick) == {"signed": []}
    checkpoints = _checkpoints(functions, keys.admin)
    assert [cp["seq"] for cp in checkpoints] == [2, 3]
    _verify_checkpoint(functions, keys.admin, checkpoints[-1])
    status, report = functions.http("evidence", load_event("evidence-verify", keys.admin))
    assert status == 200 and report["ok"] is True, report


# --- routes: the template and the code agree ------------------------------------------
def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _template_routes(sam: Json) -> dict[str, dict[tuple[str, str], str]]:
    """functions/<name> -> {(method, path): event name} of its HttpApi events."""
    routes: dict[str, dict[tuple[str, str], str]] = {}
    for resource in sam["Resources"].values():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        name = _code_name(resource["Properties"]["CodeUri"])
        events = resource["Properties"].get("Events", {})
        routes[name] = {
            (e["Properties"]["Method"].upper(), e["Properties"]["Path"]): event_name
            for event_name, e in events.items()
            if e["Type"] == "HttpApi"
        }
    return routes


def _probe(method: str, path: str) -> Json:
    """An HTTP API event for a route, with no key: a served route answers 401."""
    event = load_event("check-check")
    raw = re.sub(r"\{[^}]+\}", "x1", path)
    event.update(routeKey=f"{method} {path}", rawPath=raw, body=None)
    event["headers"].pop("authorization")
    event["requestContext"]["http"].update(method=method, path=raw)
    return event


def test_every_route_is_served_by_the_function_the_template_routes_it_to(
    tmp_path: Path,
) -> None:
    """Each function's resolver, built as its Lambda builds it, is asked for every route
    the code declares (PERMISSIONS) and every route template.yaml sends to any function."""
    services = build_services(Settings(data_dir=tmp_path / "data"))
    context = LambdaContext("probe", 512, "arn:aws:lambda:us-east-1:1:function:probe", "r")
    resolvers = {name: build_resolver(services, [name]) for name in FUNCTIONS}
    template = _template_routes(load_template())
    assert set(template) == set(FUNCTIONS)
    candidates = set(PERMISSIONS) | {route for routes in template.values() for route in routes}
    served: dict[tuple[str, str], list[str]] = {route: [] for route in candidates}
    for route in sorted(candidates):
        for name, resolver in resolvers.items():
            result = resolver.resolve(_probe(*route), context)
            status = result["statusCode"]
            if route in PUBLIC:  # takes no key: served unless the resolver has no such route
                if status != 404 or "no route" not in (result["body"] or ""):
                    served[route].append(name)
                continue
            assert status in (401, 404), (name, route, status)
            if status == 401:
                served[route].append(name)
    services.close()
    for route in [*PERMISSIONS, *PUBLIC]:
        routed_to = sorted(name for name, routes in template.items() if route in routes)
        assert len(served[route]) == 1, f"{route} is served by {served[route]}"
        assert routed_to == served[route], (
            f"{route[0]} {route[1]} is served by functions/{served[route][0]} "
            f"but template.yaml routes it to {routed_to or 'no function'}"
        )
    unserved = {
        f"{name}: {method} {path}"
        for name, routes in template.items()
        for method, path in routes
        if name not in served[(method, path)]
    }
    assert not unserved, f"template.yaml routes these to functions that 404: {sorted(unserved)}"


def test_the_translated_api_sends_each_route_to_its_function(aws_env: None) -> None:
    """What moto does not deploy: the HTTP API the translation makes (payload 2.0, each
    route's integration is its function, API Gateway may invoke it on that route)."""
    sam = load_template()
    cfn, _ = translate(sam)
    [(api_id, api)] = [
        (k, r) for k, r in cfn["Resources"].items() if r["Type"] == "AWS::ApiGatewayV2::Api"
    ]
    paths = api["Properties"]["Body"]["paths"]
    integrations = {
        (method.upper(), path): op["x-amazon-apigateway-integration"]
        for path, ops in paths.items()
        for method, op in ops.items()
    }
    routes = _template_routes(sam)
    assert set(integrations) == {route for r in routes.values() for route in r}
    permissions = {
        r["Properties"]["SourceArn"]["Fn::Sub"][0].split("${__Stage__}", 1)[1]: r["Properties"]
        for r in cfn["Resources"].values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["Principal"] == "apigateway.amazonaws.com"
    }
    stack = Stack(sam, cfn, {}, {})
    for name, function_routes in routes.items():
        logical_id = stack.function_id(name)
        for method, path in function_routes:
            integration = integrations[(method, path)]
            assert integration["type"] == "aws_proxy"
            assert integration["payloadFormatVersion"] == "2.0"
            assert f"${{{logical_id}.Arn}}" in integration["uri"]["Fn::Sub"], (method, path)
            allowed = permissions[f"/{method}{re.sub(r'{[^}]+}', '*', path)}"]
            assert allowed["FunctionName"] == {"Ref": logical_id}, (method, path)
            source = allowed["SourceArn"]["Fn::Sub"][1]
            assert source["__ApiId__"] == {"Ref": api_id}
    [stage] = [r for r in cfn["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    assert stage["Properties"]["StageName"] == "$default"
    assert stage["Properties"]["AutoDeploy"] is True


def test_the_stream_event_source_is_the_ledger_and_samples_match() -> None:
    sam = load_template()
    events = sam["Resources"]["CheckpointFunction"]["Properties"]["Events"]
    kinds = {e["Type"] for e in events.values()}
    assert {"DynamoDB", "Schedule"} <= kinds
    stream = load_event("checkpoint-stream")
    image_keys = {"workspace", "seq", "kind", "ref_id", "ts", "payload_sha256", "prev_hash"}
    for record in stream["Records"]:
        assert record["eventSource"] == "aws:dynamodb" and record["eventName"] == "INSERT"
        assert set(record["dynamodb"]["NewImage"]) == image_keys | {"hash"}
        assert record["dynamodb"]["StreamViewType"] == "NEW_IMAGE"
    tick = load_event("checkpoint-schedule")
    assert (tick["source"], tick["detail-type"]) == ("aws.events", "Scheduled Event")


def test_sample_events_cover_every_route() -> None:
    """events/<function>-<event name in kebab case>.json exists for each HttpApi event of the
    template, and says the same route."""
    expected = {"checkpoint-stream", "checkpoint-schedule"}
    for name, routes in _template_routes(load_template()).items():
        for (method, path), event_name in routes.items():
            file = f"{name}-{_kebab(event_name)}"
            expected.add(file)
            event = load_event(file)
            assert route_of(event) == (method, path), file
            assert event["version"] == "2.0" and event["isBase64Encoded"] is False
            context = event["requestContext"]
            assert context["routeKey"] == event["routeKey"] and context["stage"] == "$default"
            assert context["http"]["method"] == method
            assert context["http"]["path"] == event["rawPath"], file
            params: dict[str, str] = event.get("pathParameters", {})
            assert path.format_map(params) == event["rawPath"], file
            assert event["headers"]["authorization"] == f"Bearer {KEY_PLACEHOLDER}", file
            if "body" in event:
                assert event["headers"]["content-type"] == "application/json", file
                assert isinstance(json.loads(event["body"]), dict), file
            else:
                assert method in ("GET", "DELETE") or path.endswith("/checkpoints"), file
    assert set(event_names()) == expected


def test_load_event_fills_in_key_and_path() -> None:
    event = load_event("outcome-check-outcome", "ck_secret", check_id="chk_1/2")
    assert event["headers"]["authorization"] == "Bearer ck_secret"
    assert event["pathParameters"] == {"check_id": "chk_1/2"}
    assert event["rawPath"] == "/v1/check/chk_1%2F2/outcome"
    assert event["requestContext"]["http"]["path"] == event["rawPath"]
    assert load_event("outcome-check-outcome")["rawPath"] != event["rawPath"]
    with pytest.raises(ValueError, match="no parameter"):
        load_event("check-check", rule_id="x")
    with pytest.raises(ValueError, match="REPLACE_WITH_KEY"):
        load_event("checkpoint-schedule", "ck_secret")
    with pytest.raises(FileNotFoundError, match="check-check"):
        load_event("no-such-event")


# --- the evidence functions: export to the bucket, reports signed in KMS, pruning ---------
def test_export_is_written_to_the_bucket(functions: Functions, keys: Keys, tmp_path: Path) -> None:
    import boto3

    for _ in range(3):
        _check(functions, keys.agent)
    status, body = functions.http("export", load_event("export-export-evidence", keys.admin))
    assert status == 200, body
    bucket = functions.stack.physical["ExportBucket"]
    assert f"{bucket}" in body["url"] and "X-Amz-Signature=" in body["url"]
    data = boto3.client("s3").get_object(Bucket=bucket, Key=body["key"])["Body"].read()
    (tmp_path / body["name"]).write_bytes(data)
    assert verify(["--export", str(tmp_path / body["name"])]) == 0
    lines = [json.loads(line) for line in data.splitlines()]
    # Signed in KMS: the checkpoint at the head and the export's last line.
    assert [c["seq"] for c in lines if c.get("type") == "checkpoint"][-1] == 3
    denied = functions.http("export", load_event("export-export-evidence", keys.agent))
    assert denied[0] == 403


def _keys(functions: Functions, key: str) -> list[PublicKey]:
    status, body = functions.http("evidence", load_event("evidence-public-keys", key))
    assert status == 200, body
    return [PublicKey.from_json(k) for k in body["keys"]]


@pytest.fixture
def mid_november(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Claros's clock pinned to 2026-11-15, so the month reported is never today's."""
    return install_clock(monkeypatch, utc_ms(2026, 11, 15, 12))


def test_report_is_signed_by_the_kms_key(
    mid_november: Clock, functions: Functions, keys: Keys
) -> None:
    edit = load_event("admin-edit-rule", keys.admin)
    assert functions.http("admin", edit)[0] == 200
    rule = json.loads(edit["body"])["rule"]
    event = load_event("export-report", keys.admin)
    event["queryStringParameters"]["workflow_id"] = rule["workflow_id"]
    event["queryStringParameters"]["month"] = "2026-11"
    status, signed = functions.http("export", event)
    assert status == 200, signed
    assert verify_signed_report(signed, _keys(functions, keys.admin)) == []
    assert signed["report"]["rules"][0]["id"] == rule["id"]


def test_retention_and_prune_run_in_the_prune_function(functions: Functions, keys: Keys) -> None:
    _check(functions, keys.agent)
    status, body = functions.http("prune", load_event("prune-prune", keys.admin))
    assert status == 409 and "no retention is set" in body["message"]
    status, body = functions.http("prune", load_event("prune-put-retention", keys.admin))
    assert status == 200 and body["days"] == 365
    status, body = functions.http("prune", load_event("prune-prune", keys.admin))
    assert status == 200 and body["pruned"] is False  # nothing is a year old yet
    status, body = functions.http("prune", load_event("prune-get-retention", keys.admin))
    assert status == 200 and body["oldest_record"]["seq"] == 1
    role = functions.stack.cfn["Resources"]["PruneFunction"]["Properties"]["Role"]
    assert role == {"Fn::GetAtt": ["LedgerPruneRole", "Arn"]}
