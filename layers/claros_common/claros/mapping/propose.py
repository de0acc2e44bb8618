"""The schema proposer: a mapping draft from tool metadata alone (no model, no records).

It is demand-driven: it reads the fields the rules on the write tool read, drops those
the call carries (the tool's input schema), and looks for read tools that provide the
rest, by name and type:

- **fetch**: a read tool of the same app that takes the write's identifying argument
  (``invoice_submit(name)`` ↔ ``invoice_read(name)``: same parameter name and type, and
  the same record noun; the record is merged at the top, ``into: ""``), or whose record
  noun is an argument's name (``refund_create(order)`` ↔ ``order_read(id)``; the record
  goes under the argument's name, ``into: order``). Proposed only when some field is
  missing: the record is what the other parts read from.
- **lookups**: a field ``<noun>_<field>`` (``customer_tier``) or its plural
  (``item_groups``) read from ``<noun>_read`` (its ``pick`` is ``<field>`` or
  ``<noun>_<field>`` of that tool's declared output), keyed by a value the facts hold
  (``order.customer``, ``items[].item_code``); on another guarded server of the workspace
  (``app``) when no read tool of this app provides it. A ``<noun>_name`` field of the
  looked-up record goes to the judge as ``context``.
- **queries**: history a rule asks for (``supplier_invoices``, ``refunds_this_quarter``,
  ``refund_count``, ``first_invoice_date``, ``max_refund_amount``) over a list tool of the
  noun, filtered on the parameters the facts hold (the same filter is applied by the guard,
  ``where``, for servers that ignore theirs), with ``this_quarter``/``this_month``/...
  as a date bound on the rows' date field.

It never proposes ``derived`` values (a formula is the expert's: each missing field it
cannot place is listed with the reason) nor judge context nobody reads. Pure: metadata
in, a :class:`Proposal` out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claros.rules.expr import ExprError, parse_when

__all__ = [
    "SCHEMA_PROPOSER",
    "Part",
    "Proposal",
    "ProposalInput",
    "ToolMeta",
    "fields_read",
    "propose_from_schemas",
    "tool_meta",
]

SCHEMA_PROPOSER = "claros-schema-proposer"

_READ_VERBS = frozenset({"read", "get", "show", "fetch", "view", "lookup", "describe"})
_LIST_VERBS = frozenset({"list", "search", "find", "query", "history"})
_WRITE_VERBS = frozenset({
    "create", "submit", "update", "delete", "close", "cancel", "approve", "send", "set",
    "add", "remove", "post", "pay", "issue", "merge", "assign", "escalate", "reply",
    "resolve", "reopen", "win", "lose", "sign", "renew", "write", "edit", "move",
    "transfer", "void", "archive", "book", "make",
})  # fmt: skip
_PERIODS = {
    ("today",): "$today",
    ("this", "month"): "$month_start",
    ("this", "quarter"): "$quarter_start",
    ("this", "year"): "$year_start",
}
_REDUCERS = {"first": "first", "last": "last", "max": "max", "largest": "max",
             "highest": "max", "min": "min", "smallest": "min", "lowest": "min"}  # fmt: skip
_DATE_FIELDS = ("created_at", "created", "date", "posting_date", "opened_at", "timestamp")


@dataclass(frozen=True)
class ToolMeta:
    """A registered tool as the mapper sees it: metadata only, never a record."""

    app: str
    name: str
    description: str = ""
    read: bool = False
    inputs: Mapping[str, str] = field(default_factory=dict)  # argument name → JSON type
    required: tuple[str, ...] = ()
    # Flattened output fields: "total" → "integer", "items[].item_code" → "string"; a
    # list tool's rows are under "[]." ("[].created_at"). Empty: no output schema declared.
    outputs: Mapping[str, str] = field(default_factory=dict)

    @property
    def noun(self) -> str:
        return _noun(self.name)

    @property
    def is_list(self) -> bool:
        words = self.name.split("_")
        return bool(
            words[0] in _LIST_VERBS
            or words[-1] in _LIST_VERBS
            or any(k.startswith("[]") for k in self.outputs)
        )


def tool_meta(app: str, info: Mapping[str, Any]) -> ToolMeta:
    """A registered tool (as ``claros.mapping.service.ToolInfo`` stored it) as metadata."""
    schema = info.get("input_schema") if isinstance(info.get("input_schema"), Mapping) else {}
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    inputs = {
        str(k): str(v.get("type") or "") for k, v in (props or {}).items() if isinstance(v, Mapping)
    }
    required = schema.get("required") if isinstance(schema, Mapping) else None
    outputs: dict[str, str] = {}
    output = info.get("output_schema")
    if isinstance(output, Mapping):
        out_props = output.get("properties")
        # The MCP SDK wraps a list (or a plain value) as {"result": ...}.
        if isinstance(out_props, Mapping) and set(out_props) == {"result"}:
            output = out_props["result"]
        _flatten(output, "", outputs)
    return ToolMeta(
        app=app,
        name=str(info.get("name")),
        description=str(info.get("description") or ""),
        read=bool(info.get("read")) and not info.get("held"),
        inputs=inputs,
        required=tuple(str(r) for r in required) if isinstance(required, list) else (),
        outputs=outputs,
    )


def _flatten(node: Any, prefix: str, out: dict[str, str]) -> None:
    if not isinstance(node, Mapping):
        return
    if node.get("type") == "array":
        items = node.get("items")
        base = f"{prefix}[]" if prefix else "[]"
        if isinstance(items, Mapping) and items.get("properties"):
            out[prefix or "[]"] = "array"
            _flatten(items, base, out)
        elif prefix:
            out[prefix] = "array"
        return
    props = node.get("properties")
    if isinstance(props, Mapping):
        if prefix:
            out[prefix] = "object"
        for name, prop in props.items():
            path = f"{prefix}.{name}" if prefix else str(name)
            kind = prop.get("type") if isinstance(prop, Mapping) else None
            if kind in ("object", "array"):
                _flatten(prop, path, out)
            else:
                out[path] = str(kind or "")


@dataclass(frozen=True)
class ProposalInput:
    app: str
    tool: ToolMeta  # the write
    rules: Sequence[Mapping[str, Any]]  # the rules on it, as written
    reads: Mapping[str, Sequence[ToolMeta]]  # every guarded app's read tools, by app


@dataclass
class Part:
    part: str  # "fetch", "lookups[0]", "queries[1]", "derived.net"
    reason: str
    confidence: float

    def as_dict(self) -> dict[str, Any]:
        return {"part": self.part, "reason": self.reason, "confidence": self.confidence}


@dataclass
class Proposal:
    draft: dict[str, Any]  # exactly the saved format: {app, tool, fetch?, lookups?, ...}
    parts: list[Part] = field(default_factory=list)
    # Fields a rule reads that no part provides, each with why.
    unplaced: list[dict[str, str]] = field(default_factory=list)
    reason: str = ""  # why the draft is empty, when it is
    proposer: str = SCHEMA_PROPOSER

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "proposer": self.proposer,
            "mapping": self.draft,
            "parts": [p.as_dict() for p in self.parts],
            "unplaced": self.unplaced,
        }
        if self.reason:
            out["reason"] = self.reason
        return out

    @property
    def empty(self) -> bool:
        return set(self.draft) <= {"app", "tool"}


def fields_read(rules: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every field path the rules' ``when`` reads, in the order first read."""
    out: list[str] = []
    for rule in rules:
        when = rule.get("when")
        if not isinstance(when, str) or not when.strip():
            continue
        try:
            found = sorted(parse_when(when).fields(), key=when.find)
        except ExprError:
            continue
        out.extend(f for f in found if f not in out)
    return out


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 2:
        return word[:-1]
    return word


def _noun(tool: str) -> str:
    """The record a tool acts on: ``invoice_submit`` → invoice, ``get_customer`` →
    customer, ``list_tickets`` → ticket, ``credit_note_create`` → credit_note."""
    words = tool.split("_")
    verbs = _READ_VERBS | _LIST_VERBS | _WRITE_VERBS
    # The verb last first (refund_list, order_refund), unless what is left is a verb too
    # (create_refund).
    if len(words) > 1 and words[-1] in verbs and not (len(words) == 2 and words[0] in verbs):
        words = words[:-1]
    elif len(words) > 1 and words[0] in verbs:
        words = words[1:]
    words[-1] = _singular(words[-1])
    return "_".join(words)


def _root(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


@dataclass
class _Scope:
    """The fact paths a check will hold, and what each is (its JSON type)."""

    paths: dict[str, str] = field(default_factory=dict)

    def add(self, prefix: str, fields: Mapping[str, str]) -> None:
        for path, kind in fields.items():
            self.paths[f"{prefix}.{path}" if prefix else path] = kind

    def named(self, name: str) -> list[str]:
        """Scalar paths whose last name is ``name``, shortest first (no lists)."""
        found = [p for p, k in self.paths.items()
                 if p.rsplit(".", 1)[-1] == name and "[]" not in p
                 and k not in ("object", "array")]  # fmt: skip
        return sorted(found, key=lambda p: (p.count("."), p))


def propose_from_schemas(given: ProposalInput) -> Proposal:  # noqa: C901 - one pass per part
    write, app = given.tool, given.app
    draft: dict[str, Any] = {"app": app, "tool": write.name}
    proposal = Proposal(draft)
    reads_here = list(given.reads.get(app, ()))
    others = [t for a, tools in sorted(given.reads.items()) if a != app for t in tools]
    if not reads_here and not others:
        proposal.reason = (
            f"no read tool is registered in this workspace ({app} and the other guarded "
            "servers have none): a mapping has nothing to read facts from"
        )
        return proposal
    read = fields_read(given.rules)
    # A field the call does not carry; or a path into an argument that is no object
    # (order.total when the call's order is an id): the record it names must be read.
    needed = [f for f in read if _root(f) not in write.inputs
              or (f != _root(f) and write.inputs[_root(f)] != "object")]  # fmt: skip
    judged = [r for r in given.rules if not (r.get("when") or "").strip()]
    if not needed and not judged:
        proposal.reason = (
            "the rules on this tool read only the call's arguments"
            if given.rules
            else "no rule is written for this tool yet: nothing needs facts"
        )
        return proposal

    scope = _Scope({name: kind for name, kind in write.inputs.items()})
    fetch = _fetch(write, reads_here)
    if fetch is not None:
        tool, argument, param, into, why, confidence = fetch
        draft["fetch"] = {"tool": tool.name, "arguments": {param: f"${argument}"}, "into": into}
        proposal.parts.append(Part("fetch", why, confidence))
        scope.add(into, tool.outputs)

    lookups: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for name in needed:
        root = _root(name)
        if name in scope.paths or (root in scope.paths and scope.paths[root] == "object"):
            continue  # the fetched record carries it
        if any(x.get("var") == root for x in [*lookups, *queries]):
            continue
        if fetch is not None and fetch[3] == "" and not fetch[0].outputs:
            continue  # a record of unknown shape at the top: it may carry the field
        found = _lookup(root, scope, reads_here, others, app)
        if found is not None:
            spec, why, confidence = found
            proposal.parts.append(Part(f"lookups[{len(lookups)}]", why, confidence))
            lookups.append(spec)
            continue
        asked = _query(root, scope, reads_here)
        if asked is not None:
            spec, why, confidence = asked
            proposal.parts.append(Part(f"queries[{len(queries)}]", why, confidence))
            queries.append(spec)
            continue
        proposal.unplaced.append({"field": name, "reason": _unplaced_reason(root)})
    proposal.parts.sort(key=lambda p: ("fetch", "lookups", "queries").index(p.part.split("[")[0]))
    if lookups:
        draft["lookups"] = lookups
    if queries:
        draft["queries"] = queries
    if proposal.empty:
        listed = ", ".join(f["field"] for f in proposal.unplaced) or "none"
        proposal.reason = (
            "no registered read tool provides the fields the rules read "
            f"(missing: {listed}), and none takes this call's arguments"
        )
    return proposal


def _unplaced_reason(name: str) -> str:
    return (
        f"no read tool provides {name!r}: if the app computes it from other fields, add it "
        "under derived (for example net: grand_total - discount)"
    )


def _fetch(
    write: ToolMeta, reads: Sequence[ToolMeta]
) -> tuple[ToolMeta, str, str, str, str, float] | None:
    """(read tool, the write's argument, the read's parameter, into, reason, confidence)."""
    singles = [t for t in reads if not t.is_list and len(t.required or t.inputs) == 1]
    # 1. The same parameter (name and type) and the same record: the write acts on it.
    for tool in singles:
        param = (tool.required or tuple(tool.inputs))[0]
        kind = write.inputs.get(param)
        if kind is not None and kind == tool.inputs.get(param) and _same_record(write, tool):
            why = (
                f"{write.name}({param}) and {tool.name}({param}) take the same {kind} "
                f"{param!r} and act on one record ({tool.noun}): the record is merged at "
                "the top, the app's values winning"
            )
            # The call sets fields the record holds too (update_ticket(ticket_id, status)):
            # merged at the top, the record's values would hide the new ones.
            both = sorted(set(write.inputs) & set(tool.outputs) - {param})
            if both:
                why = (
                    f"{write.name}({param}) and {tool.name}({param}) take the same {kind} "
                    f"{param!r} and act on one record ({tool.noun}); the call sets "
                    f"{', '.join(both)}, which the record holds too, so the record goes under "
                    f"{tool.noun!r} and rules see the new values and the old"
                )
                return tool, param, param, tool.noun, why, 0.8
            return tool, param, param, "", why, 0.9
    # 2. An argument named after a record another read tool gives (order ↔ order_read).
    for argument, kind in write.inputs.items():
        noun = _argument_noun(argument)
        for tool in singles:
            param = (tool.required or tuple(tool.inputs))[0]
            if tool.noun == noun and tool.inputs.get(param) in (kind, ""):
                why = (
                    f"{write.name}'s {argument!r} names the {noun} record {tool.name}({param}) "
                    f"reads: the record goes under {argument!r}"
                )
                return tool, argument, param, argument, why, 0.75
    return None


def _same_record(write: ToolMeta, read: ToolMeta) -> bool:
    return write.noun == read.noun or write.noun.startswith(read.noun + "_")


def _argument_noun(argument: str) -> str:
    for suffix in ("_id", "_name", "_code", "_number", "_no", "_ref"):
        if argument.endswith(suffix) and len(argument) > len(suffix):
            return argument[: -len(suffix)]
    return argument


def _split(name: str, tools: Iterable[ToolMeta]) -> tuple[ToolMeta, str, bool] | None:
    """The record tool a ``<noun>_<field>`` (or plural) fact names: (tool, field, plural)."""
    for tool in sorted(tools, key=lambda t: -len(t.noun)):
        if tool.is_list:
            continue
        if name.startswith(tool.noun + "_"):
            rest = name[len(tool.noun) + 1 :]
            plural = rest != _singular(rest)
            return tool, _singular(rest) if plural else rest, plural
    return None


def _lookup(
    name: str,
    scope: _Scope,
    here: Sequence[ToolMeta],
    others: Sequence[ToolMeta],
    app: str,
) -> tuple[dict[str, Any], str, float] | None:
    for tools, elsewhere in ((here, False), (others, True)):
        split = _split(name, tools)
        if split is None:
            continue
        tool, wanted, plural = split
        pick = _pick(tool, wanted)
        if pick is None:
            continue
        param = (tool.required or tuple(tool.inputs))[0] if tool.inputs else None
        if param is None:
            continue
        key = _key(tool, param, scope, plural)
        if key is None:
            continue
        spec: dict[str, Any] = {"key": key, "tool": tool.name, "arguments": {param: "$"}}
        if elsewhere:
            spec = {"key": key, "app": tool.app, **{k: v for k, v in spec.items() if k != "key"}}
        spec.update(pick=pick, var=name)
        label = f"{tool.noun}_name"
        if label in tool.outputs and label != pick:
            spec["context"] = [label]
        where = f"{tool.app}.{tool.name}" if elsewhere else tool.name
        each = "each distinct " if plural else ""
        why = f"{name!r} is the {pick} of {each}{key} as {where}({param}) gives it"
        if elsewhere:
            why += f" (no read tool of {app} provides it; {tool.app} is another guarded server)"
        confidence = 0.8 if tool.outputs.get(pick) else 0.5
        return spec, why, round(confidence - (0.1 if elsewhere else 0.0), 2)
    return None


def _pick(tool: ToolMeta, wanted: str) -> str | None:
    if not tool.outputs:
        return wanted  # nothing declared: the field named as the rule names it
    for candidate in (wanted, f"{tool.noun}_{wanted}"):
        if candidate in tool.outputs:
            return candidate
    return None


def _key(tool: ToolMeta, param: str, scope: _Scope, plural: bool) -> str | None:
    names = [f"{tool.noun}_{param}", tool.noun, f"{tool.noun}_id", param]
    if param.startswith(tool.noun + "_"):
        names.insert(0, param)  # get_item(item_code): the facts' item_code
    paths = scope.paths
    if plural:
        for name in names:
            for path, kind in paths.items():
                if path.endswith(f"[].{name}") and kind not in ("object", "array"):
                    return path
        return None
    for name in names[:-1]:
        found = scope.named(name)
        if found:
            return found[0]
    return None


def _history(name: str) -> tuple[str, list[str]]:
    """(op, the words left): ``max_refund_amount`` → max; ``refund_count`` → count."""
    words = name.split("_")
    if words[0] in _REDUCERS:
        return _REDUCERS[words[0]], words[1:]
    if words[-1] == "count":
        return "count", words[:-1]
    return "count", words


def _period(after: list[str]) -> tuple[str | None, list[str]]:
    for period, builtin in _PERIODS.items():
        if tuple(after[-len(period) :]) == period:
            return builtin, after[: -len(period)]
    return None, after


def _filters(tool: ToolMeta, scope: _Scope) -> dict[str, str]:
    """The list tool's parameters the facts hold a value for."""
    out: dict[str, str] = {}
    for param in tool.inputs:
        paths = scope.named(param)
        if paths:
            out[param] = f"${paths[0]}"
    return out


def _query(
    name: str, scope: _Scope, here: Sequence[ToolMeta]
) -> tuple[dict[str, Any], str, float] | None:
    op, words = _history(name)
    for tool in (t for t in here if t.is_list):
        found = _noun_at(words, tool.noun)
        if found is None:
            continue
        before, (bound, after) = words[: found[0]], _period(words[found[1] :])
        field_name = "_".join(after) if op != "count" else None
        if (op == "count" and after) or (op != "count" and not after):
            continue
        if field_name and tool.outputs and f"[].{field_name}" not in tool.outputs:
            continue
        arguments = _filters(tool, scope)
        owner = "_".join(before)
        if owner:  # supplier_invoices: by supplier alone, whatever else the facts hold
            arguments = {k: v for k, v in arguments.items() if _argument_noun(k) == owner}
        if not arguments:
            continue  # every row of the app, whoever the call is about: not proposed
        where: dict[str, Any] = dict(arguments)
        if bound is not None:
            date = next((f for f in _DATE_FIELDS if f"[].{f}" in tool.outputs), None)
            if date is None:
                continue
            where[date] = {"gte": bound}
        spec: dict[str, Any] = {"tool": tool.name, "arguments": arguments, "where": where,
                                "op": op}  # fmt: skip
        if field_name:
            spec["field"] = field_name
        spec["var"] = name
        filters = ", ".join(f"{k} = {v}" for k, v in arguments.items())
        what = "how many" if op == "count" else f"the {op} {field_name} of the"
        why = f"{name!r} is {what} rows of {tool.name} with {filters}"
        if bound:
            why += f" since {bound}"
        why += "; the guard applies the same filter (where), for servers that ignore theirs"
        return spec, why, 0.7 if tool.outputs else 0.5
    return None


def _noun_at(words: list[str], noun: str) -> tuple[int, int] | None:
    """Where ``noun`` (one or more words, singular or plural) stands in ``words``."""
    parts = noun.split("_")
    n = len(parts)
    for i in range(len(words) - n + 1):
        chunk = words[i : i + n]
        if chunk[:-1] == parts[:-1] and _singular(chunk[-1]) == parts[-1]:
            return i, i + n
    return None
