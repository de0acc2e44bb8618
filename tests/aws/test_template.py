"""template.yaml: lints clean offline, and says what the design says."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.aws import REPO, TEMPLATE, load_template, tables_from_template, template_tables

BIN = Path(sys.executable).parent
LEDGER_WRITES = {"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
# Routes each function must serve (the design's list); the code may serve more, and
# test_every_route_the_code_serves_is_in_the_template keeps the two in step.
ROUTES = {
    "CheckFunction": {("POST", "/v1/check"), ("POST", "/v1/apps/{app}/tools"), ("GET", "/v1/apps")},
    "OutcomeFunction": {
        ("POST", "/v1/check/{check_id}/outcome"),
        ("POST", "/v1/outcomes"),
        ("POST", "/v1/unchecked"),
    },
    "EvidenceFunction": {
        ("GET", "/v1/ledger/pubkey"),
        ("GET", "/v1/ledger/checkpoints"),
        ("GET", "/v1/ledger/entries"),
        ("GET", "/api/evidence/verify"),
        ("GET", "/api/evidence/stream"),
        ("GET", "/api/evidence/aiuc1"),
        ("GET", "/api/evidence/oversight"),
    },
    "CheckpointFunction": {("POST", "/v1/ledger/checkpoints")},
    "AdminFunction": set(),
    "WebFunction": {("GET", "/app"), ("POST", "/app/signin"), ("POST", "/v1/device/code")},
    "ExportFunction": {("GET", "/api/evidence/export"), ("GET", "/api/evidence/report")},
    "PruneFunction": {
        ("GET", "/api/evidence/retention"),
        ("PUT", "/api/evidence/retention"),
        ("POST", "/api/evidence/prune"),
    },
    # The HTTP API's Lambda authorizer serves no route (tests/aws/test_authorizer.py).
    "AuthorizerFunction": set(),
}
# Functions that sign with the workspace's KMS key: checkpoints, and what the export and
# prune functions sign (the export, the report, a checkpoint at the head or the prune point).
# The functions that run as the signer role (the one role the KMS key policy lets sign).
SIGNERS = {"CheckpointFunction", "ExportFunction"}
# The one function whose role (named from the stack and region) may delete ledger entries.
PRUNER = "PruneFunction"
PRUNE_ROLE_NAME = "${AWS::StackName}-${AWS::Region}-prune"


def _offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_CONFIG_FILE=str(tmp_path / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"),
        SAM_CLI_TELEMETRY="0",
    )
    return env


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=REPO, env=_offline_env(tmp_path), capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in template["Resources"].items() if r["Type"] == kind}


def _statements(function: dict[str, Any], template: dict[str, Any] | None = None) -> list[Any]:
    """The function's policy statements: its own Policies, or its Role's."""
    out = []
    role = function["Properties"].get("Role")
    if role is not None:
        assert template is not None, "pass the template to read a function's Role"
        logical_id = role["Fn::GetAtt"][0]
        for policy in template["Resources"][logical_id]["Properties"]["Policies"]:
            out.extend(policy["PolicyDocument"]["Statement"])
        return out
    for policy in function["Properties"].get("Policies", []):
        out.extend(policy.get("Statement", []))
    return out


def _plain(statements: list[Any]) -> list[dict[str, Any]]:
    """Statements, with those behind a condition (``!If [Cond, statement, NoValue]``) as if
    the condition held."""
    return [s["Fn::If"][1] if "Fn::If" in s else s for s in statements]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --- the linters ----------------------------------------------------------------------
def test_cfn_lint_passes(tmp_path: Path) -> None:
    done = _run([str(BIN / "cfn-lint"), str(TEMPLATE)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cfn_lint_would_catch_a_broken_template(tmp_path: Path) -> None:
    broken = tmp_path / "template.yaml"
    broken.write_text(TEMPLATE.read_text().replace("NEW_IMAGE", "NEW_PICTURE"))
    done = _run([str(BIN / "cfn-lint"), str(broken)], tmp_path)
    assert done.returncode != 0 and "NEW_PICTURE" in done.stdout


def test_sam_validate_lint_passes(tmp_path: Path) -> None:
    done = _run(
        [str(BIN / "sam"), "validate", "--lint", "--template-file", str(TEMPLATE)], tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "valid SAM Template" in done.stdout + done.stderr


# --- code -----------------------------------------------------------------------------
def test_every_function_has_its_entry_point(template: dict[str, Any]) -> None:
    functions = _resources(template, "AWS::Serverless::Function")
    assert set(functions) == set(ROUTES)
    handler = template["Globals"]["Function"]["Handler"]
    module, name = handler.split(".")
    for logical_id, function in functions.items():
        code = REPO / function["Properties"]["CodeUri"] / f"{module}.py"
        assert code.is_file(), f"{logical_id}: {code} is missing"
        tree = ast.parse(code.read_text())
        assigned = {
            t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
        } | {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert name in assigned, f"{code} defines no {name}"


def test_layer_and_globals(template: dict[str, Any]) -> None:
    layer = template["Resources"]["ClarosCommonLayer"]
    props = layer["Properties"]
    assert props["ContentUri"] == "layers/claros_common"
    assert props["CompatibleRuntimes"] == ["python3.13"]
    assert props["CompatibleArchitectures"] == ["arm64"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"  # tests/aws/test_layer.py
    assert (REPO / "layers/claros_common/claros/__init__.py").is_file()
    requirements = (REPO / "layers/claros_common/requirements.txt").read_text()
    for package in ("pydantic", "pynacl", "aws-lambda-powertools", "httpx", "jinja2"):
        assert package in requirements
    fn = template["Globals"]["Function"]
    assert (fn["Runtime"], fn["Architectures"], fn["Tracing"]) == (
        "python3.13",
        ["arm64"],
        "Active",
    )
    assert fn["Layers"] == [{"Ref": "ClarosCommonLayer"}]
    env = fn["Environment"]["Variables"]
    assert env["CLAROS_STORE"] == "dynamodb" and env["CLAROS_SIGNER"] == "kms"
    assert env["CLAROS_LEDGER_TABLE"] == {"Ref": "LedgerTable"}
    assert env["CLAROS_RECORDS_TABLE"] == {"Ref": "RecordsTable"}
    assert env["CLAROS_STATE_TABLE"] == {"Ref": "StateTable"}
    assert env["CLAROS_LEDGER_CHECKPOINT_EVERY"] == {"Ref": "CheckpointEvery"}
    assert env["CLAROS_LEDGER_CHECKPOINT_MAX_AGE"] == {"Ref": "CheckpointMaxAge"}
    assert env["CLAROS_FAST_APPROVAL_S"] == {"Ref": "FastApprovalSeconds"}
    assert env["POWERTOOLS_SERVICE_NAME"] == "claros"
    assert env["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}
    assert env["PYDANTIC_DISABLE_PLUGINS"] == "__all__"  # as claros.api.entry sets it
    params = template["Parameters"]
    defaults = {name: params[name]["Default"] for name in params}
    assert defaults["CheckpointEvery"] == 100 and defaults["CheckpointMaxAge"] == 300
    assert defaults["FastApprovalSeconds"] == 10 and defaults["LogLevel"] == "INFO"
    assert "ApiUrl" in template["Outputs"]


def test_samconfig_defaults() -> None:
    config = tomllib.loads((REPO / "samconfig.toml").read_text())
    assert config["default"]["global"]["parameters"]["stack_name"] == "claros"
    deploy = config["default"]["deploy"]["parameters"]
    # The prune role has the name the ledger table's resource policy names.
    assert deploy["capabilities"] == "CAPABILITY_IAM CAPABILITY_NAMED_IAM"
    assert deploy["resolve_s3"] is True and deploy["confirm_changeset"] is True


# --- routes and events ----------------------------------------------------------------
def _http_routes(function: dict[str, Any]) -> set[tuple[str, str]]:
    events = function["Properties"].get("Events", {}).values()
    assert all(
        e["Properties"]["ApiId"] == {"Ref": "HttpApi"} for e in events if e["Type"] == "HttpApi"
    )
    return {
        (e["Properties"]["Method"], e["Properties"]["Path"])
        for e in events
        if e["Type"] == "HttpApi"
    }


def test_routes(template: dict[str, Any]) -> None:
    seen: set[tuple[str, str]] = set()
    for logical_id, routes in ROUTES.items():
        served = _http_routes(template["Resources"][logical_id])
        assert routes <= served, logical_id
        assert not served & seen, f"{logical_id}: a route is served twice"
        seen |= served


class _RouteRecorder:
    """Stands in for the resolver while a function's route modules register."""

    def __init__(self) -> None:
        self.services = SimpleNamespace(store=None, signer=None, settings=None)
        self.routes: set[tuple[str, str]] = set()

    def route(self, rule: str, method: str) -> Any:
        self.routes.add((method, rule.replace("<", "{").replace(">", "}")))
        return lambda handler: handler


def test_every_route_the_code_serves_is_in_the_template(template: dict[str, Any]) -> None:
    from claros.api.app import FUNCTIONS

    functions = _resources(template, "AWS::Serverless::Function")
    by_code = {f["Properties"]["CodeUri"].strip("/").split("/")[-1]: f for f in functions.values()}
    assert set(FUNCTIONS) <= set(by_code)
    for name, registers in FUNCTIONS.items():
        recorder = _RouteRecorder()
        for register in registers:
            register(recorder)  # type: ignore[arg-type]
        missing = recorder.routes - _http_routes(by_code[name])
        assert not missing, (
            f"functions/{name} serves {sorted(missing)} but template.yaml has no route"
        )


def test_checkpoint_function_follows_the_stream_and_the_clock(template: dict[str, Any]) -> None:
    events = template["Resources"]["CheckpointFunction"]["Properties"]["Events"]
    streams = {
        e["Properties"]["Stream"]["Fn::GetAtt"][0]: e["Properties"]
        for e in events.values()
        if e["Type"] == "DynamoDB"
    }
    assert set(streams) == {"LedgerTable", "RecordsTable"}
    for stream in streams.values():
        assert stream["StartingPosition"] == "LATEST" and stream["BatchSize"] == 100
        assert stream["BisectBatchOnFunctionError"] is True
    # Every ledger event (INSERTs sign, MODIFY/REMOVE are tampering); records: the latter.
    assert "FilterCriteria" not in streams["LedgerTable"]
    [pattern] = streams["RecordsTable"]["FilterCriteria"]["Filters"]
    assert json.loads(pattern["Pattern"]) == {"eventName": ["MODIFY", "REMOVE"]}
    [schedule] = [e["Properties"] for e in events.values() if e["Type"] == "Schedule"]
    assert schedule["Schedule"] == "rate(1 minute)"


# --- tables ---------------------------------------------------------------------------
def test_tables_are_as_designed(template: dict[str, Any]) -> None:
    tables = template_tables(template)
    assert set(tables) == {"LedgerTable", "RecordsTable", "StateTable"}
    keys = {
        name: [(k["AttributeName"], k["KeyType"]) for k in t["KeySchema"]]
        for name, t in tables.items()
    }
    assert keys == {
        "LedgerTable": [("workspace", "HASH"), ("seq", "RANGE")],
        "RecordsTable": [("workspace", "HASH"), ("rid", "RANGE")],
        "StateTable": [("pk", "HASH"), ("sk", "RANGE")],
    }
    types = {
        a["AttributeName"]: a["AttributeType"]
        for a in tables["LedgerTable"]["AttributeDefinitions"]
    }
    assert types == {"workspace": "S", "seq": "N"}
    for name, props in tables.items():
        assert props["BillingMode"] == "PAY_PER_REQUEST", name
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["SSESpecification"]["SSEEnabled"] is True, name
        assert template["Resources"][name]["DeletionPolicy"] == "Retain", name
    assert tables["LedgerTable"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    # Watched for tampering; the old image says which seq a removed record had.
    assert tables["RecordsTable"]["StreamSpecification"] == {"StreamViewType": "OLD_IMAGE"}


def test_tables_made_from_the_template(dynamodb_client: Any, dynamo_tables: dict[str, str]) -> None:
    ledger = dynamodb_client.describe_table(TableName=dynamo_tables["LedgerTable"])["Table"]
    assert ledger["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert ledger["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    for name in dynamo_tables.values():
        backups = dynamodb_client.describe_continuous_backups(TableName=name)
        pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
        assert pitr["PointInTimeRecoveryStatus"] == "ENABLED"


def test_table_properties_the_helper_cannot_make_are_refused(moto_aws: None) -> None:
    import boto3

    template = load_template()
    template["Resources"]["LedgerTable"]["Properties"]["KinesisStreamSpecification"] = {}
    with pytest.raises(ValueError, match="KinesisStreamSpecification"):
        tables_from_template(boto3.client("dynamodb", region_name="us-east-1"), template)


# --- permissions ----------------------------------------------------------------------
def test_the_ledger_is_append_only_for_every_function(template: dict[str, Any]) -> None:
    ledger = {"Fn::GetAtt": ["LedgerTable", "Arn"]}
    for logical_id, function in _resources(template, "AWS::Serverless::Function").items():
        statements = _plain(_statements(function, template))
        denied = {
            action
            for s in statements
            if s["Effect"] == "Deny" and ledger in _as_list(s["Resource"])
            for action in _as_list(s["Action"])
        }
        allowed = {
            action
            for s in statements
            if s["Effect"] == "Allow" and ledger in _as_list(s["Resource"])
            for action in _as_list(s["Action"])
        }
        if logical_id == PRUNER:
            # Pruning deletes entries in batches; it never updates one.
            assert "dynamodb:UpdateItem" in denied and "dynamodb:UpdateItem" not in allowed
            assert allowed & LEDGER_WRITES == {"dynamodb:BatchWriteItem"}
        else:
            assert LEDGER_WRITES <= denied, logical_id
            assert not allowed & LEDGER_WRITES, logical_id
        for s in statements:
            assert "*" not in _as_list(s["Action"]) and "dynamodb:*" not in _as_list(s["Action"])


def test_only_the_prune_role_may_delete_entries(template: dict[str, Any]) -> None:
    function = template["Resources"][PRUNER]["Properties"]
    role = template["Resources"][function["Role"]["Fn::GetAtt"][0]]
    assert role["Type"] == "AWS::IAM::Role"
    # The role has the very name the ledger table's resource policy lets delete: derived
    # from the stack and its region (IAM names are per account), so two stacks never collide.
    assert role["Properties"]["RoleName"] == {"Fn::Sub": PRUNE_ROLE_NAME}
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [t["Principal"] for t in trust] == [{"Service": "lambda.amazonaws.com"}]
    # The others: their own SAM roles, or the signer role (which never writes the ledger).
    for name, f in _resources(template, "AWS::Serverless::Function").items():
        if name in SIGNERS:
            assert f["Properties"]["Role"] == {"Fn::GetAtt": ["LedgerSignerRole", "Arn"]}
        elif name != PRUNER:
            assert "Role" not in f["Properties"], name


def test_the_export_bucket_expires_its_copies(template: dict[str, Any]) -> None:
    bucket = template["Resources"]["ExportBucket"]["Properties"]
    [rule] = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled" and rule["Prefix"] == "exports/"
    assert rule["ExpirationInDays"] == {"Ref": "ExportExpiryDays"}
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    export = template["Resources"]["ExportFunction"]["Properties"]
    assert export["Environment"]["Variables"]["CLAROS_EXPORT_BUCKET"] == {
        "Fn::If": [
            "DeleteExportBucket",
            {"Fn::GetAtt": ["ExportBucketEmptier", "Bucket"]},
            {"Ref": "ExportBucket"},
        ]
    }
    [write] = [s for s in _statements(template["Resources"]["ExportFunction"], template)
               if s.get("Sid") == "WriteExports"]  # fmt: skip
    assert write["Resource"] == {"Fn::Sub": "${ExportBucket.Arn}/exports/*"}


def test_the_ledger_table_policy_denies_rewrites(template: dict[str, Any]) -> None:
    policy = template["Resources"]["LedgerTable"]["Properties"]["ResourcePolicy"]
    [statement] = policy["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny" and statement["Principal"] == "*"
    assert LEDGER_WRITES <= set(statement["Action"])
    condition = statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    assert condition["Fn::Sub"].endswith(f":role/{PRUNE_ROLE_NAME}")


def test_only_the_signing_functions_may_sign(template: dict[str, Any]) -> None:
    for logical_id, function in _resources(template, "AWS::Serverless::Function").items():
        kms = {
            action
            for s in _plain(_statements(function, template))
            if s["Effect"] == "Allow"
            for action in _as_list(s["Action"])
            if action.startswith("kms:")
        }
        # No IAM policy grants kms:Sign: the key policy KmsSigner writes names the signer
        # role (tests/security/aws/test_aws_roles_cannot_rewrite.py evaluates both).
        assert "kms:Sign" not in kms and "kms:ScheduleKeyDeletion" not in kms, logical_id
        if logical_id in SIGNERS:
            assert {"kms:CreateKey", "kms:CreateAlias"} <= kms
            # No function moves an alias (rotate-key is the operator's):
            # tests/security/aws/test_signer_role_hands_the_workspace_key_away.py.
            assert "kms:UpdateAlias" not in kms
            assert {"kms:TagResource", "kms:DescribeKey", "kms:GetPublicKey"} <= kms
        elif logical_id == "AuthorizerFunction":
            assert kms == set()  # it reads keys, members and sessions, nothing else
        else:
            assert kms == {"kms:DescribeKey", "kms:GetPublicKey"}, logical_id
    [create] = [
        s
        for s in _plain(_statements(template["Resources"]["CheckpointFunction"], template))
        if s["Action"] == "kms:CreateKey"
    ]
    assert create["Condition"]["StringEquals"]["kms:KeySpec"] == "ECC_NIST_EDWARDS25519"


def test_ledger_tampered_raises_an_alarm(template: dict[str, Any]) -> None:
    alarm = template["Resources"]["LedgerTamperedAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("Claros", "LedgerTampered")
    # Powertools Metrics publishes with the service dimension the functions' env names.
    service = template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": service}]
    assert alarm["Statistic"] == "Maximum" and alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"  # no tampering is no alarm
    # The stack's own topic always, and AlarmTopicArn's when one is given.
    assert alarm["AlarmActions"] == [
        {"Ref": "LedgerTamperedTopic"},
        {"Fn::If": ["HasAlarmTopic", {"Ref": "AlarmTopicArn"}, {"Ref": "AWS::NoValue"}]},
    ]
    assert template["Resources"]["LedgerTamperedTopic"]["Type"] == "AWS::SNS::Topic"


# --- operations: names, logs, alarms, failures, the export bucket on delete -------------
# Properties that name a resource's physical id (IAM, Lambda, DynamoDB, S3, SNS, SQS, KMS,
# Logs, Events, Scheduler, API Gateway ...): a literal there collides with a second stack.
NAME_PROPERTIES = {
    "Name", "FunctionName", "TableName", "BucketName", "RoleName", "AliasName", "TopicName",
    "QueueName", "ScheduleName", "LogGroupName", "LayerName", "StateMachineName", "RuleName",
    "PolicyName", "InstanceProfileName", "ManagedPolicyName", "AlarmName", "StageName",
}  # fmt: skip
# Names that are not physical ids: inline policy names live inside their role, the HTTP
# API's stage is "$default" inside its API, an alarm's dimensions name metric dimensions.
SCOPED = {
    ("AWS::IAM::Role", "PolicyName"),
    ("AWS::ApiGatewayV2::Stage", "StageName"),
    ("AWS::CloudWatch::Alarm", "Name"),
}


def _literal_names(
    value: Any, kind: str, parameters: frozenset[str] = frozenset(), path: str = ""
) -> list[str]:
    """Where ``value`` (a resource's properties) gives a name as a plain string or as a
    template parameter."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}"
            if key in NAME_PROPERTIES and isinstance(item, str) and (kind, key) not in SCOPED:
                found.append(f"{here}={item!r}")
            elif key in NAME_PROPERTIES and isinstance(item, dict) and "Ref" in item:
                # A parameter's default is as fixed as a literal (the old LedgerPruneRoleName).
                if item["Ref"] in parameters:
                    found.append(f"{here}=Ref {item['Ref']}")
            elif key in NAME_PROPERTIES and isinstance(item, dict) and "Fn::Sub" in item:
                sub = item["Fn::Sub"]
                text = sub if isinstance(sub, str) else sub[0]
                if "${" not in text:  # a Sub with nothing substituted is a literal
                    found.append(f"{here}={text!r}")
            found += _literal_names(item, kind, parameters, here)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _literal_names(item, kind, parameters, f"{path}[{i}]")
    return found


def _translated() -> dict[str, Any]:
    from tests.stack import translate

    return translate(load_template())[0]  # type: ignore[no-any-return]


def test_no_resource_has_a_fixed_physical_name(aws_env: None) -> None:
    """Every name in the deployed template comes from the stack (or from CloudFormation),
    so a second stack, or the same stack in another region, deploys into the account."""
    cfn = _translated()
    parameters = frozenset(cfn["Parameters"])
    literal = [
        f"{logical_id}{found}"
        for logical_id, resource in cfn["Resources"].items()
        for found in _literal_names(resource.get("Properties", {}), resource["Type"], parameters)
    ]
    assert literal == []
    # IAM is global: the two named roles carry the stack's name and its region.
    for role in ("LedgerSignerRole", "LedgerPruneRole"):
        name = cfn["Resources"][role]["Properties"]["RoleName"]["Fn::Sub"]
        assert name.startswith("${AWS::StackName}-${AWS::Region}-"), (role, name)


def test_the_name_check_sees_a_fixed_name() -> None:
    resource = {"Properties": {"RoleName": "claros-ledger-prune", "Policies": [
        {"PolicyName": "inline"}]}}  # fmt: skip
    assert _literal_names(resource["Properties"], "AWS::IAM::Role") == [
        ".RoleName='claros-ledger-prune'"
    ]
    assert _literal_names({"TopicName": {"Fn::Sub": "alarms"}}, "AWS::SNS::Topic") == [
        ".TopicName='alarms'"
    ]
    named = {"RoleName": {"Ref": "LedgerPruneRoleName"}}
    assert _literal_names(named, "AWS::IAM::Role", frozenset({"LedgerPruneRoleName"})) == [
        ".RoleName=Ref LedgerPruneRoleName"
    ]


def test_the_api_throttle_is_a_parameter(template: dict[str, Any]) -> None:
    params = template["Parameters"]
    assert (params["ApiThrottleRate"]["Default"], params["ApiThrottleBurst"]["Default"]) == (
        100,
        200,
    )
    settings = template["Resources"]["HttpApi"]["Properties"]["DefaultRouteSettings"]
    assert settings == {
        "ThrottlingBurstLimit": {"Ref": "ApiThrottleBurst"},
        "ThrottlingRateLimit": {"Ref": "ApiThrottleRate"},
    }


def test_every_function_logs_to_a_group_with_the_retention_parameter(
    template: dict[str, Any],
) -> None:
    assert template["Parameters"]["LogRetentionDays"]["Default"] == 400
    groups = _resources(template, "AWS::Logs::LogGroup")
    named = {g["Properties"].get("LogGroupName", {}).get("Fn::Sub"): g for g in groups.values()}
    functions = _resources(template, "AWS::Serverless::Function") | _resources(
        template, "AWS::Lambda::Function"
    )
    for name, function in functions.items():
        # Lambda writes to /aws/lambda/<function name>; the group exists before it does.
        group = named[f"/aws/lambda/${{{name}}}"]
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
        assert group.get("Condition") == function.get("Condition"), name
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_the_api_writes_access_logs(template: dict[str, Any]) -> None:
    settings = template["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    fields = json.loads(settings["Format"])
    assert {"requestId", "ip", "routeKey", "status", "latencyMs"} <= set(fields)
    group = template["Resources"]["ApiAccessLogGroup"]["Properties"]
    assert "LogGroupName" not in group  # CloudFormation names it
    assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def _alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in _resources(template, "AWS::CloudWatch::Alarm").items()}


ALARM_TO_TOPIC = [
    {"Fn::If": ["HasAlarmTopic", {"Ref": "AlarmTopicArn"}, {"Ref": "LedgerTamperedTopic"}]}
]


def test_every_alarm_notifies_the_alarm_topic(template: dict[str, Any]) -> None:
    assert template["Parameters"]["AlarmTopicArn"]["Default"] == ""
    assert template["Conditions"]["HasAlarmTopic"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]
    }
    for name, alarm in _alarms(template).items():
        if name != "LedgerTamperedAlarm":
            assert alarm["AlarmActions"] == ALARM_TO_TOPIC, name
    output = template["Outputs"]["AlarmTopic"]["Value"]
    assert output == ALARM_TO_TOPIC[0]


def _metrics_the_code_publishes() -> set[str]:
    """Metric names the domain code passes to services.metric or metrics.add_metric."""
    names: set[str] = set()
    for path in (REPO / "layers/claros_common/claros").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"metric", "add_metric"}
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(str(node.args[0].value))
    return names


def test_alarms_watch_metrics_the_code_publishes(template: dict[str, Any]) -> None:
    alarms = _alarms(template)
    published = _metrics_the_code_publishes()
    service = template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    claros = {a["MetricName"]: a for a in alarms.values() if a["Namespace"] == "Claros"}
    assert {"CheckpointSignFailed", "CheckpointLagSeconds", "LedgerTampered"} <= set(claros)
    for metric, alarm in claros.items():
        assert metric in published, metric
        assert alarm["Dimensions"] == [{"Name": "service", "Value": service}]
    failed = claros["CheckpointSignFailed"]
    assert (failed["Statistic"], failed["Threshold"]) == ("Maximum", 1)
    lag = claros["CheckpointLagSeconds"]
    assert lag["Statistic"] == "Maximum"
    assert lag["Threshold"] == {"Ref": "CheckpointLagAlarmSeconds"}
    assert lag["ComparisonOperator"] == "GreaterThanThreshold"
    # The schedule publishes the lag every minute; silence means it stopped signing.
    assert lag["TreatMissingData"] == "breaching"


def test_every_function_has_error_and_throttle_alarms(template: dict[str, Any]) -> None:
    alarms = _alarms(template)
    watched = {
        (a["MetricName"], a["Dimensions"][0]["Value"]["Ref"])
        for a in alarms.values()
        if a["Namespace"] == "AWS/Lambda"
    }
    for name in _resources(template, "AWS::Serverless::Function"):
        assert {("Errors", name), ("Throttles", name)} <= watched, name
    [api] = [a for a in alarms.values() if a["Namespace"] == "AWS/ApiGateway"]
    assert api["MetricName"] == "5xx"
    assert api["Dimensions"] == [{"Name": "ApiId", "Value": {"Ref": "HttpApi"}}]


def test_failed_stream_batches_go_to_a_queue(template: dict[str, Any]) -> None:
    events = template["Resources"]["CheckpointFunction"]["Properties"]["Events"]
    streams = {k: e for k, e in events.items() if e["Type"] == "DynamoDB"}
    assert set(streams) == {"LedgerStream", "RecordsStream"}
    for stream in streams.values():
        assert stream["Properties"]["DestinationConfig"] == {
            "OnFailure": {
                "Type": "SQS",
                "Destination": {"Fn::GetAtt": ["StreamFailureQueue", "Arn"]},
            }
        }
    queue = template["Resources"]["StreamFailureQueue"]["Properties"]
    assert "QueueName" not in queue and queue["SqsManagedSseEnabled"] is True
    # The signer role sends there by the queue's policy: the role's own policy is unchanged.
    [grant] = template["Resources"]["StreamFailureQueuePolicy"]["Properties"]["PolicyDocument"][
        "Statement"
    ]
    assert grant["Principal"] == {"AWS": {"Fn::GetAtt": ["LedgerSignerRole", "Arn"]}}
    assert grant["Action"] == "sqs:SendMessage"
    [alarm] = [a for a in _alarms(template).values() if a["Namespace"] == "AWS/SQS"]
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["StreamFailureQueue", "QueueName"]}}
    ]


def test_the_export_bucket_on_delete_is_a_parameter(template: dict[str, Any]) -> None:
    param = template["Parameters"]["ExportBucketOnDelete"]
    assert (param["Default"], param["AllowedValues"]) == ("Retain", ["Retain", "Delete"])
    bucket = template["Resources"]["ExportBucket"]
    # CloudFormation itself never deletes the bucket (it would fail on a non-empty one) ...
    assert bucket["DeletionPolicy"] == "Retain"
    # ... with Delete, the emptier empties and deletes it, after the export function is gone:
    # the function takes the bucket's name from the emptier, so it is deleted first.
    assert template["Conditions"]["DeleteExportBucket"] == {
        "Fn::Equals": [{"Ref": "ExportBucketOnDelete"}, "Delete"]
    }
    emptier = template["Resources"]["ExportBucketEmptier"]
    assert emptier["Condition"] == "DeleteExportBucket"
    bucket_env = template["Resources"]["ExportFunction"]["Properties"]["Environment"]
    _, via_emptier, _ = bucket_env["Variables"]["CLAROS_EXPORT_BUCKET"]["Fn::If"]
    assert via_emptier == {"Fn::GetAtt": ["ExportBucketEmptier", "Bucket"]}
    assert emptier["Properties"]["Bucket"] == {"Ref": "ExportBucket"}
    for name in ("ExportBucketEmptierFunction", "ExportBucketEmptierRole"):
        assert template["Resources"][name]["Condition"] == "DeleteExportBucket"
    code = template["Resources"]["ExportBucketEmptierFunction"]["Properties"]["Code"]["ZipFile"]
    compile(code, "emptier", "exec")  # the inline code is Python


def test_the_emptier_empties_and_deletes_the_bucket_only_on_delete(
    moto_aws: None, monkeypatch: pytest.MonkeyPatch, template: dict[str, Any]
) -> None:
    import boto3

    code = template["Resources"]["ExportBucketEmptierFunction"]["Properties"]["Code"]["ZipFile"]
    sent: list[str] = []
    answered: list[Any] = []

    def send(event: Any, context: Any, status: str, data: Any) -> None:
        sent.append(status)
        answered.append(data)

    cfnresponse = SimpleNamespace(SUCCESS="SUCCESS", FAILED="FAILED", send=send)
    monkeypatch.setitem(sys.modules, "cfnresponse", cfnresponse)
    namespace: dict[str, Any] = {}
    exec(compile(code, "emptier", "exec"), namespace)  # noqa: S102 - the template's own code
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="exports")
    # The stack's status as CloudFormation reports it to the emptier (moto's CloudFormation
    # deletes a stack at once, so it never reports DELETE_IN_PROGRESS).
    status = {"StackStatus": "UPDATE_IN_PROGRESS"}
    client = boto3.client

    def clients(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "cloudformation":
            return SimpleNamespace(describe_stacks=lambda StackName: {"Stacks": [status]})
        return client(name, *args, **kwargs)

    monkeypatch.setattr(boto3, "client", clients)
    for i in range(3):
        s3.put_object(Bucket="exports", Key=f"exports/{i}.json", Body=b"{}")
    props = {"ResourceProperties": {"Bucket": "exports"}, "StackId": "arn:stack/claros/1"}
    namespace["handler"]({"RequestType": "Update", **props}, None)
    assert s3.list_objects_v2(Bucket="exports")["KeyCount"] == 3
    # ExportBucketOnDelete back to Retain removes the emptier from a stack that stays.
    namespace["handler"]({"RequestType": "Delete", **props}, None)
    assert s3.list_objects_v2(Bucket="exports")["KeyCount"] == 3
    status["StackStatus"] = "DELETE_IN_PROGRESS"
    namespace["handler"]({"RequestType": "Delete", **props}, None)
    assert "exports" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    namespace["handler"]({"RequestType": "Delete", **props}, None)  # already gone: fine
    assert sent == ["SUCCESS"] * 4
    # The bucket's name, which the export function's environment takes from the emptier.
    assert answered == [{"Bucket": "exports"}] * 4


def test_the_emptier_reports_a_failure_to_cloudformation(
    moto_aws: None, monkeypatch: pytest.MonkeyPatch, template: dict[str, Any]
) -> None:
    import boto3

    code = template["Resources"]["ExportBucketEmptierFunction"]["Properties"]["Code"]["ZipFile"]
    sent: list[str] = []
    cfnresponse = SimpleNamespace(
        SUCCESS="SUCCESS", FAILED="FAILED", send=lambda e, c, status, data: sent.append(status)
    )
    monkeypatch.setitem(sys.modules, "cfnresponse", cfnresponse)
    namespace: dict[str, Any] = {}
    exec(compile(code, "emptier", "exec"), namespace)  # noqa: S102 - the template's own code
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="exports")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("AccessDenied")

    deleting = {"Stacks": [{"StackStatus": "DELETE_IN_PROGRESS"}]}
    stacks = SimpleNamespace(describe_stacks=lambda StackName: deleting)
    monkeypatch.setattr(boto3, "client", lambda name: stacks)
    monkeypatch.setattr(boto3, "resource", refuse)
    event = {"RequestType": "Delete", "ResourceProperties": {"Bucket": "exports"}, "StackId": "x"}
    namespace["handler"](event, None)
    assert sent == ["FAILED"]  # the stack's delete stops and says so; nothing is skipped
