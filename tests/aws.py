"""AWS helpers for the tests (not a test module).

* ``load_template`` / ``tables_from_template``: the DynamoDB tables are created from the
  ``Properties`` written in ``template.yaml``, so the template and the tests cannot drift.
* ``patch_moto_dynamodb``: four fixes that make moto's DynamoDB behave like the service
  under the store's workload (see the function's docstring).
* ``patch_moto_kms_ed25519``: moto 5.2 knows no ``ECC_NIST_EDWARDS25519`` KMS keys; this
  adds them, signing as KMS does (``ED25519_SHA_512`` over a RAW message gives a plain
  RFC 8032 signature; ``GetPublicKey`` gives DER SubjectPublicKeyInfo).
* ``lighten_aws_setup``: two costs every AWS test paid for nothing (botocore parsing its
  JSON again for each test's new session; moto making an RSA key pair for a symmetric
  KMS key), taken out; what the tests see is the same.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

__all__ = [
    "REPO",
    "STORE_TABLES",
    "TEMPLATE",
    "lighten_aws_setup",
    "load_template",
    "patch_moto_dynamodb",
    "patch_moto_kms_ed25519",
    "tables_from_template",
    "template_tables",
]

# The moto patches below reach into moto's internals as of 5.2; check them on an upgrade.
MOTO_TESTED = "5.2."

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "template.yaml"
# DynamoStore's constructor arguments, by the logical ids of the template's tables.
STORE_TABLES = {
    "ledger_table": "LedgerTable",
    "records_table": "RecordsTable",
    "state_table": "StateTable",
}


# --- the template ---------------------------------------------------------------------
class _CfnLoader(yaml.SafeLoader):
    """A YAML loader that reads CloudFormation's short tags (!Ref, !Sub, !GetAtt ...) as
    the long form they stand for ({"Ref": ...}, {"Fn::Sub": ...})."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = str(value).split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _intrinsic)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as a fresh dict (a copy: callers may change it)."""
    return copy.deepcopy(_parsed_template(path, path.stat().st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _parsed_template(path: Path, mtime_ns: int) -> dict[str, Any]:
    """Parsed once per file version: the pure-Python YAML loader takes 0.25 s of CPU on
    the template, and every DynamoDB test creates its tables from it."""
    with path.open(encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass
    assert isinstance(data, dict), f"{path} is not a YAML mapping"
    return data


def template_tables(template: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The ``Properties`` of every ``AWS::DynamoDB::Table``, by logical id."""
    # Only the tables' properties are copied: each DynamoDB test creates its tables, and a
    # copy of the whole template cost it ~2.5 ms of CPU.
    if template is None:
        template = _parsed_template(TEMPLATE, TEMPLATE.stat().st_mtime_ns)
    return {
        name: copy.deepcopy(dict(res.get("Properties", {})))
        for name, res in template["Resources"].items()
        if res.get("Type") == "AWS::DynamoDB::Table"
    }


# Table properties with no effect on how the tables behave for the store, which moto
# cannot take as written (they hold intrinsic functions).
_IGNORED = frozenset({"ResourcePolicy", "Tags"})
_APPLIED_LATER = frozenset({"PointInTimeRecoverySpecification", "TimeToLiveSpecification"})
_COPIED = (
    "KeySchema",
    "AttributeDefinitions",
    "BillingMode",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "DeletionProtectionEnabled",
    "TableClass",
)


def _create_table_args(logical_id: str, props: dict[str, Any]) -> dict[str, Any]:
    unknown = set(props) - _IGNORED - _APPLIED_LATER - set(_COPIED)
    unknown -= {"TableName", "StreamSpecification", "SSESpecification"}
    if unknown:
        raise ValueError(
            f"{logical_id}: tests/aws.py does not know how to create {sorted(unknown)}; "
            "teach tables_from_template about it"
        )
    name = props.get("TableName")
    args: dict[str, Any] = {"TableName": name if isinstance(name, str) else logical_id}
    for key in _COPIED:
        if key in props:
            args[key] = copy.deepcopy(props[key])
    stream = props.get("StreamSpecification")
    if stream:
        args["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream["StreamViewType"],
        }
    sse = props.get("SSESpecification")
    if sse:
        args["SSESpecification"] = {"Enabled": bool(sse.get("SSEEnabled"))}
        if "SSEType" in sse:
            args["SSESpecification"]["SSEType"] = sse["SSEType"]
    return args


def tables_from_template(client: Any, template: dict[str, Any] | None = None) -> dict[str, str]:
    """Create the template's DynamoDB tables with ``client``; {logical id: table name}."""
    names: dict[str, str] = {}
    for logical_id, props in template_tables(template).items():
        args = _create_table_args(logical_id, props)
        client.create_table(**args)
        name = args["TableName"]
        pitr = props.get("PointInTimeRecoverySpecification") or {}
        if pitr.get("PointInTimeRecoveryEnabled"):
            client.update_continuous_backups(
                TableName=name,
                PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
            )
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
        names[logical_id] = name
    return names


# --- set-up costs -------------------------------------------------------------------
@functools.cache
def _shared_loader() -> Any:
    from botocore.loaders import create_loader

    return create_loader()


@functools.cache
def _symmetric_stand_in() -> Any:
    from moto.kms.utils import RSAPrivateKey

    return RSAPrivateKey(key_size=2048)


def lighten_aws_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take out two set-up costs of every AWS test, ~0.1-0.2 s each, which add up to about
    a minute of a test run, and two costs of every request moto answers:

    1. **botocore's data, parsed once.** moto gives each test a new default boto3 session
       (so each test's credentials apply), and each new botocore session made a new data
       loader, which listed botocore's data directories and parsed the endpoints and every
       service model again. Sessions now share one loader and its cache (the data is
       read-only; a session with its own ``data_path`` still gets its own loader).
    2. **No RSA key pair for a symmetric KMS key.** moto gives every KMS key an RSA-2048
       private key, symmetric ones too: the ``aws/dynamodb`` key it makes for the
       template's encrypted tables cost a prime search (40-80 ms) in every test that
       creates them. A symmetric KMS key has no key pair (its material, which moto
       encrypts with, is still its own); they now share one made once, so moto's key
       objects keep their shape.
    3. **A response class's method names, listed once.** For every request, moto's
       ``BaseResponse.call_action`` listed the methods of the service's response class
       with ``inspect.getmembers`` (~3 ms, about 4% of a DynamoDB request) to see whether
       the action is one of them. The list is the class's, the same for each request:
       it is now made once per class for the test (a dict, so a class patched in a later
       test is listed again).
    4. **A response member's possible names, found once per shape.** moto writes each
       answer by walking the operation's output shape; for every member of every
       structure (each attribute value of each item a DynamoDB query returns: ten
       members) it asked six alias providers which names the value could have in the
       result and turned each into snake case: ~40% of a DynamoDB request's CPU. For a
       plain dict (what DynamoDB's handler answers with) the names depend only on the
       member's name and shape (moto caches the service model, so a shape is the same
       object from request to request): they are now found once per (name, shape) for
       the test, and tried in the same order (``_possible_keys_once``).
    """
    from botocore import session
    from botocore.loaders import create_loader
    from moto.core import responses
    from moto.kms import models

    _check_moto_version()

    def register_data_loader(self: Any) -> None:
        def loader() -> Any:
            path = self.get_config_variable("data_path")
            return create_loader(path) if path else _shared_loader()

        self._components.lazy_register_component("data_loader", loader)

    monkeypatch.setattr(session.Session, "_register_data_loader", register_data_loader)
    generate = models.generate_private_key

    def generate_private_key(key_spec: str) -> Any:
        return _symmetric_stand_in() if key_spec == "SYMMETRIC_DEFAULT" else generate(key_spec)

    monkeypatch.setattr(models, "generate_private_key", generate_private_key)
    list_methods = responses.method_names_from_class
    listed: dict[object, list[str]] = {}

    def method_names_from_class(clazz: object) -> list[str]:
        if clazz not in listed:
            listed[clazz] = list_methods(clazz)
        return listed[clazz]

    monkeypatch.setattr(responses, "method_names_from_class", method_names_from_class)
    _possible_keys_once(monkeypatch)


def _possible_keys_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``lighten_aws_setup``'s fourth point, in moto's ``ResponseSerializer.get_value``.

    Only a plain dict's member is looked up this way, by moto's default picker with no
    response transformer (DynamoDB's answers): another object's names also depend on its
    class and its ``Meta``, and a transformer reads the member's path, so those are
    looked up as before. The names are the picker's own, in its order, the first one the
    dict holds wins, as in ``AttributePicker.__call__``. The shape (and the structure it
    is a member of, which two providers read) is held with its names, so an id seen
    again is that shape's, never a new one's."""
    from moto.core import serialize
    from moto.core.utils import MISSING
    from moto.core.utils import get_value as value_at

    look_up = serialize.ResponseSerializer.get_value
    found: dict[tuple[str, int, int], tuple[object, object, tuple[str, ...]]] = {}

    def get_value(self: Any, value: Any, key: str, shape: Any) -> Any:
        picker = self._value_picker
        if (
            type(value) is not dict
            or type(picker) is not serialize.XFormedAttributePicker
            or picker.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS
            or picker.response_transformers
        ):
            return look_up(self, value, key, shape)
        parent = getattr(shape, "parent", None)
        slot = (key, id(shape), id(parent))
        kept = found.get(slot)
        if kept is None or kept[0] is not shape or kept[1] is not parent:
            context = serialize.AttributePickerContext(
                obj=value,
                key=key,
                shape=shape,
                operation_model=self.operation_model,
                service_model=self.operation_model.service_model,
                key_path=".".join(self.path),
            )
            kept = (shape, parent, tuple(picker.get_possible_keys(context)))
            found[slot] = kept
        for name in kept[2]:
            # moto's get_value reads a dotted name as a path; a plain one is a dict key
            member = value_at(value, name, MISSING) if "." in name else value.get(name, MISSING)
            if member is not MISSING:
                return member
        return None

    get_value.looked_up_by_moto = look_up  # type: ignore[attr-defined]  # for its test
    monkeypatch.setattr(serialize.ResponseSerializer, "get_value", get_value)


# --- moto DynamoDB --------------------------------------------------------------------
_DYNAMODB_LOCK = threading.RLock()


def _check_moto_version() -> None:
    from importlib.metadata import version

    found = version("moto")
    if not found.startswith(MOTO_TESTED):
        raise RuntimeError(
            f"tests/aws.py patches moto {MOTO_TESTED}x internals but moto {found} is installed; "
            "re-read moto's dynamodb/kms models and update the patches"
        )


def patch_moto_dynamodb(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make moto's DynamoDB behave like the service for concurrent, long-running tests.

    1. **One request at a time.** DynamoDB serializes transactions against each other;
       moto does not: two threads inside ``transact_write_items`` interleave their condition
       checks and writes, a rollback (which swaps whole tables back in) silently drops the
       other thread's writes, and the deep copy itself fails with "dictionary changed size
       during iteration" (ThreadedMotoServer runs the same code in werkzeug threads). A
       lock around moto's request handler restores linearizable requests. Races *between*
       requests (read the head, then write) remain, and are exactly what the store's
       conditions must handle.
    2. **Rollback by item, not by table.** moto snapshots every table a transaction touches
       with ``copy.deepcopy`` before each transaction, which makes N appends cost O(N^2)
       (100 s for 2,000 entries). This version of ``transact_write_items`` keeps moto's
       checks and error reporting but snapshots only the items the transaction names, and
       trims the table streams back on rollback. Each condition is checked once (moto's
       checks it, then has the write check it again on the same item).
    3. **Key sizes on reads.** DynamoDB refuses a key past its limits (partition key 2,048
       bytes, sort key 1,024) on every call that names one: ``GetItem``, ``DeleteItem``
       and ``UpdateItem`` too, with the ValidationException moto gives only on writes. A
       read by an id too long to be one (``GET /v1/asks/<1,100 bytes>``) then fails here
       as it would in AWS (tests/security/test_long_id_looks_like_an_outage.py).
    4. **An update expression parsed once.** moto parses an UpdateExpression twice per
       update (the handler reads its placeholders, the backend validates it), ~10% of an
       update's CPU, and the store sends the same few expressions again and again. The
       tree is only read (placeholders) or copied before use (moto's validator works on
       a deep copy), so one tree per expression serves every update of the test; an
       expression moto refuses is parsed, and refused, every time.
    """
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.responses import DynamoHandler

    _check_moto_version()
    handler: Callable[..., Any] = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _DYNAMODB_LOCK:
            return handler(self)

    monkeypatch.setattr(DynamoHandler, "call_action", call_action)
    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", _transact_write_items)
    keys_value = DynamoDBBackend.get_keys_value  # GetItem's and DeleteItem's key
    update_item = DynamoDBBackend.update_item

    def sized_keys_value(self: Any, table: Any, keys: dict[str, Any]) -> Any:
        table._validate_key_sizes(keys)
        return keys_value(self, table, keys)

    def sized_update_item(self: Any, table_name: str, key: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(key, dict):
            self.get_table(table_name)._validate_key_sizes(key)
        return update_item(self, table_name, key, *args, **kw)

    monkeypatch.setattr(DynamoDBBackend, "get_keys_value", sized_keys_value)
    monkeypatch.setattr(DynamoDBBackend, "update_item", sized_update_item)
    _update_expressions_parsed_once(monkeypatch)


def _update_expressions_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``patch_moto_dynamodb``'s fourth point: ``UpdateExpressionParser.make`` by expression."""
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    parse: Callable[[str], Any] = UpdateExpressionParser.make
    parsed: dict[str, Any] = {}

    def make(cls: type, expression: str) -> Any:
        if expression not in parsed:
            parsed[expression] = parse(expression)  # raises for an expression moto refuses
        return parsed[expression]

    monkeypatch.setattr(UpdateExpressionParser, "make", classmethod(make))


class _ItemRollback:
    """The items a transaction is about to change, as they were, to put back on failure."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.saved: list[tuple[Any, Any, Any, Any]] = []  # (table, hash, range, old item)
        self.streams: dict[int, tuple[Any, int]] = {}

    def save(self, table_name: str, key: dict[str, Any]) -> None:
        table = self.backend.get_table(table_name)
        hash_value, range_value = self.backend.get_keys_value(table, key)
        item = table.get_item(hash_value, range_value)
        self.saved.append((table, hash_value, range_value, copy.deepcopy(item)))
        if table.stream_shard is not None and id(table) not in self.streams:
            self.streams[id(table)] = (table, len(table.stream_shard.items))

    def restore(self) -> None:
        for table, hash_value, range_value, item in reversed(self.saved):
            bucket = table.items[hash_value] if range_value is not None else table.items
            slot = range_value if range_value is not None else hash_value
            if item is None:
                bucket.pop(slot, None)
            else:
                bucket[slot] = item
        for table, length in self.streams.values():
            del table.stream_shard.items[length:]


def _transaction_key(backend: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = op["Item"][table.range_key_attr]
    return key


def _apply(backend: Any, op_type: str, op: dict[str, Any], key: dict[str, Any]) -> None:
    """The write, its condition already checked by ``_check_condition`` on the item as it
    is now (under the request lock, nothing changes it between the two). moto's own
    version passes the condition again, and parses and evaluates it a second time: a
    cost (~5% of an append's requests), not a second check."""
    expression = {
        "expression_attribute_names": op.get("ExpressionAttributeNames"),
        "expression_attribute_values": op.get("ExpressionAttributeValues"),
    }
    if op_type == "Put":
        backend.put_item(op["TableName"], op["Item"], **expression)
    elif op_type == "Delete":
        backend.delete_item(op["TableName"], key, **expression)
    elif op_type == "Update":
        backend.update_item(
            op["TableName"], key, update_expression=op["UpdateExpression"], **expression
        )


def _check_condition(backend: Any, op: dict[str, Any], key: dict[str, Any]) -> None:
    """Raise ConditionalCheckFailed (with the item if ALL_OLD was asked) as moto does."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import ConditionalCheckFailed

    condition = op.get("ConditionExpression")
    if condition is None:
        return
    current = backend.get_item(op["TableName"], key)
    names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
    if not get_filter_expression(condition, names, values).expr(current):
        old = None
        if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
            old = current.to_json()["Attributes"]
        failed = ConditionalCheckFailed(item=old)
        failed.old_item = old  # reported in CancellationReasons, as DynamoDB does
        raise failed


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """moto 5.2's ``DynamoDBBackend.transact_write_items`` with an item-level rollback."""
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    undo = _ItemRollback(self)
    targets: set[tuple[str, str]] = set()
    errors: list[tuple[str | None, str | None, Any]] = []
    for request in transact_items:
        if len(request) > 1:
            undo.restore()
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(request.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            key = _transaction_key(self, op_type, op)
            target = (str(op["TableName"]), str(dict(sorted(key.items()))))
            if target in targets:
                raise MultipleTransactionsException()
            targets.add(target)
            _check_condition(self, op, key)
            if op_type != "ConditionCheck":
                undo.save(op["TableName"], key)
                _apply(self, op_type, op, key)
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            undo.restore()
            raise
        except ConditionalCheckFailed as exc:
            errors.append(
                ("ConditionalCheckFailed", str(exc.message), getattr(exc, "old_item", None))
            )
        except Exception as exc:  # moto reports any other failure as a cancellation reason
            errors.append((type(exc).__name__, str(exc), None))
    if any(code is not None for code, _, _ in errors):
        undo.restore()
        raise TransactionCanceledException(errors)


# --- moto KMS with Ed25519 ------------------------------------------------------------
ED25519_SPEC = "ECC_NIST_EDWARDS25519"
ED25519_ALGORITHM = "ED25519_SHA_512"
KMS_MAX_RAW_MESSAGE = 4096


def _ed25519_key_class() -> type:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519
    from moto.kms import utils

    class Ed25519Key(utils.AbstractPrivateKey):  # type: ignore[misc]
        """A KMS ECC_NIST_EDWARDS25519 key: ED25519_SHA_512 is plain Ed25519 (RFC 8032)."""

        def __init__(self) -> None:
            self.private_key = ed25519.Ed25519PrivateKey.generate()

        def sign(self, message: bytes, signing_algorithm: str) -> bytes:
            utils.validate_signing_algorithm(signing_algorithm, [ED25519_ALGORITHM])
            return self.private_key.sign(message)

        def verify(self, message: bytes, signature: bytes, signing_algorithm: str) -> bool:
            utils.validate_signing_algorithm(signing_algorithm, [ED25519_ALGORITHM])
            try:
                self.private_key.public_key().verify(signature, message)
            except InvalidSignature:
                return False
            return True

        def public_key(self) -> bytes:
            return self.private_key.public_key().public_bytes(
                encoding=serialization.Encoding.DER,
                format=serialization.PublicFormat.SubjectPublicKeyInfo,
            )

    return Ed25519Key


def patch_moto_kms_ed25519(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teach moto's KMS the ``ECC_NIST_EDWARDS25519`` key spec, as AWS KMS implements it."""
    from moto.kms import models, responses, utils
    from moto.kms.exceptions import ValidationException

    _check_moto_version()
    key_class = _ed25519_key_class()
    specs = utils.KeySpec.key_specs()
    monkeypatch.setattr(
        utils.KeySpec, "key_specs", classmethod(lambda cls: sorted([*specs, ED25519_SPEC]))
    )

    generate = models.generate_private_key

    def generate_private_key(key_spec: str) -> Any:
        return key_class() if key_spec == ED25519_SPEC else generate(key_spec)

    monkeypatch.setattr(models, "generate_private_key", generate_private_key)

    algorithms = models.Key.signing_algorithms.fget

    def signing_algorithms(self: Any) -> Any:
        if self.key_spec == ED25519_SPEC and self.key_usage == "SIGN_VERIFY":
            return [ED25519_ALGORITHM]
        return algorithms(self)

    monkeypatch.setattr(models.Key, "signing_algorithms", property(signing_algorithms))

    sign = responses.KmsResponse.sign

    def sign_like_kms(self: Any) -> Any:
        # AWS: ED25519_SHA_512 signs RAW messages (at most 4096 bytes) only.
        if self._get_param("SigningAlgorithm") == ED25519_ALGORITHM:
            if (self._get_param("MessageType") or "RAW") != "RAW":
                raise ValidationException("ED25519_SHA_512 requires MessageType RAW")
            if len(self._get_param("Message") or b"") > KMS_MAX_RAW_MESSAGE:
                raise ValidationException("Message must be at most 4096 bytes")
        return sign(self)

    monkeypatch.setattr(responses.KmsResponse, "sign", sign_like_kms)
