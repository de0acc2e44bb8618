"""From a call and the records the guard read to the facts rules see. Pure.

Rounds: first the record the call targets (``fetch``); then, over the call merged with
that record and the derived values, the lookups (one read per distinct key value) and the
query lookups. The guard answers each round whole; ``plan`` says what is still needed, or
gives the facts once everything was read. Nothing is decided on partial facts: an answer
that was not asked for, or a round answered in part, is refused.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from claros.canonical import canonical, canonical_bytes
from claros.errors import BadRequestError
from claros.mapping.model import FetchSpec, LookupSpec, MappingSpec, QuerySpec, is_substitution
from claros.paths import get_path
from claros.rules.expr import evaluate, parse_derived

__all__ = ["MAX_FETCHED_BYTES", "Plan", "builtins", "fetch_read", "plan", "read_ahead_holds"]

MAX_FETCHED_BYTES = 512 * 1024  # all answers of one check, as canonical JSON
MAX_DISTINCT = 200  # distinct values one lookup reads (an invoice's item codes, say)


class Plan:
    """What a check's mapping makes of its call: the fetches it needs, the facts, derived
    values, variables and context, and the mapping. A plain class, not a dataclass: the
    check function defines it at its cold start (~1 ms of CPU as a dataclass)."""

    def __init__(self, *, facts: dict[str, Any] | None = None) -> None:
        self.need: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {} if facts is None else facts
        self.derived: dict[str, Any] = {}
        self.vars: dict[str, Any] = {}
        self.context: dict[str, Any] = {}
        self.mapping: MappingSpec | None = None

    def __repr__(self) -> str:
        return f"Plan(facts={self.facts!r}, need={self.need!r})"


def builtins(now: dt.datetime) -> dict[str, str]:
    today = now.date()
    quarter_month = 3 * ((today.month - 1) // 3) + 1
    return {
        "$now": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "$today": today.isoformat(),
        "$month_start": today.replace(day=1).isoformat(),
        "$quarter_start": today.replace(month=quarter_month, day=1).isoformat(),
        "$year_start": today.replace(month=1, day=1).isoformat(),
    }


def _values(source: Any, key: str) -> tuple[list[Any], bool]:
    """The values at a lookup key (``items[].code`` gives one per item), and whether the key
    walks a list. A list the key walks that is missing, null or not a list gives ``[None]``
    and not many: the values are unknown, not "no items" (an order that names no items,
    filled in by the app from its quote, would pass every rule over its items:
    tests/security/test_lookup_on_a_missing_list_sees_no_items.py)."""
    current: list[Any] = [source]
    many = False
    for part in key.split("."):
        name, _, index = part.partition("[")
        nxt: list[Any] = []
        for value in current:
            value = value.get(name) if isinstance(value, Mapping) else None
            if index == "]":
                many = True
                if not isinstance(value, list):
                    return [None], False
                nxt.extend(value)
            elif index:
                i = int(index[:-1])
                nxt.append(value[i] if isinstance(value, list) and i < len(value) else None)
            else:
                nxt.append(value)
        current = nxt
    return current, many


def _substitute(value: Any, source: Any, env: Mapping[str, Any], key_value: Any = None) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, source, env, key_value) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, source, env, key_value) for v in value]
    if is_substitution(value):
        if value == "$":
            return key_value
        if value in env:
            return env[value]
        return get_path(source, value[1:])
    return value


def _blank(value: Any) -> bool:
    """Whether a value names nothing: missing or null, or text that is empty or only
    spaces (many apps read ``""`` as "not given" and fall back to another record:
    tests/security/test_query_on_an_empty_argument_counts_nothing.py)."""
    return value is None or (isinstance(value, str) and not value.strip())


def _missing(value: Any, source: Any, env: Mapping[str, Any]) -> str | None:
    """The first ``$path`` in ``value`` that names nothing (``_blank``) in ``source``, or an
    object; ``$`` and the built-ins always name something. A read filtered on such a path
    would be filtered on null: not the fact the mapping means, which Claros then does not
    have. An object where one value is meant (``{"id": "C-7"}``, ``{"$ne": null}``) is
    whatever the app makes of it, an id or operators, which Claros cannot know
    (tests/security/test_object_argument_empties_the_history.py)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _missing(item, source, env)
            if found is not None:
                return found
        return None
    if is_substitution(value) and value != "$" and value not in env:
        named = get_path(source, value[1:])
        return value if _blank(named) or isinstance(named, Mapping) else None
    return None


def _merge(base: dict[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` over ``base``: the app's values win over the agent's, at every depth."""
    out = dict(base)
    for key, value in record.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _merge_into(facts: dict[str, Any], into: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """The record at ``into``. At the top level (``into: ""``) it is merged over the call's
    arguments (the app's values win). At a named field it *is* that field: whatever the
    agent sent under that name is set aside, never merged, or a field the record leaves
    out (an ``approved_by`` the app omits when unset) would be the agent's word for the
    app's (tests/security/test_agent_fills_in_what_the_record_left_out.py)."""
    if not into:
        return _merge(facts, record)
    head, _, rest = into.partition(".")
    if not rest:
        facts[head] = copy.deepcopy(dict(record))
        return facts
    inner = facts.get(head)
    facts[head] = _merge_into(dict(inner) if isinstance(inner, Mapping) else {}, rest, record)
    return facts


def _record(fetched: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = fetched[key]
    if not isinstance(value, Mapping):
        raise BadRequestError(
            f"fetched.{key} must be the record read (a JSON object), not {type(value).__name__}"
        )
    if set(value) == {"result"} and not isinstance(value["result"], Mapping):
        # How the MCP SDK wraps a read tool's plain text, number or list: not a record.
        # Taken as one, every fact the rules need from it would be missing.
        inner = value["result"]
        what = "null" if inner is None else type(inner).__name__
        raise BadRequestError(
            f'fetched.{key} is {{"result": <{what}>}}, a read tool\'s answer wrapped by the MCP '
            "SDK, not a record (a JSON object): the read failed"
        )
    return value


def _value_key(i: int, value: Any) -> str:
    """The need key of a lookup's value: its canonical JSON, except a number, written as it
    came. Canonical JSON writes a number as its double, so two ids past 2**53 (or two
    fractions past a double's digits) that round to one would share a key, one read and
    one record (tests/security/test_lookup_reads_one_record_for_two_ids.py)."""
    if isinstance(value, int | Decimal | float) and not isinstance(value, bool):
        text = str(value) if not isinstance(value, float) else repr(value)
    else:
        text = canonical(value)
    return f"lookups[{i}]:{text}"


def _lookup_needs(
    i: int, spec: LookupSpec, facts: Mapping[str, Any], env: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[Any], bool]:
    values, many = _values(facts, spec.key)
    # A key that names nothing is not read: its values are unknown, as a missing key's.
    values = [None if _blank(v) else v for v in values]
    distinct: dict[str, Any] = {}
    for value in values:
        if value is None or isinstance(value, dict | list):
            continue
        distinct.setdefault(_value_key(i, value), value)
    if len(distinct) > MAX_DISTINCT:
        raise BadRequestError(
            f"lookups[{i}] ({spec.key}) has {len(distinct)} distinct values; at most "
            f"{MAX_DISTINCT} are read for one check"
        )
    needs = []
    for key, value in distinct.items():
        need = {"key": key, "kind": "lookup", "tool": spec.tool,
                "arguments": _substitute(spec.arguments, facts, env, value)}  # fmt: skip
        if spec.app:
            need["app"] = spec.app
        needs.append(need)
    return needs, values, many


def _query_need(
    i: int, spec: QuerySpec, facts: Mapping[str, Any], env: Mapping[str, Any]
) -> dict[str, Any]:
    need: dict[str, Any] = {
        "key": f"queries[{i}]",
        "kind": "query",
        "tool": spec.tool,
        "arguments": _substitute(spec.arguments, facts, env),
        "where": _substitute(spec.where, facts, env),
        "op": spec.op,
    }
    if spec.field:
        need["field"] = spec.field
    if spec.app:
        need["app"] = spec.app
    return need


def _query_value(i: int, spec: QuerySpec, value: Any) -> Any:
    where = f"fetched.queries[{i}]"
    if spec.op == "count":
        # A number of rows: 2.0 is 2 (JSON has one number type), 1.5 is no count at all.
        if (
            isinstance(value, bool)
            or not isinstance(value, int | Decimal)
            or value < 0
            or (isinstance(value, Decimal) and value != value.to_integral_value())
        ):
            shown = str(value) if isinstance(value, Decimal) else repr(value)
            raise BadRequestError(f"{where}: a count is a whole number >= 0, not {shown}")
        return int(value)
    if isinstance(value, dict | list):
        raise BadRequestError(
            f"{where}: only the reduced value goes back ({spec.op} of {spec.field}), not rows"
        )
    return value


def _fetch_need(
    fetch: FetchSpec, arguments: Mapping[str, Any], env: Mapping[str, Any]
) -> dict[str, Any]:
    return {"key": "fetch", "kind": "fetch", "tool": fetch.tool,
            "arguments": _substitute(fetch.arguments, arguments, env)}  # fmt: skip


def fetch_read(
    spec: MappingSpec | None, arguments: Mapping[str, Any], now: dt.datetime
) -> dict[str, Any] | None:
    """The read (``tool``, ``arguments``) the mapping's fetch asks for on this call; None
    when the tool has no mapping or its mapping no fetch."""
    if spec is None or spec.fetch is None:
        return None
    need = _fetch_need(spec.fetch, arguments, builtins(now))
    return {"tool": need["tool"], "arguments": need["arguments"]}


def read_ahead_holds(
    spec: MappingSpec | None,
    arguments: Mapping[str, Any],
    read: Mapping[str, Any],
    now: dt.datetime,
) -> bool:
    """Whether a record the guard read ahead (``read``: the tool and arguments it ran) is
    the one the mapping asks for on this call now. Compared as canonical JSON, so a
    mapping edited since, a built-in date that moved on or a guard that substituted
    differently all count as stale; and as values, since canonical JSON writes a number
    as its double and two ids past 2**53 would be one read
    (tests/security/test_record_read_ahead_for_a_neighbouring_id.py). Each compare alone
    misses something: ``==`` takes ``true`` for ``1``."""
    expected = fetch_read(spec, arguments, now)
    read = dict(read)
    return (
        expected is not None
        and expected == read
        and canonical_bytes(expected) == canonical_bytes(read)
    )


def _check_answers(fetched: Mapping[str, Any], asked: set[str], round_keys: set[str]) -> None:
    unknown = sorted(set(fetched) - asked)
    if unknown:
        raise BadRequestError(f"fetched.{unknown[0]} was not asked for")
    present = round_keys & set(fetched)
    if present and present != round_keys:
        missing = sorted(round_keys - present)[0]
        raise BadRequestError(f"fetched has no answer for {missing}: answer every need at once")


_Lookup = tuple[int, LookupSpec, list[Any], bool]


def _round_two(
    spec: MappingSpec, facts: Mapping[str, Any], env: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[_Lookup], set[int]]:
    """The lookups' and queries' needs over the call merged with its record; each lookup
    with the values at its key; the queries not run (filtered on a $path naming nothing:
    their values are unknown)."""
    needs: list[dict[str, Any]] = []
    lookups: list[_Lookup] = []
    for i, lookup in enumerate(spec.lookups):
        lookup_needs, values, many = _lookup_needs(i, lookup, facts, env)
        if _missing(lookup.arguments, facts, env) is not None:
            # Read with null for a value the call or record does not hold: nothing is
            # read, and every value this lookup gives is unknown.
            lookup_needs, values = [], [None] * len(values)
        needs += lookup_needs
        lookups.append((i, lookup, values, many))
    unknown_queries: set[int] = set()
    for i, query in enumerate(spec.queries):
        if _missing([query.arguments, query.where], facts, env) is not None:
            unknown_queries.add(i)
        else:
            needs.append(_query_need(i, query, facts, env))
    return needs, lookups, unknown_queries


def plan(
    spec: MappingSpec,
    arguments: Mapping[str, Any],
    fetched: Mapping[str, Any],
    now: dt.datetime,
) -> Plan:
    if len(canonical_bytes(dict(fetched))) > MAX_FETCHED_BYTES:
        raise BadRequestError(f"fetched is larger than {MAX_FETCHED_BYTES:,} bytes")
    env = builtins(now)
    out = Plan()
    facts: dict[str, Any] = copy.deepcopy(dict(arguments))
    asked: set[str] = set()
    if spec.fetch:
        asked.add("fetch")
        missing = _missing(spec.fetch.arguments, arguments, env)
        if missing is not None:
            # Read with null, the app answers some other record (or none): not the one
            # the write names, whose facts Claros then does not have. Read with an object,
            # the app may take it as a filter and answer the first record it matches.
            has = get_path(arguments, missing[1:])
            what = (
                f"the call's {missing[1:]} is an object, not one value,"
                if isinstance(has, Mapping)
                else f"the call has no {missing[1:]},"
            )
            raise BadRequestError(
                f"{what} which the mapping's fetch reads its record by ({spec.fetch.tool}): "
                "a missing record blocks the write"
            )
        if "fetch" not in fetched:
            _check_answers(fetched, asked, set())
            need = _fetch_need(spec.fetch, arguments, env)
            # The arguments as the mapping writes them: a guard may read the record ahead
            # on the next call of this tool (``fetched_with``, docs/api.md).
            need["template"] = copy.deepcopy(spec.fetch.arguments)
            out.need = [need]
            return out
        record = _record(fetched, "fetch")
        if not record:
            # A read that found nothing: merged, it would leave every fact to the agent.
            raise BadRequestError(
                "fetched.fetch is an empty record ({}): the read found nothing, so no fact "
                "came from the app; a missing record blocks the write"
            )
        facts = _merge_into(facts, spec.fetch.into, record)
    for name, text in spec.derived.items():
        value = evaluate(parse_derived(text), facts).value
        out.derived[name] = value
        facts[name] = value
    needs, lookups, unknown_queries = _round_two(spec, facts, env)
    round_keys = {n["key"] for n in needs}
    asked |= round_keys
    _check_answers(fetched, asked, round_keys)
    if round_keys and not round_keys & set(fetched):
        out.need = needs
        return out
    for i, lookup, values, many in lookups:
        _apply_lookup(out, fetched, i, lookup, values, many)
    for i, query in enumerate(spec.queries):
        # Not run (a $path naming nothing): unknown, and a rule over it answers by its
        # on_unknown.
        value = None if i in unknown_queries else _query_value(i, query, fetched[f"queries[{i}]"])
        if query.var:
            out.vars[query.var] = value
        else:
            out.context[str(query.as_)] = value
    facts.update(out.vars)
    out.facts = facts
    return out


def _apply_lookup(
    out: Plan, fetched: Mapping[str, Any], i: int, spec: LookupSpec, values: list[Any], many: bool
) -> None:
    records: dict[str, Mapping[str, Any]] = {}
    for value in values:
        if value is None or isinstance(value, dict | list):
            continue
        key = _value_key(i, value)
        records.setdefault(key, _record(fetched, key))

    def per_value(path: str) -> Any:
        picked = []
        for value in values:
            key = _value_key(i, value) if value is not None else None
            record = records.get(key) if key else None
            picked.append(get_path(record, path) if record is not None else None)
        return picked if many else (picked[0] if picked else None)

    if spec.var and spec.pick:
        out.vars[spec.var] = per_value(spec.pick)
    for name in spec.context:
        out.context[spec.context_key(name)] = per_value(name)
