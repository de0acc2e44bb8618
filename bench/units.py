"""DynamoDB read and write units of each call a client makes, counted by a botocore event
hook from the call's own request and the items it touched (not a test module, no timing).

moto (5.2) returns no true ``ConsumedCapacity``: a fixed 1.0 for PutItem, DeleteItem,
Query and Scan whatever the item sizes, 0.5 for GetItem (even strongly consistent) and
UpdateItem, one unit per key for BatchGetItem, and an empty list for TransactWriteItems
(tests/test_capacity_units.py pins this). So the hook asks for it
(``ReturnConsumedCapacity='TOTAL'``) and keeps moto's figure beside its own, but counts the
units by DynamoDB's published rules:

* item size: the UTF-8 bytes of each attribute name plus its value (a string's UTF-8
  bytes, a binary's raw bytes, a number 1 byte per two significant digits plus 1,
  a boolean or null 1; a list or map 3 bytes plus 1 per element plus the elements);
* writes: 1 unit per KB (rounded up) of the larger of the item before and after (a delete:
  the item deleted), at least 1; doubled inside TransactWriteItems; a write whose condition
  fails is charged the same;
* reads: 1 unit per 4 KB (rounded up), at least 1, of the whole item, whatever the
  ProjectionExpression; half when eventually consistent; a Query sums the items it read
  (before any FilterExpression) and then rounds; BatchGetItem rounds each item; a
  ConditionCheck in a transaction is a transactional read (2 units per 4 KB).

The items before and after a call are read with a second client that is not hooked (the
*probe*), from the same moto backend, so nothing the counting does is counted.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = ["Call", "Meter", "item_size", "value_size"]

WRITE_UNIT = 1024
READ_UNIT = 4096
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


def _number_size(text: str) -> int:
    digits = Decimal(text).normalize().as_tuple().digits
    significant = "".join(map(str, digits)).strip("0") or "0"
    return math.ceil(len(significant) / 2) + 1


def _raw(value: str | bytes) -> bytes:
    """A binary as the wire JSON has it (base64), or as botocore parsed it (bytes)."""
    return value if isinstance(value, bytes) else base64.b64decode(value)


def value_size(value: dict[str, Any]) -> int:
    """The size DynamoDB counts for one AttributeValue (as the wire JSON has it)."""
    [(kind, v)] = value.items()
    if kind == "S":
        return len(str(v).encode())
    if kind == "N":
        return _number_size(str(v))
    if kind == "B":
        return len(_raw(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(_number_size(n) for n in v)
    if kind == "BS":
        return sum(len(_raw(b)) for b in v)
    if kind == "L":
        return 3 + sum(1 + value_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(e) for k, e in v.items())
    raise ValueError(f"unknown AttributeValue type {kind!r}")


def item_size(item: dict[str, Any] | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(v) for name, v in item.items())


def _write_units(before: int, after: int) -> int:
    return max(1, math.ceil(max(before, after) / WRITE_UNIT))


def _read_units(size: int) -> int:
    return max(1, math.ceil(size / READ_UNIT))


@dataclass
class Call:
    """One DynamoDB call: its units as counted here and as moto returned them."""

    op: str
    tables: str
    wcu: float
    rcu: float
    moto: float | None  # moto's ConsumedCapacity (summed), None when it returned none
    failed: bool = False
    items: int = 0  # items written or read
    bytes: int = 0  # their sizes, as the units were counted from


@dataclass
class Meter:
    """Hooks a boto3 session's DynamoDB calls; ``phase(name)`` files them under a name."""

    probe: Any  # a DynamoDB client on another session: never hooked
    calls: dict[str, list[Call]] = field(default_factory=dict)
    current: str | None = None
    _keys: dict[str, list[str]] = field(default_factory=dict)

    def attach(self, session: Any) -> None:
        events = session.events
        events.register("before-parameter-build.dynamodb", self._ask_capacity)
        events.register("before-call.dynamodb", self._before)
        events.register("after-call.dynamodb", self._after)

    @contextmanager
    def phase(self, name: str) -> Iterator[list[Call]]:
        previous, self.current = self.current, name
        calls = self.calls.setdefault(name, [])
        try:
            yield calls
        finally:
            self.current = previous

    # --- the hook -----------------------------------------------------------------------
    def _ask_capacity(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _before(self, params: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        if self.current is None:
            return
        body = json.loads(params.get("body") or b"{}")
        context["capacity_meter"] = (self.current, body, self._images_before(model.name, body))

    def _after(self, parsed: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        pending = context.pop("capacity_meter", None)
        if pending is None:
            return
        phase, body, before = pending
        failed = "Error" in parsed
        call = self._count(model.name, body, before, failed)
        call.moto = _moto_units(parsed)
        self.calls.setdefault(phase, []).append(call)

    # --- items, read with the probe -----------------------------------------------------
    def _key_names(self, table: str) -> list[str]:
        if table not in self._keys:
            schema = self.probe.describe_table(TableName=table)["Table"]["KeySchema"]
            self._keys[table] = [k["AttributeName"] for k in schema]
        return self._keys[table]

    def _key_of(self, table: str, item: dict[str, Any]) -> dict[str, Any]:
        return {name: item[name] for name in self._key_names(table)}

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        got = self.probe.get_item(TableName=table, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = got.get("Item")
        return item

    def _writes(self, op: str, body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
        """(action, table, key) of every item a write call names."""
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            table = body["TableName"]
            key = self._key_of(table, body["Item"]) if op == "PutItem" else body["Key"]
            return [(op.removesuffix("Item"), table, key)]
        out = []
        if op == "TransactWriteItems":
            for action in body["TransactItems"]:
                [(kind, spec)] = action.items()
                table = spec["TableName"]
                key = self._key_of(table, spec["Item"]) if kind == "Put" else spec["Key"]
                out.append((kind, table, key))
        if op == "BatchWriteItem":
            for table, requests in body["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        out.append(("Put", table, self._key_of(table, item)))
                    else:
                        out.append(("Delete", table, request["DeleteRequest"]["Key"]))
        return out

    def _images_before(self, op: str, body: dict[str, Any]) -> list[int]:
        return [item_size(self._get(table, key)) for _, table, key in self._writes(op, body)]

    def _count(self, op: str, body: dict[str, Any], before: list[int], failed: bool) -> Call:
        writes = self._writes(op, body)
        if writes:
            return self._count_writes(op, body, writes, before, failed)
        tables = ",".join(sorted(body.get("RequestItems") or [body.get("TableName", "")]))
        call = Call(op, tables, 0.0, 0.0, None, failed)
        if op == "GetItem":
            size = item_size(self._get(body["TableName"], body["Key"]))
            call.rcu = _read_units(size) * _consistency(body)
            call.items, call.bytes = int(size > 0), size
        elif op == "BatchGetItem":
            for table, request in body["RequestItems"].items():
                for key in request["Keys"]:
                    size = item_size(self._get(table, key))
                    call.rcu += _read_units(size) * _consistency(request)
                    call.items, call.bytes = call.items + int(size > 0), call.bytes + size
        elif op in ("Query", "Scan"):
            items = self._read_as_dynamodb_does(op, body)
            call.bytes, call.items = sum(map(item_size, items)), len(items)
            call.rcu = _read_units(call.bytes) * _consistency(body)
        elif op == "TransactGetItems":
            for action in body["TransactItems"]:
                size = item_size(self._get(action["Get"]["TableName"], action["Get"]["Key"]))
                call.rcu += 2 * _read_units(size)
                call.items, call.bytes = call.items + int(size > 0), call.bytes + size
        return call

    def _count_writes(
        self,
        op: str,
        body: dict[str, Any],
        writes: list[tuple[str, str, dict[str, Any]]],
        before: list[int],
        failed: bool,
    ) -> Call:
        factor = 2 if op == "TransactWriteItems" else 1
        tables = ",".join(sorted({table for _, table, _ in writes}))
        call = Call(op, tables, 0.0, 0.0, None, failed, items=len(writes))
        for (kind, table, key), old in zip(writes, before, strict=True):
            if kind == "ConditionCheck":
                call.rcu += factor * _read_units(old)
                call.bytes += old
                continue
            after = 0 if kind == "Delete" or failed else item_size(self._get(table, key))
            call.wcu += factor * _write_units(old, after)
            call.bytes += max(old, after)
        return call

    def _read_as_dynamodb_does(self, op: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The items a Query or Scan read: the same keys, limit and start, without the
        filter and projection (DynamoDB charges for what it read, not what it returned)."""
        request = {k: v for k, v in body.items() if k not in _NOT_READ}
        used = " ".join(str(body.get(k, "")) for k in ("KeyConditionExpression",))
        names = set(_PLACEHOLDER.findall(used))
        for field_ in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
            kept = {k: v for k, v in body.get(field_, {}).items() if k in names}
            if kept:
                request[field_] = kept
            else:
                request.pop(field_, None)
        call = self.probe.query if op == "Query" else self.probe.scan
        return list(call(**request).get("Items", []))


_NOT_READ = frozenset({"FilterExpression", "ProjectionExpression", "Select",
                       "ReturnConsumedCapacity", "AttributesToGet"})  # fmt: skip


def _consistency(body: dict[str, Any]) -> float:
    return 1.0 if body.get("ConsistentRead") else 0.5


def _moto_units(parsed: dict[str, Any]) -> float | None:
    found = parsed.get("ConsumedCapacity")
    if not found:
        return None
    rows = found if isinstance(found, list) else [found]
    return float(sum(row.get("CapacityUnits", 0) for row in rows))
