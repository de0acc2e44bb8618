"""The stack for AWS tests (not a test module): template.yaml translated by SAM's own
translator, deployed into moto's CloudFormation, and each function's real handler run with
the environment the stack gives it. Used by tests/aws/test_stack.py and tests/security."""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import importlib.util
import io
import json
import os
import re
import types
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from claros.api.app import FUNCTIONS
from claros.auth import create_key
from claros.store.base import Store
from tests.aws import REPO, STORE_TABLES, load_template
from tests.events import load_event

STACK_NAME = "claros-test"
ARTIFACTS = "claros-test-artifacts"
# Small values so a test sees a checkpoint at every 2nd entry and a stale tail after 1 s.
PARAMETERS = {"CheckpointEvery": "2", "CheckpointMaxAge": "1", "AnchorRetentionDays": "183"}
WS = "acme"
ADMIN = "admin@acme.test"
PERSON = "dana@acme.test"
CODE_PROPERTY = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
}

Json = dict[str, Any]


# moto's CloudFormation makes no API Gateway v2 resources (API, stage), alarms or the
# stream failure queue's policy, and warns of each: a test that deploys the stack with it
# ignores those warnings (tests/aws/test_template.py checks them as written).
STACK_WARNINGS = [
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy:UserWarning"),
]


# --- the template, translated and deployed --------------------------------------------
class _NoManagedPolicies:
    """samtranslator's managed-policy loader; asked only for policies named by name, and the
    template names none (its policies are written out)."""

    def load(self) -> dict[str, str]:
        return {}


def translate(sam: Json) -> tuple[Json, dict[str, Path]]:
    """Plain CloudFormation for ``sam`` and the local folders its code comes from, by S3
    key: local CodeUri/ContentUri become s3:// URIs first, as ``sam package`` does.

    The translation is a pure function of the template (and the region, for the pseudo
    parameters) and takes seconds of CPU; every AWS test deploys a stack, so each distinct
    template is translated once per process and each caller gets its own copy."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
    cfn, uploads = _translated(json.dumps(sam), region)
    return copy.deepcopy(cfn), dict(uploads)


@functools.lru_cache(maxsize=16)
def _translated(sam_json: str, region: str) -> tuple[Json, dict[str, Path]]:
    """``translate``'s work, cached by the template's JSON (a template holds only JSON
    types; json.dumps refuses anything else) and the region."""
    from samtranslator.translator.transform import transform  # type: ignore[import-untyped]

    del region  # part of the cache key only: samtranslator reads it from the environment
    sam = json.loads(sam_json)
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
    name: str = STACK_NAME

    def function_id(self, name: str) -> str:
        """The logical id of the function whose code is functions/<name>/."""
        for logical_id, resource in self.sam["Resources"].items():
            code = resource.get("Properties", {}).get("CodeUri", "")
            if resource["Type"] == "AWS::Serverless::Function" and code_name(code) == name:
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
        if (
            isinstance(value, dict)
            and list(value) == ["Fn::Sub"]
            and isinstance(value["Fn::Sub"], str)
        ):
            pseudo = {"AWS::Partition": "aws", "AWS::AccountId": "123456789012",
                      "AWS::Region": "us-east-1", "AWS::StackName": self.name}  # fmt: skip
            return re.sub(
                r"\$\{([^}.]+)\}",
                lambda m: pseudo.get(m.group(1)) or self._resolve(key, {"Ref": m.group(1)}),
                value["Fn::Sub"],
            )
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


def code_name(code_uri: Any) -> str:
    return str(code_uri).strip("/").split("/")[-1]


def deploy(
    sam: Json, stack_name: str = STACK_NAME, parameters: Mapping[str, str] | None = None
) -> Stack:
    """``sam`` deployed into moto with ``parameters`` (default: ``PARAMETERS``)."""
    import boto3

    cfn, uploads = translate(sam)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=ARTIFACTS)  # again for a second stack: moto's us-east-1 allows it
    for key, folder in uploads.items():
        s3.put_object(Bucket=ARTIFACTS, Key=key, Body=_zip(folder))
    cloudformation = boto3.client("cloudformation")
    with json_templates_read_as_json():
        cloudformation.create_stack(
            StackName=stack_name,
            TemplateBody=json.dumps(cfn),
            Parameters=[
                {"ParameterKey": k, "ParameterValue": v}
                for k, v in (PARAMETERS if parameters is None else parameters).items()
            ],
            Capabilities=["CAPABILITY_IAM"],
        )
    [described] = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    if described["StackStatus"] != "CREATE_COMPLETE":
        events = cloudformation.describe_stack_events(StackName=stack_name)["StackEvents"]
        reasons = [e.get("ResourceStatusReason") for e in events if e.get("ResourceStatusReason")]
        pytest.fail(f"stack is {described['StackStatus']}: {reasons}")
    resources = cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in resources
        if r.get("LogicalResourceId") and r.get("PhysicalResourceId")
    }
    parameters = {
        name: str(spec.get("Default", "")) for name, spec in sam["Parameters"].items()
    } | {p["ParameterKey"]: p["ParameterValue"] for p in described.get("Parameters", [])}
    return Stack(sam, cfn, parameters, physical, stack_name)


@contextlib.contextmanager
def json_templates_read_as_json() -> Iterator[None]:
    """moto's CloudFormation parses a template body as JSON when it is JSON, as CloudFormation
    does. moto gives every body to PyYAML's pure-Python loader first (JSON is YAML too),
    ~0.4 s of CPU for the translated template (140 KB), in each of the ~30 tests that
    deploy the stack, and in the cost table's measurement; the dict is the same
    (tests/aws/test_lighter_setup.py pins it). Any other body goes to moto's YAML path."""
    from moto.cloudformation.models import Stack as MotoStack

    parse_yaml = MotoStack.parse_template

    def parse_template(template: str) -> Any:
        try:
            parsed = json.loads(template)
        except ValueError:
            return parse_yaml(template)
        return parsed if isinstance(parsed, dict) else parse_yaml(template)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MotoStack, "parse_template", staticmethod(parse_template))
        yield


@pytest.fixture
def stream_batches(moto_aws: None, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Json]]:
    """(function name, event) of every invocation moto's Lambda makes: the stack's event
    source mapping on the ledger stream invokes the checkpoint function inside moto."""
    return catch_stream_batches(monkeypatch)


def catch_stream_batches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Json]]:
    """``stream_batches`` outside a fixture (bench/capacity.py runs the stack too)."""
    from moto.awslambda.models import LambdaFunction

    delivered: list[tuple[str, Json]] = []

    def invoke(self: Any, body: str, request_headers: Any, response_headers: Any) -> bytes:
        event = json.loads(body)
        # Lambda applies the records stream's filter (MODIFY and REMOVE only); moto does not.
        event["Records"] = [
            r
            for r in event["Records"]
            if not (":table/" in r["eventSourceARN"] and "RecordsTable" in r["eventSourceARN"]
                    and r["eventName"] == "INSERT")
        ]  # fmt: skip
        if event["Records"]:
            delivered.append((str(self.function_name), event))
        return b'{"delivered": true}'  # a result: moto drops the records it handed over

    monkeypatch.setattr(LambdaFunction, "invoke", invoke)
    # moto json-dumps the batch it hands to Lambda and fails on a binary attribute (the
    # records table's images); Lambda gets binary base64-encoded, as here.
    import moto.awslambda.models as lambda_models

    def dumps(value: Any, **kwargs: Any) -> str:
        return json.dumps(value, default=lambda b: base64.b64encode(b).decode(), **kwargs)

    _Json = types.SimpleNamespace(**{**vars(json), "dumps": dumps})
    monkeypatch.setattr(lambda_models, "json", _Json)
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
        content_type = header(response, "content-type")
        parsed = json.loads(body) if content_type == "application/json" and body else body
        return int(response["statusCode"]), parsed


def header(response: Mapping[str, Any], name: str) -> str:
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
def stack_store(stack: Stack, dynamodb_client: Any) -> Iterator[Store]:
    """The stack's own tables, seen from the test (keys are made here, as the CLI does)."""
    found = stack.store(dynamodb_client)
    yield found
    found.close()


@pytest.fixture
def keys(stack_store: Store) -> Keys:
    return Keys(
        admin=create_key(stack_store, WS, "admin", person=ADMIN),
        agent=create_key(stack_store, WS, "agent", person=PERSON),
    )


def run_check(functions: Functions, key: str) -> str:
    status, body = functions.http("check", load_event("check-check", key))
    assert status == 200, body
    assert body["allowed"] is True and body["check_id"].startswith("chk_")
    return str(body["check_id"])


def ledger_lines(functions: Functions, key: str) -> list[Json]:
    status, body = functions.http("evidence", load_event("evidence-entries", key))
    assert status == 200, body
    return [json.loads(line) for line in str(body).splitlines()]


def ledger_item(dynamodb_client: Any, stack: Stack, seq: int) -> Json:
    got = dynamodb_client.get_item(
        TableName=stack.physical["LedgerTable"],
        Key={"workspace": {"S": WS}, "seq": {"N": str(seq)}},
        ConsistentRead=True,
    )
    return dict(got["Item"])
