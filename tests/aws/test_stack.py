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
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import VerifyKey

from claros.api.app import FUNCTIONS, build_resolver
from claros.api.http import PERMISSIONS, PUBLIC
from claros.config import Settings
from claros.evidence.report import verify_signed_report
from claros.ledger import PublicKey, checkpoint_message
from claros.store.base import Store
from claros.store.dynamo import record_key
from claros.wiring import build_services
from claros_guard.verify import main as verify
from tests.api.seed import Clock, install_clock, utc_ms
from tests.aws import load_template
from tests.events import KEY_PLACEHOLDER, event_names, events_in_order, load_event, route_of
from tests.stack import (
    PERSON,
    WS,
    Functions,
    Json,
    Keys,
    LambdaContext,
    Stack,
    code_name,
    deploy,
    header,
    ledger_item,
    ledger_lines,
    run_check,
    translate,
)

pytestmark = [
    # moto's CloudFormation makes no API Gateway v2 resources (API, stage) and warns so; the
    # routes themselves are checked against the code below, without moto.
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..ApiGatewayV2..:UserWarning"),
    # Nor the alarms, nor the stream failure queue's policy; the template test checks them
    # as written.
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..CloudWatch..Alarm:UserWarning"),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS..SQS..QueuePolicy:UserWarning"),
    # lambda_entry.py's Metrics publish nothing on an API request, and Powertools warns
    # about it on every request. Drop this filter once the handler publishes a metric there.
]


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
    records = boto3.client("dynamodb").describe_table(TableName=stack.physical["RecordsTable"])
    assert sorted((m["FunctionArn"], m["EventSourceArn"]) for m in mappings) == sorted(
        [
            (checkpoint_arn, ledger["Table"]["LatestStreamArn"]),
            (checkpoint_arn, records["Table"]["LatestStreamArn"]),
        ]
    )
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
    check_id = run_check(functions, keys.agent)
    row = dynamodb_client.get_item(
        TableName=stack.physical["RecordsTable"],
        Key=record_key(WS, "check", check_id),  # spread over the workspace's partitions
    )
    assert "Item" in row, "the check's row is not in the stack's records table"
    entry = ledger_item(dynamodb_client, stack, 1)
    assert entry["kind"] == {"S": "check"} and entry["ref_id"] == {"S": check_id}
    record = store.get_record(WS, "check", check_id)
    assert record is not None and record["on_behalf_of"] == PERSON


def test_a_bad_key_is_refused_by_the_real_handler(functions: Functions, keys: Keys) -> None:
    status, body = functions.http("check", load_event("check-check", "ck_" + "x" * 43))
    assert status == 401 and body["error"] == "unauthorized", body
    unfilled = load_event("check-check")  # the placeholder as it is in the file
    assert functions.http("check", unfilled)[0] == 401


def test_outcome_is_recorded_once(functions: Functions, keys: Keys) -> None:
    check_id = run_check(functions, keys.agent)
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
    check_id = run_check(functions, keys.agent)
    outcome = load_event("outcome-check-outcome", keys.agent, check_id=check_id)
    assert functions.http("outcome", outcome)[0] == 201
    response = functions.invoke("evidence", load_event("evidence-entries", keys.admin))
    assert response["statusCode"] == 200
    assert header(response, "content-type") == "application/x-ndjson"
    lines = ledger_lines(functions, keys.admin)
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
    lines = ledger_lines(functions, keys.admin)
    assert "rule_version" in {e["kind"] for e in lines}
    assert functions.http("admin", load_event("admin-edit-rule", keys.agent))[0] == 403


def test_every_sample_event_is_served_as_it_is(functions: Functions, keys: Keys) -> None:
    """Each HTTP sample, with an admin's key, reaches its route and passes its body's
    validation: ids that name nothing give 404 or 409, never 400 or 500. The samples fit
    together: the mapping's read tool is the one the tool list registers, first, and the
    app is removed last."""
    seen = 0
    for name in events_in_order():
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
    stack: Stack, functions: Functions, keys: Keys
) -> None:
    import boto3

    empty = functions.http("checkpoint", load_event("checkpoint-checkpoint-now", keys.admin))
    assert empty[0] == 409, empty
    run_check(functions, keys.agent)
    status, cp = functions.http("checkpoint", load_event("checkpoint-checkpoint-now", keys.admin))
    assert status == 201, cp
    assert cp["seq"] == 1 and cp["workspace"] == WS
    _verify_checkpoint(functions, keys.agent, cp)
    kms = boto3.client("kms")
    # The stack's own alias: aliases are the account's, so each stack has its prefix.
    assert (
        stack.env("checkpoint")["CLAROS_KMS_ALIAS_PREFIX"] == f"alias/claros/{stack.name}/ledger-"
    )
    meta = kms.describe_key(KeyId=f"alias/claros/{stack.name}/ledger-{WS}")["KeyMetadata"]
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
    run_check(functions, keys.agent)
    run_check(functions, keys.agent)
    batch = _stream_batch(stack, stream_batches)
    ledger_arn = dynamodb_client.describe_table(TableName=stack.physical["LedgerTable"])
    sample = load_event("checkpoint-stream")["Records"][0]
    assert [int(r["dynamodb"]["NewImage"]["seq"]["N"]) for r in batch["Records"]] == [1, 2]
    for record in batch["Records"]:
        # What the stream carries is what the ledger table holds, in the sample's shape.
        assert record["eventName"] == "INSERT" and record["eventSource"] == "aws:dynamodb"
        assert record["eventSourceARN"] == ledger_arn["Table"]["LatestStreamArn"]
        image = record["dynamodb"]["NewImage"]
        assert image == ledger_item(dynamodb_client, stack, int(image["seq"]["N"]))
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
    run_check(functions, keys.agent)
    assert functions.invoke("checkpoint", _stream_batch(stack, stream_batches)) == {"signed": []}
    # A batch with no records (a filtered-out batch, a hand-made invoke) signs nothing: it
    # is no API request, and must not be served as one.
    assert functions.invoke("checkpoint", {"Records": []}) == {"signed": []}


def test_schedule_signs_the_tail_once_it_is_old(
    stack: Stack, functions: Functions, keys: Keys, stream_batches: list[tuple[str, Json]]
) -> None:
    import boto3

    run_check(functions, keys.agent)
    run_check(functions, keys.agent)
    assert functions.invoke("checkpoint", _stream_batch(stack, stream_batches)) == {"signed": [2]}
    rule = boto3.client("events").describe_rule(Name=stack.physical["CheckpointFunctionSchedule"])
    tick = load_event("checkpoint-schedule")
    tick["resources"] = [rule["Arn"]]
    started = time.monotonic()
    run_check(functions, keys.agent)  # seq 3: one past the last checkpoint, fresh
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
        name = code_name(resource["Properties"]["CodeUri"])
        events = resource["Properties"].get("Events", {})
        if name == "authorizer":  # serves no route: in front of them (test_authorizer.py)
            continue
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
        for k, r in cfn["Resources"].items()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["Principal"] == "apigateway.amazonaws.com"
        and not k.endswith("AuthorizerPermission")  # test_authorizer.py checks those
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
            # A greedy parameter ({proxy+}) arrives named without its "+".
            assert path.replace("+}", "}").format_map(params) == event["rawPath"], file
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
        run_check(functions, keys.agent)
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
    # The month the pinned clock is in, read off that clock (never today's month).
    month = time.strftime("%Y-%m", time.gmtime(mid_november.ms / 1000))
    event["queryStringParameters"]["month"] = month
    status, signed = functions.http("export", event)
    assert status == 200, signed
    assert verify_signed_report(signed, _keys(functions, keys.admin)) == []
    assert signed["report"]["rules"][0]["id"] == rule["id"]


def test_retention_and_prune_run_in_the_prune_function(functions: Functions, keys: Keys) -> None:
    run_check(functions, keys.agent)
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


def test_two_stacks_deploy_side_by_side_in_one_region(
    dynamodb_client: Any, kms_ed25519: Any, stream_batches: list[tuple[str, Json]]
) -> None:
    """No physical name is fixed: a second stack in the same account and region deploys
    (IAM role names are account-wide, so they carry the stack's name and its region)."""
    import boto3

    first = deploy(load_template(), "claros-one")
    second = deploy(load_template(), "claros-two")
    assert first.physical["LedgerPruneRole"] == "claros-one-us-east-1-prune"
    assert second.physical["LedgerSignerRole"] == "claros-two-us-east-1-signer"
    shared = set(first.physical) & set(second.physical)
    assert {"LedgerTable", "ExportBucket", "CheckFunction", "StreamFailureQueue"} <= shared
    for logical_id in shared:
        assert first.physical[logical_id] != second.physical[logical_id], logical_id
    # Each function's log group is its own, with the retention the parameter gives.
    logs = boto3.client("logs")
    for stack in (first, second):
        name = f"/aws/lambda/{stack.physical['CheckFunction']}"
        [group] = logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]
        assert group["retentionInDays"] == int(stack.parameters["LogRetentionDays"])
    # The ledger table's policy names each stack's own prune role, and each signer's env
    # names its own signer role.
    assert second.env("checkpoint")["CLAROS_KMS_SIGNER_ROLE_ARN"].endswith(
        ":role/claros-two-us-east-1-signer"
    )


def test_an_overloaded_ledger_is_a_503_and_the_overloaded_metric(
    functions: Functions, keys: Keys, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from claros.store.base import ChainBusyError
    from claros.store.dynamo import DynamoStore

    def busy(*_: Any, **__: Any) -> Any:
        raise ChainBusyError("the chain head of 'acme' kept moving; gave up after 20 attempts")

    monkeypatch.setattr(DynamoStore, "append_many", busy)
    capsys.readouterr()
    status, body = functions.http("check", load_event("check-check", keys.agent))
    assert status == 503 and "the ledger is busy" in body["message"]
    # Powertools writes the metrics as an EMF line on stdout (CloudWatch reads it there).
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    assert any(m.get("Overloaded") == [1.0] or m.get("Overloaded") == 1.0 for m in metrics), metrics


def test_two_stacks_in_one_region_sign_with_their_own_keys(
    dynamodb_client: Any,
    kms_ed25519: Any,
    stream_batches: list[tuple[str, Json]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """KMS aliases are the account's, per region: with one alias per workspace, the second
    stack would find the first stack's key, whose policy lets only the first stack's signer
    role sign. Each stack names its own aliases, so both sign, each with its own key, and
    each checkpoint verifies against its own stack's public key."""
    import boto3

    from claros.auth import create_key

    kms = boto3.client("kms")
    signed: dict[str, str] = {}
    for name in ("claros-one", "claros-two"):
        stack = deploy(load_template(), name)
        store = stack.store(dynamodb_client)
        admin = create_key(store, WS, "admin", person="admin@acme.test")
        agent = create_key(store, WS, "agent", person=PERSON)
        functions = Functions(stack, monkeypatch)
        run_check(functions, agent)
        status, cp = functions.http("checkpoint", load_event("checkpoint-checkpoint-now", admin))
        assert status == 201, (name, cp)
        _verify_checkpoint(functions, agent, cp)
        alias = f"alias/claros/{name}/ledger-{WS}"
        signed[name] = kms.describe_key(KeyId=alias)["KeyMetadata"]["KeyId"]
        policy = json.loads(kms.get_key_policy(KeyId=signed[name], PolicyName="default")["Policy"])
        signers = [
            s["Principal"]["AWS"] for s in policy["Statement"] if "kms:Sign" in s.get("Action", [])
        ]
        assert signers == [f"arn:aws:iam::123456789012:role/{name}-us-east-1-signer"], signers
        store.close()
    assert signed["claros-one"] != signed["claros-two"]
