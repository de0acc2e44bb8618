"""A small IAM policy evaluator for the AWS tests (not a test module).

moto does not enforce IAM by default, so the tests read each role's policies from the
translated template (and each KMS key's policy from moto) and decide every call with this:
explicit Deny wins, then any Allow, else the implicit deny. It knows Action / NotAction,
Resource, Principal, and the condition operators the template and the key policy use
(String*, Arn*, Null, ForAllValues:/ForAnyValue:). An operator it does not know fails the
test (fail closed), never a silent allow.

``Gated`` clients wrap a moto boto3 client: each call is turned into the IAM requests AWS
would authorize (a TransactWriteItems is one request per item, with its table's partition
key as ``dynamodb:LeadingKeys``), refused with AccessDeniedException when the role may not
make it, and only then run in moto.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

__all__ = [
    "ACCOUNT",
    "REGION",
    "GatedDynamoDB",
    "GatedKms",
    "Request",
    "allowed",
    "kms_allowed",
    "role_statements",
]

ACCOUNT = "123456789012"  # moto's account
REGION = "us-east-1"
Json = dict[str, Any]


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: Mapping[str, list[str]] = field(default_factory=dict)
    principal: str = ""


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _like(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern)


_SINGLE: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda p, v: p == v,
    "StringLike": _like,
    "ArnEquals": lambda p, v: p == v,
    "ArnLike": _like,
}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike",
            "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike"}  # fmt: skip


def _condition_holds(operator: str, key: str, patterns: list[str], ctx: Mapping[str, Any]) -> bool:
    values: list[str] | None = ctx.get(key)
    if operator == "Null":
        [want] = patterns
        return (values is None) == (str(want).lower() == "true")
    quantifier, _, op = operator.rpartition(":")
    negated = op in _NEGATED
    match = _SINGLE.get(_NEGATED.get(op, op))
    if match is None or quantifier not in ("", "ForAllValues", "ForAnyValue"):
        raise AssertionError(f"tests/iam.py does not know the condition operator {operator}")

    def hit(value: str) -> bool:
        found = any(match(str(p), value) for p in patterns)
        return not found if negated else found

    if quantifier == "ForAllValues":
        return all(hit(v) for v in values or [])  # vacuously true without the key, as AWS
    if values is None:
        return negated  # a missing key matches only the negated operators
    return any(hit(v) for v in values)


def _matches(statement: Json, request: Request) -> bool:
    if "NotAction" in statement:
        if any(_like(a, request.action) for a in _list(statement["NotAction"])):
            return False
    elif not any(_like(a, request.action) for a in _list(statement.get("Action", []))):
        return False
    if not any(_like(r, request.resource) for r in _list(statement.get("Resource", "*"))):
        return False
    if "Principal" in statement:
        principal = statement["Principal"]
        names = ["*"] if principal == "*" else _list(principal.get("AWS", []))
        root = f"arn:aws:iam::{ACCOUNT}:root"
        names = [root if n == ACCOUNT else n for n in names]
        # The account root in a key policy stands for the account's principals only through
        # their IAM policies: kms_allowed() asks for that as the root, separately.
        if not any(n in ("*", request.principal) for n in names):
            return False
    for operator, keys in statement.get("Condition", {}).items():
        for key, patterns in keys.items():
            if not _condition_holds(
                operator, key, [str(p) for p in _list(patterns)], request.context
            ):
                return False
    return True


def allowed(statements: Iterable[Json], request: Request) -> bool:
    """IAM's decision for one request under one set of statements."""
    effects = {s["Effect"] for s in statements if _matches(s, request)}
    return "Deny" not in effects and "Allow" in effects


def kms_allowed(key_policy: Json, iam: Iterable[Json], request: Request) -> bool:
    """KMS: the key policy decides; it may hand the decision to IAM by allowing the account
    root, and only then do the principal's IAM policies count."""
    statements = list(key_policy.get("Statement", []))
    if any(s["Effect"] == "Deny" and _matches(s, request) for s in statements):
        return False
    if allowed(statements, request):
        return True
    as_root = Request(request.action, request.resource, request.context,
                      f"arn:aws:iam::{ACCOUNT}:root")  # fmt: skip
    return allowed(statements, as_root) and allowed(list(iam), request)


# --- the template's roles ---------------------------------------------------------------
def _resolve(value: Any, arns: Mapping[str, str], conditions: Mapping[str, bool]) -> Any:
    if isinstance(value, list):
        out = [_resolve(v, arns, conditions) for v in value]
        return [v for v in out if v is not _NO_VALUE]
    if not isinstance(value, dict):
        return value
    if list(value) == ["Fn::If"]:
        name, yes, no = value["Fn::If"]
        return _resolve(yes if conditions[name] else no, arns, conditions)
    if list(value) == ["Ref"]:
        ref = value["Ref"]
        if ref == "AWS::NoValue":
            return _NO_VALUE
        return {"AWS::Partition": "aws", "AWS::Region": REGION,
                "AWS::AccountId": ACCOUNT}.get(ref, arns.get(ref, ref))  # fmt: skip
    if list(value) == ["Fn::GetAtt"]:
        target, attribute = value["Fn::GetAtt"]
        return arns[f"{target}.{attribute}"]
    if list(value) == ["Fn::Sub"]:
        text = value["Fn::Sub"]
        text, extra = (text, {}) if isinstance(text, str) else text

        def sub(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in extra:
                return str(_resolve(extra[name], arns, conditions))
            if "." in name:
                return str(_resolve({"Fn::GetAtt": name.split(".", 1)}, arns, conditions))
            return str(_resolve({"Ref": name}, arns, conditions))

        return re.sub(r"\$\{([^}]+)\}", sub, text)
    return {k: _resolve(v, arns, conditions) for k, v in value.items()}


_NO_VALUE: Any = object()


def role_statements(
    cfn: Json, function: str, arns: Mapping[str, str], conditions: Mapping[str, bool]
) -> list[Json]:
    """Every statement of the inline policies of the role the function runs as, and of the
    ``AWS::IAM::Policy`` resources attached to it."""
    role = cfn["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0]
    inline = cfn["Resources"][role]["Properties"].get("Policies", [])
    documents = [p["PolicyDocument"] for p in inline]
    for resource in cfn["Resources"].values():
        attached = resource["Properties"].get("Roles", []) if "Properties" in resource else []
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in attached:
            documents.append(resource["Properties"]["PolicyDocument"])
    out: list[Json] = []
    for document in documents:
        for statement in _resolve(document["Statement"], arns, conditions):
            out.append(statement)
    return out


def role_of(cfn: Json, function: str) -> str:
    return str(cfn["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0])


# --- gated clients -----------------------------------------------------------------------
def _denied(operation: str, request: Request) -> ClientError:
    return ClientError(
        {"Error": {"Code": "AccessDeniedException",
                   "Message": f"not authorized to perform {request.action} on "
                              f"{request.resource} (tests/iam.py)"}},
        operation,
    )  # fmt: skip


class GatedDynamoDB:
    """A DynamoDB client that makes only the calls ``statements`` allow."""

    def __init__(
        self, client: Any, statements: list[Json], context: Mapping[str, list[str]] | None = None
    ) -> None:
        self._client = client
        self._statements = statements
        # What every request of this caller carries (lambda:SourceFunctionArn: the function
        # whose code makes the call).
        self._context = dict(context or {})
        self._keys: dict[str, str] = {}
        self.refused: list[Request] = []

    def _arn(self, table: str) -> str:
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"

    def _hash_key(self, table: str) -> str:
        if table not in self._keys:
            schema = self._client.describe_table(TableName=table)["Table"]["KeySchema"]
            self._keys[table] = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
        return self._keys[table]

    def _leading(self, table: str, key: Mapping[str, Any]) -> list[str]:
        value = key[self._hash_key(table)]
        return [str(next(iter(value.values())))]

    def _authorize(
        self, operation: str, action: str, table: str, leading: list[str] | None
    ) -> None:
        context = dict(self._context)
        if leading is not None:
            context["dynamodb:LeadingKeys"] = leading
        request = Request(f"dynamodb:{action}", self._arn(table), context)
        if not allowed(self._statements, request):
            self.refused.append(request)
            raise _denied(operation, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    # Item calls name their partition key; queries their key condition's value.
    def get_item(self, **kw: Any) -> Any:
        self._authorize(
            "GetItem", "GetItem", kw["TableName"], self._leading(kw["TableName"], kw["Key"])
        )
        return self._client.get_item(**kw)

    def put_item(self, **kw: Any) -> Any:
        self._authorize(
            "PutItem", "PutItem", kw["TableName"], self._leading(kw["TableName"], kw["Item"])
        )
        return self._client.put_item(**kw)

    def delete_item(self, **kw: Any) -> Any:
        self._authorize(
            "DeleteItem", "DeleteItem", kw["TableName"], self._leading(kw["TableName"], kw["Key"])
        )
        return self._client.delete_item(**kw)

    def update_item(self, **kw: Any) -> Any:
        self._authorize(
            "UpdateItem", "UpdateItem", kw["TableName"], self._leading(kw["TableName"], kw["Key"])
        )
        return self._client.update_item(**kw)

    def query(self, **kw: Any) -> Any:
        values = kw.get("ExpressionAttributeValues", {})
        names = kw.get("ExpressionAttributeNames", {})
        hash_key = self._hash_key(kw["TableName"])
        # The partition key's value: the placeholder the key condition sets it equal to.
        leading = None
        for part in re.split(r"(?i)\s+AND\s+", kw.get("KeyConditionExpression", "")):
            left, eq, right = part.partition("=")
            if eq and names.get(left.strip(), left.strip()) == hash_key:
                leading = [str(next(iter(values[right.strip()].values())))]
        self._authorize("Query", "Query", kw["TableName"], leading)
        return self._client.query(**kw)

    def scan(self, **kw: Any) -> Any:
        self._authorize("Scan", "Scan", kw["TableName"], None)
        return self._client.scan(**kw)

    def batch_get_item(self, **kw: Any) -> Any:
        for table, request in kw["RequestItems"].items():
            for key in request["Keys"]:
                self._authorize("BatchGetItem", "BatchGetItem", table, self._leading(table, key))
        return self._client.batch_get_item(**kw)

    def batch_write_item(self, **kw: Any) -> Any:
        for table, writes in kw["RequestItems"].items():
            for write in writes:
                key = write.get("DeleteRequest", {}).get("Key") or write["PutRequest"]["Item"]
                self._authorize(
                    "BatchWriteItem", "BatchWriteItem", table, self._leading(table, key)
                )
        return self._client.batch_write_item(**kw)

    def transact_write_items(self, **kw: Any) -> Any:
        actions = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                   "ConditionCheck": "ConditionCheckItem"}  # fmt: skip
        for item in kw["TransactItems"]:
            [(op, body)] = item.items()
            key = body.get("Key") or body["Item"]
            table = body["TableName"]
            self._authorize("TransactWriteItems", actions[op], table, self._leading(table, key))
        return self._client.transact_write_items(**kw)


class GatedKms:
    """A KMS client that makes only the calls the key policy and the role's IAM allow."""

    def __init__(self, client: Any, statements: list[Json], principal: str) -> None:
        self._client = client
        self._statements = statements
        self.principal = principal

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _key_arn(self, key_id: str) -> str:
        meta = self._client.describe_key(KeyId=key_id)["KeyMetadata"]
        return str(meta["Arn"])

    def may(self, action: str, key_id: str, context: Mapping[str, list[str]] | None = None) -> bool:
        import json

        arn = self._key_arn(key_id)
        policy = json.loads(
            self._client.get_key_policy(KeyId=key_id, PolicyName="default")["Policy"]
        )
        tags = self._client.list_resource_tags(KeyId=key_id).get("Tags", [])
        ctx = {f"aws:ResourceTag/{t['TagKey']}": [t["TagValue"]] for t in tags}
        ctx |= {"aws:PrincipalArn": [self.principal]} | dict(context or {})
        return kms_allowed(
            policy, self._statements, Request(f"kms:{action}", arn, ctx, self.principal)
        )

    def _gate(
        self,
        operation: str,
        action: str,
        key_id: str,
        context: Mapping[str, list[str]] | None = None,
    ) -> None:
        if not self.may(action, key_id, context):
            raise _denied(operation, Request(f"kms:{action}", self._key_arn(key_id)))

    def sign(self, **kw: Any) -> Any:
        self._gate("Sign", "Sign", kw["KeyId"])
        return self._client.sign(**kw)

    def tag_resource(self, **kw: Any) -> Any:
        ctx = {"aws:TagKeys": [t["TagKey"] for t in kw["Tags"]]}
        ctx |= {f"aws:RequestTag/{t['TagKey']}": [t["TagValue"]] for t in kw["Tags"]}
        self._gate("TagResource", "TagResource", kw["KeyId"], ctx)
        return self._client.tag_resource(**kw)

    def schedule_key_deletion(self, **kw: Any) -> Any:
        self._gate("ScheduleKeyDeletion", "ScheduleKeyDeletion", kw["KeyId"])
        return self._client.schedule_key_deletion(**kw)

    def disable_key(self, **kw: Any) -> Any:
        self._gate("DisableKey", "DisableKey", kw["KeyId"])
        return self._client.disable_key(**kw)

    def put_key_policy(self, **kw: Any) -> Any:
        self._gate("PutKeyPolicy", "PutKeyPolicy", kw["KeyId"])
        return self._client.put_key_policy(**kw)

    def create_grant(self, **kw: Any) -> Any:
        self._gate("CreateGrant", "CreateGrant", kw["KeyId"])
        return self._client.create_grant(**kw)
