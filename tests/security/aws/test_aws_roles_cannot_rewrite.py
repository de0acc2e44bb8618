"""THREATS.md §3: a compromised internet-facing function (or its role) in AWS.

The attacker holds exactly the IAM permissions template.yaml gives the check, outcome,
evidence and admin functions. Each test deploys the translated template into moto and runs
only the calls tests/iam.py says the role may make (moto does not enforce IAM itself), then
shows the rewrite refused, or detected: a ``LedgerTampered`` metric, a tampering record that
verify reports, and no more signing for the workspace until an admin acknowledges it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from claros.canonical import canonical_bytes
from claros.ledger import ZERO_HASH, Entry, checkpoint_message
from claros.store.dynamo import record_key
from claros_guard.verify import main as verify
from tests.aws import load_template
from tests.events import load_event
from tests.iam import (
    ACCOUNT,
    REGION,
    GatedDynamoDB,
    GatedKms,
    Request,
    allowed,
    role_of,
    role_statements,
)
from tests.stack import (
    STACK_WARNINGS,
    WS,
    Functions,
    Json,
    Keys,
    Stack,
    run_check,
    translate,
)

pytestmark = STACK_WARNINGS

# The functions that serve requests and must not be able to rewrite anything.
REQUEST_SERVING = ("CheckFunction", "OutcomeFunction", "EvidenceFunction", "AdminFunction")
SIGNER = "CheckpointFunction"


@dataclass
class World:
    stack: Stack
    functions: Functions
    keys: Keys
    batches: list[tuple[str, Json]]
    client: Any  # moto DynamoDB, unrestricted (the test's own view)
    kms: Any
    monkeypatch: pytest.MonkeyPatch

    def arns(self) -> dict[str, str]:
        # The stack's name too: the signer role's alias resources are named under it.
        out: dict[str, str] = {"AWS::StackName": self.stack.name}
        for logical_id, resource in self.stack.cfn["Resources"].items():
            physical = self.stack.physical.get(logical_id, logical_id)
            out[logical_id] = physical
            kind = resource["Type"]
            if kind == "AWS::DynamoDB::Table":
                out[f"{logical_id}.Arn"] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{physical}"
                out[f"{logical_id}.StreamArn"] = out[f"{logical_id}.Arn"] + "/stream/*"
            elif kind == "AWS::S3::Bucket":
                out[f"{logical_id}.Arn"] = f"arn:aws:s3:::{physical}"
            elif kind == "AWS::IAM::Role":
                out[f"{logical_id}.Arn"] = f"arn:aws:iam::{ACCOUNT}:role/{physical}"
            elif kind == "AWS::Lambda::Function":
                out[f"{logical_id}.Arn"] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{physical}"
        return out

    def conditions(self) -> dict[str, bool]:
        return {name: self.stack.condition(name) for name in self.stack.cfn.get("Conditions", {})}

    def statements(self, function: str) -> list[Json]:
        return role_statements(self.stack.cfn, function, self.arns(), self.conditions())

    def role_arn(self, function: str) -> str:
        return self.arns()[f"{role_of(self.stack.cfn, function)}.Arn"]

    def as_role(self, function: str) -> GatedDynamoDB:
        """The function's role, called from the function's code (lambda:SourceFunctionArn)."""
        source = {"lambda:SourceFunctionArn": [self.arns()[f"{function}.Arn"]]}
        return GatedDynamoDB(self.client, self.statements(function), source)

    def table(self, logical_id: str) -> str:
        return self.stack.physical[logical_id]

    def stream(self) -> Json:
        """The stream records moto's event source mappings handed to Lambda, one batch."""
        records = [r for _, event in self.batches for r in event["Records"]]
        self.batches.clear()
        return {"Records": records}

    def checkpoints(self) -> list[Json]:
        status, body = self.functions.http(
            "evidence", load_event("evidence-checkpoints", self.keys.admin)
        )
        assert status == 200, body
        return list(body["checkpoints"])

    def verify_report(self) -> Json:
        status, body = self.functions.http(
            "evidence", load_event("evidence-verify", self.keys.admin)
        )
        assert status == 200, body
        return dict(body)


@pytest.fixture
def world(
    request: pytest.FixtureRequest, dynamodb_client: Any, monkeypatch: pytest.MonkeyPatch
) -> World:
    return World(
        stack=request.getfixturevalue("stack"),
        functions=request.getfixturevalue("functions"),
        keys=request.getfixturevalue("keys"),
        batches=request.getfixturevalue("stream_batches"),
        client=dynamodb_client,
        kms=request.getfixturevalue("kms_ed25519"),
        monkeypatch=monkeypatch,
    )


def _seed(world: World, checks: int = 3) -> None:
    """A few checks, and the stream's checkpoint at every 2nd entry signed."""
    for _ in range(checks):
        run_check(world.functions, world.keys.agent)
    world.functions.invoke("checkpoint", world.stream())
    assert [cp["seq"] for cp in world.checkpoints()] == [2]


def _ledger(world: World) -> list[Json]:
    got = world.client.query(
        TableName=world.table("LedgerTable"),
        KeyConditionExpression="workspace = :w",
        ExpressionAttributeValues={":w": {"S": WS}},
        ConsistentRead=True,
    )
    return list(got["Items"])


def _entry(item: Json) -> Entry:
    return Entry(
        item["workspace"]["S"], int(item["seq"]["N"]), item["kind"]["S"], item["ref_id"]["S"],
        int(item["ts"]["N"]), item["payload_sha256"]["S"], item["prev_hash"]["S"],
        item["hash"]["S"],
    )  # fmt: skip


def _item(entry: Entry) -> Json:
    return {
        "workspace": {"S": entry.workspace}, "seq": {"N": str(entry.seq)},
        "kind": {"S": entry.kind}, "ref_id": {"S": entry.ref_id}, "ts": {"N": str(entry.ts)},
        "payload_sha256": {"S": entry.payload_sha256}, "prev_hash": {"S": entry.prev_hash},
        "hash": {"S": entry.hash},
    }  # fmt: skip


def tampering_ids(world: World, role: Any) -> list[str]:
    """The ids of the workspace's tampering records, as ``role``'s client reads them (a
    Query on the state table, which every request role may run); at least one."""
    found = role.query(
        TableName=world.table("StateTable"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"{WS}#tampering"}},
        ConsistentRead=True,
    )["Items"]
    ids = [item["sk"]["S"] for item in found]
    assert ids, "no tampering recorded"
    return ids


def rewrite_entry_3(world: World, role: Any) -> None:
    """The rewrite IAM cannot refuse, above the last checkpoint (seq 2), with ``role``'s
    client: the record of entry 3 now says "allow", and entry 3 is re-chained over it
    (MODIFYs on both streams, which the checkpoint function reads as tampering)."""
    [second, third] = [_entry(i) for i in _ledger(world) if i["seq"]["N"] in ("2", "3")]
    forged_body = canonical_bytes({"forged": True, "result": "allow"})
    key = record_key(WS, third.kind, third.ref_id)
    old = world.client.get_item(TableName=world.table("RecordsTable"), Key=key)["Item"]
    role.put_item(
        TableName=world.table("RecordsTable"),
        Item=old | {"body": {"B": zlib.compress(forged_body)}},
    )
    forged = Entry.build(
        WS, third.seq, third.kind, third.ref_id, third.ts, {}, second.hash,
        payload=hashlib.sha256(forged_body).hexdigest(),
    )  # fmt: skip
    role.put_item(TableName=world.table("LedgerTable"), Item=_item(forged))


@dataclass
class Attempt:
    what: str
    refused: bool


def _try(attempts: list[Attempt], what: str, call: Callable[[], Any]) -> None:
    try:
        call()
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AccessDeniedException", exc
        attempts.append(Attempt(what, True))
    else:
        attempts.append(Attempt(what, False))


def _rewrite(world: World, client: Any) -> list[Attempt]:
    """The rewrite that worked on the old template: the first check's record says "stop"
    instead of what it said, every entry is re-chained over it, the head moved to the forged
    chain, the checkpoints and public keys that would show it deleted."""
    attempts: list[Attempt] = []
    items = _ledger(world)
    ledger, records, state = (world.table(t) for t in ("LedgerTable", "RecordsTable", "StateTable"))
    first = _entry(items[0])
    forged_body = canonical_bytes({"forged": True, "result": "stop"})
    _try(attempts, "overwrite the first record", lambda: client.put_item(
        TableName=records,
        Item={"workspace": {"S": WS}, "rid": {"S": f"{first.kind}#{first.ref_id}"},
              "seq": {"N": str(first.seq)}, "body": {"B": zlib.compress(forged_body)}},
    ))  # fmt: skip
    prev = ZERO_HASH
    forged: list[Entry] = []
    for item in items:
        old = _entry(item)
        entry = Entry.build(
            WS, old.seq, old.kind, old.ref_id, old.ts, {}, prev,
            payload=(
                hashlib.sha256(forged_body).hexdigest()
                if old.seq == first.seq else old.payload_sha256
            ),
        )  # fmt: skip
        forged.append(entry)
        prev = entry.hash
        _try(attempts, f"overwrite entry {old.seq}", lambda e=entry: client.put_item(
            TableName=ledger, Item=_item(e)))  # fmt: skip
    head = forged[-1]
    _try(attempts, "move the chain head", lambda: client.put_item(
        TableName=state,
        Item={"pk": {"S": f"{WS}#head"}, "sk": {"S": "head"}, "seq": {"N": str(head.seq)},
              "hash": {"S": head.hash}, "entry": {"S": json.dumps(head.to_json())}},
    ))  # fmt: skip
    for cp in world.checkpoints():
        _try(attempts, f"delete the checkpoint at {cp['seq']}", lambda cp=cp: client.delete_item(
            TableName=state,
            Key={"pk": {"S": f"{WS}#checkpoint"}, "sk": {"S": f"{cp['seq']:020d}"}},
        ))  # fmt: skip
    _try(attempts, "forge a public key", lambda: client.put_item(
        TableName=state,
        Item={"pk": {"S": f"{WS}#pubkey"}, "sk": {"S": "ed25519:forged"},
              "workspace": {"S": WS}, "key_id": {"S": "ed25519:forged"},
              "public_key": {"S": base64.b64encode(b"k" * 32).decode()},
              "created_at": {"N": "1"}, "algorithm": {"S": "ed25519"}},
    ))  # fmt: skip
    _try(attempts, "delete an entry", lambda: client.delete_item(
        TableName=ledger, Key={"workspace": {"S": WS}, "seq": {"N": "1"}}))  # fmt: skip
    _try(attempts, "update an entry", lambda: client.update_item(
        TableName=ledger, Key={"workspace": {"S": WS}, "seq": {"N": "1"}},
        UpdateExpression="SET kind = :k", ExpressionAttributeValues={":k": {"S": "x"}},
    ))  # fmt: skip
    return attempts


def _tampered_metric(out: str) -> float:
    """The LedgerTampered count the handlers published (Powertools writes EMF to stdout)."""
    total = 0.0
    for line in out.splitlines():
        if line.startswith("{") and '"LedgerTampered"' in line:
            value = json.loads(line)["LedgerTampered"]
            total += sum(value) if isinstance(value, list) else value
    return total


def _export_verifies(world: World, tmp_path: Path) -> int:
    import boto3

    status, body = world.functions.http(
        "export", load_event("export-export-evidence", world.keys.admin)
    )
    if status != 200:
        return -status  # the export refused (signing stopped): nothing an auditor could trust
    data = boto3.client("s3").get_object(Bucket=world.table("ExportBucket"), Key=body["key"])
    path = tmp_path / "export.jsonl"
    path.write_bytes(data["Body"].read())
    return verify(["--export", str(path)])


# --- the attacks -------------------------------------------------------------------------
def test_check_role_cannot_overwrite_a_ledger_entry(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)
    attempts = _rewrite(world, world.as_role("CheckFunction"))
    by = {a.what: a.refused for a in attempts}
    assert by["delete an entry"] and by["update an entry"]
    # IAM cannot make a PutItem conditional, so an overwrite of an entry may land; it must
    # then be seen on the stream at once.
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    assert _tampered_metric(capsys.readouterr().out) >= 1
    report = world.verify_report()
    assert report["ok"] is False
    assert report["tampering"], report


def test_check_role_cannot_move_the_chain_head(world: World) -> None:
    _seed(world)
    attempts = _rewrite(world, world.as_role("CheckFunction"))
    refused = {a.what for a in attempts if a.refused}
    assert {"move the chain head", "forge a public key"} <= refused
    assert {f"delete the checkpoint at {cp['seq']}" for cp in world.checkpoints()} <= refused
    assert [cp["seq"] for cp in world.checkpoints()] == [2]


def test_the_rewrite_with_each_request_roles_permissions_is_refused_or_detected(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The replay: for each request-serving role, exactly what the template grants it."""
    _seed(world)
    for function in REQUEST_SERVING:
        attempts = _rewrite(world, world.as_role(function))
        landed = [a.what for a in attempts if not a.refused]
        assert all(w.startswith(("overwrite entry", "overwrite the first")) for w in landed), (
            function, landed,
        )  # fmt: skip
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    tick = load_event("checkpoint-schedule")
    signed = world.functions.invoke("checkpoint", tick)
    assert signed == {"signed": []}, "the heartbeat signed the forged head"
    detected = _tampered_metric(capsys.readouterr().out) >= 1
    assert detected and world.verify_report()["ok"] is False
    assert _export_verifies(world, tmp_path) != 0


def test_request_roles_still_do_their_work(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The narrowed policies are enough: each handler runs with only its role's calls."""
    roles = {"check": "CheckFunction", "outcome": "OutcomeFunction",
             "evidence": "EvidenceFunction", "admin": "AdminFunction"}  # fmt: skip
    for name, function in roles.items():
        gated = world.as_role(function)
        # The handler builds its services on its first call: with the gated client.
        monkeypatch.setattr("claros.wiring._dynamodb", lambda g=gated: g)
        if name == "check":
            check_id = run_check(world.functions, world.keys.agent)
        elif name == "outcome":
            event = load_event("outcome-check-outcome", world.keys.agent, check_id=check_id)
            assert world.functions.http("outcome", event)[0] == 201
        elif name == "evidence":
            assert world.verify_report()["ok"] is True
        else:
            assert (
                world.functions.http("admin", load_event("admin-edit-rule", world.keys.admin))[0]
                == 200
            )
        assert not gated.refused, (function, gated.refused)


def test_checkpoint_function_does_not_sign_a_forged_head(world: World) -> None:
    _seed(world)
    # An entry appended (INSERT, not a rewrite) whose payload hash is not its record's.
    head = _entry(_ledger(world)[-1])
    bogus = Entry.build(WS, head.seq + 1, "check", "chk_forged", head.ts + 1,
                        {"result": "allow"}, head.hash)  # fmt: skip
    world.client.put_item(TableName=world.table("LedgerTable"), Item=_item(bogus))
    world.client.put_item(
        TableName=world.table("RecordsTable"),
        Item={"workspace": {"S": WS}, "rid": {"S": "check#chk_forged"},
              "seq": {"N": str(bogus.seq)},
              "body": {"B": zlib.compress(canonical_bytes({"result": "stop"}))}},
    )  # fmt: skip
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503 and "seq 4" in body["message"], body
    assert world.functions.invoke("checkpoint", world.stream()) == {"signed": []}
    assert world.functions.invoke("checkpoint", load_event("checkpoint-schedule")) == {"signed": []}
    assert [cp["seq"] for cp in world.checkpoints()] == [2]


def test_made_up_stream_records_sign_nothing(world: World) -> None:
    _seed(world)
    made_up = load_event("checkpoint-stream")
    for record in made_up["Records"]:
        record["dynamodb"]["NewImage"]["workspace"] = {"S": WS}
        record["dynamodb"]["Keys"]["workspace"] = {"S": WS}
    # seq 2 exists, but not with this hash; seq 100 does not exist at all.
    made_up["Records"][0]["dynamodb"]["NewImage"]["seq"] = {"N": "2"}
    made_up["Records"][0]["dynamodb"]["Keys"]["seq"] = {"N": "2"}
    made_up["Records"][0]["dynamodb"]["NewImage"]["hash"] = {"S": "f" * 64}
    made_up["Records"][-1]["dynamodb"]["NewImage"]["seq"] = {"N": "100"}
    made_up["Records"][-1]["dynamodb"]["Keys"]["seq"] = {"N": "100"}
    assert world.functions.invoke("checkpoint", made_up) == {"signed": []}
    assert [cp["hash"] for cp in world.checkpoints()] != ["f" * 64]
    assert all(cp["hash"] != "f" * 64 for cp in world.checkpoints())


def test_modify_of_a_ledger_item_raises_ledger_tampered_and_stops_signing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)
    ledger = world.table("LedgerTable")
    [original] = [i for i in _ledger(world) if i["seq"]["N"] == "3"]
    world.client.put_item(TableName=ledger, Item=original | {"kind": {"S": "approval"}})
    world.client.put_item(TableName=ledger, Item=original)  # and put back: still tampering
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    assert _tampered_metric(capsys.readouterr().out) >= 1
    report = world.verify_report()
    assert report["ok"] is False
    [tamper] = [t for t in report["tampering"] if t["event"] == "MODIFY"][:1]
    assert tamper["acknowledged"] is None and tamper["key"]["seq"] == 3
    # Signing stops for the workspace: the route, the stream and the heartbeat.
    run_check(world.functions, world.keys.agent)  # seq 4, a multiple of 2
    assert world.functions.invoke("checkpoint", world.stream()) == {"signed": []}
    status, body = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 503 and "tamper" in body["message"], body
    # Only an admin acknowledges it, and the acknowledgement is itself a ledger entry.
    ack = load_event("admin-acknowledge-tampering", world.keys.agent, tamper_id=tamper["id"])
    assert world.functions.http("admin", ack)[0] == 403
    unknown = load_event("admin-acknowledge-tampering", world.keys.admin, tamper_id="tmp_none")
    assert world.functions.http("admin", unknown)[0] == 404
    for each in report["tampering"]:  # the change and the change back: two records
        ack = load_event("admin-acknowledge-tampering", world.keys.admin, tamper_id=each["id"])
        status, body = world.functions.http("admin", ack)
        assert status == 201, body
        assert world.functions.http("admin", ack)[0] == 409  # once
    kinds = [i["kind"]["S"] for i in _ledger(world)]
    assert kinds[-1] == "tampering_ack"
    status, cp = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 201, cp
    report = world.verify_report()
    assert report["ok"] is True, report
    assert report["tampering"][0]["acknowledged"]["by"]


def test_remove_outside_a_prune_is_tampering(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(world)
    world.client.delete_item(
        TableName=world.table("LedgerTable"), Key={"workspace": {"S": WS}, "seq": {"N": "1"}}
    )
    capsys.readouterr()
    world.functions.invoke("checkpoint", world.stream())
    assert _tampered_metric(capsys.readouterr().out) == 1
    [tamper] = world.verify_report()["tampering"]
    assert tamper["event"] == "REMOVE" and tamper["table"] == "ledger"


# --- the key ------------------------------------------------------------------------------
def _workspace_key(world: World) -> str:
    status, _ = world.functions.http(
        "checkpoint", load_event("checkpoint-checkpoint-now", world.keys.admin)
    )
    assert status == 201
    return str(
        world.kms.describe_key(KeyId=world.stack.env("checkpoint")["CLAROS_KMS_ALIAS_PREFIX"] + WS)[
            "KeyMetadata"
        ]["KeyId"]
    )


def _functions(world: World) -> list[str]:
    resources = world.stack.cfn["Resources"].items()
    return [k for k, r in resources if r["Type"] == "AWS::Lambda::Function"]


def test_only_the_checkpoint_role_may_sign(world: World) -> None:
    run_check(world.functions, world.keys.agent)
    key = _workspace_key(world)
    signers = {
        role_of(world.stack.cfn, f)
        for f in _functions(world)
        if GatedKms(world.kms, world.statements(f), world.role_arn(f)).may("Sign", key)
    }
    assert signers == {role_of(world.stack.cfn, SIGNER)}
    # A request-serving role's Sign is refused (the call is not made).
    gated = GatedKms(world.kms, world.statements("CheckFunction"), world.role_arn("CheckFunction"))
    with pytest.raises(ClientError, match="AccessDenied"):
        gated.sign(KeyId=key, Message=checkpoint_message(WS, 1, "0" * 64, 1),
                   MessageType="RAW", SigningAlgorithm="ED25519_SHA_512")  # fmt: skip


def test_no_role_can_tag_its_way_to_the_key(world: World) -> None:
    run_check(world.functions, world.keys.agent)
    key = _workspace_key(world)
    # Any key of the account, not made by Claros: tagging it must not make it usable.
    other = world.kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="ECC_NIST_EDWARDS25519")
    other_id = other["KeyMetadata"]["KeyId"]
    for function in _functions(world):
        gated = GatedKms(world.kms, world.statements(function), world.role_arn(function))
        tags = [{"TagKey": "claros:purpose", "TagValue": "ledger-checkpoint"},
                {"TagKey": "claros:workspace", "TagValue": WS}]  # fmt: skip
        for target in (key, other_id):
            try:
                gated.tag_resource(KeyId=target, Tags=tags)
            except ClientError:
                pass
            for action in ("ScheduleKeyDeletion", "PutKeyPolicy", "CreateGrant", "DisableKey"):
                assert not gated.may(action, target), (function, action, target)
        if function != SIGNER:
            assert not gated.may("Sign", other_id), function
    # No Allow anywhere rests on a tag a role could set itself.
    for function in _functions(world):
        for statement in world.statements(function):
            for names in statement.get("Condition", {}).values():
                assert not any(k.startswith("aws:ResourceTag/") for k in names), (
                    function,
                    statement,
                )


def test_anchoring_is_on_by_default(aws_env: None) -> None:
    sam = load_template()
    assert sam["Parameters"]["AnchorRetentionDays"]["Default"] == 400
    cfn, _ = translate(sam)
    defaults = {k: str(v.get("Default", "")) for k, v in sam["Parameters"].items()}
    assert Stack(sam, cfn, defaults, {}).condition("HasAnchor") is True
    props = sam["Resources"]["AnchorBucket"]["Properties"]
    assert props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]["Mode"] == "COMPLIANCE"


def test_the_evaluator_refuses_what_it_does_not_know() -> None:
    """tests/iam.py fails closed: an unknown condition operator is an error, not an allow."""
    statement = {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": "*",
                 "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2026-01-01"}}}  # fmt: skip
    with pytest.raises(AssertionError, match="DateGreaterThan"):
        allowed([statement], Request("dynamodb:PutItem", "arn:x"))
    only_docs = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["*#doc#*"]}}
    leading = {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": "*",
               "Condition": only_docs}  # fmt: skip
    assert allowed(
        [leading], Request("dynamodb:PutItem", "a", {"dynamodb:LeadingKeys": ["w#doc#x"]})
    )
    assert not allowed(
        [leading], Request("dynamodb:PutItem", "a", {"dynamodb:LeadingKeys": ["w#head"]})
    )


def test_an_acknowledgement_needs_a_note(world: World) -> None:
    ack = load_event("admin-acknowledge-tampering", world.keys.admin, tamper_id="tmp_x")
    ack["body"] = "{}"
    status, body = world.functions.http("admin", ack)
    assert status == 400 and "note" in body["message"], body


def test_the_prune_role_prunes_through_a_checkpoint_the_signer_signed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prune function signs nothing: it drops entries through the last checkpoint at or
    below its cut, once the checkpoint function signed its own prune entry (from the
    ledger's stream); until then it drops nothing and says so. (Changed with the prune
    entry covered at once: before, it dropped entries while its entry was unsigned.)"""
    from claros.evidence import retention
    from tests.api.seed import install_clock, utc_ms

    monkeypatch.setattr(retention, "COVER_WAIT_S", 0.0)  # no stream runs meanwhile here
    clock = install_clock(monkeypatch, utc_ms(2026, 1, 10, 12))
    _seed(world)  # checkpoint at 2 of 3 entries
    assert (
        world.functions.http("prune", load_event("prune-put-retention", world.keys.admin))[0] == 200
    )
    clock.at(utc_ms(2027, 6, 1, 12))  # every entry is older than a year now
    status, body = world.functions.http("prune", load_event("prune-prune", world.keys.admin))
    assert status == 200 and body["pruned"] is False, body
    assert "no signed checkpoint covers it" in body["message"]
    assert [cp["seq"] for cp in world.checkpoints()] == [2]  # the prune role signs nothing
    world.functions.invoke("checkpoint", world.stream())  # the prune entry, signed at once
    assert [cp["seq"] for cp in world.checkpoints()] == [2, body["prune_entry"]]
    status, body = world.functions.http("prune", load_event("prune-prune", world.keys.admin))
    assert status == 200 and body["pruned"] is True, body
    assert body["through_seq"] == 2 and body["checkpoint"]["seq"] == 2
    # The prune's deletes are accounted for: no tampering, and the chain verifies.
    world.functions.invoke("checkpoint", world.stream())
    report = world.verify_report()
    assert report["tampering"] == [] and report["ok"] is True, report
