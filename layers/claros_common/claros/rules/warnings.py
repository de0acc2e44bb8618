"""Warnings when a rule is saved: fields its ``when`` reads that nothing provides.

A rule reads facts: the call's arguments (what the tool's registered input schema lists)
and what the tool's mapping adds (the fetched record at ``into``, ``derived`` names, the
``var`` of lookups and query lookups). A field that none of them provides is missing on
every call, so the rule is never decided on it and always answers its ``on_unknown``
(fire, by default): most likely a typo, or a mapping still to write. Saving the rule is
not refused (the mapping may come next); the answer carries one warning per field and tool.

It warns of a ``when`` that never holds: false on every call (it reads no field), or a
value rather than a condition (``amount + 1``: never true or false, always unknown). And it
warns of a tool no check ever reaches, so that the rule never applies: one the
app's guard registered as a read (guards check writes only) or never registered at all.

Only a field's first name is checked (``order`` of ``order.total``). Nothing is warned when
a tool's facts cannot be known: an input schema without ``properties`` (it takes anything),
a mapping that fetches a record into the top level (``into: ""``: any field may come
from it), or one of Claude Code's own tools that nothing registered (its hooks check
Claude Code's input as it comes, and register no schema).

A rule that names some of the tools Claude Code runs a shell command with, but not all,
is warned too: the agent picks the tool, and the same command run with another is not
the rule's.

And it warns of a tool whose saved mapping fails a check applied when a mapping is saved
now (a ``where`` key that is no field path, two lookups giving the judge one context key):
a mapping saved by an earlier version runs as it was saved, so a query with such a key
counts no row on every call (claros.mapping.model.stale_checks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from claros.claude_code import SHELL_TOOLS, WRITE_TOOLS
from claros.errors import ConflictError
from claros.mapping.model import stale_checks
from claros.mapping.service import mapping_for
from claros.rules.expr import Expr, ExprError, matches, parse_when
from claros.rules.model import RuleSpec
from claros.store.base import Store

__all__ = ["rule_warnings", "saved_rule_warnings"]

_APPS = "app"  # the docs guards register their tools in (claros.mapping.service)


def rule_warnings(
    store: Store,
    workspace: str,
    spec: RuleSpec,
    stale: dict[tuple[str, str], list[str]] | None = None,
) -> list[str]:
    """``stale``: the saved mappings' stale-check warnings by (app, tool), kept across the
    calls of one page (``saved_rule_warnings``): many rules name one tool, and each would
    read and validate its mapping again."""
    registered = _registered_tools(store, workspace, spec.app)
    stale = {} if stale is None else stale
    out = _shell_warnings(spec)
    unchecked: set[str] = set()
    for tool in spec.tools:
        why = _never_checked(spec.app, tool, registered)
        if why is not None:
            out.append(why)
            unchecked.add(tool)
        else:
            if (spec.app, tool) not in stale:
                stale[spec.app, tool] = _stale_mapping_warnings(store, workspace, spec.app, tool)
            out.extend(stale[spec.app, tool])
    if not spec.when:
        return out
    try:
        expr = parse_when(spec.when)
    except ExprError:  # validated already; nothing to say
        return out
    never = _never_decided(expr, spec)
    if never is not None:
        out.append(never)
    fields = sorted(expr.fields(), key=spec.when.find)
    for tool in spec.tools:
        if tool not in unchecked:  # said already: what it reads does not matter
            out.extend(_field_warnings(store, workspace, spec.app, tool, registered, fields))
    return out


def _field_warnings(
    store: Store,
    workspace: str,
    app: str,
    tool: str,
    registered: Mapping[str, Any],
    fields: Sequence[str],
) -> list[str]:
    """A warning for each field the rule reads that neither the tool's input schema nor
    its mapping provides."""
    arguments = _arguments(registered.get(tool))
    if arguments is None and tool in WRITE_TOOLS:
        return []  # Claude Code's input, which no guard registers
    try:
        facts = _mapped(store, workspace, app, tool)
    except ConflictError as exc:  # suspended: the warning says so, and why
        return [str(exc)]
    if facts is None or (arguments is not None and "*" in arguments):
        return []  # anything may be provided
    return [
        _warning(app, tool, path, _root(path), arguments is not None)
        for path in fields
        if not (_root(path) in facts or (arguments is not None and _root(path) in arguments))
    ]


def _stale_mapping_warnings(store: Store, workspace: str, app: str, tool: str) -> list[str]:
    """A warning for each check the tool's saved mapping fails that a mapping saved now
    must pass."""
    try:
        spec = mapping_for(store, workspace, app, tool)
    except ConflictError:  # suspended: the field warnings say so
        return []
    return [
        f"{tool}: its mapping was saved before a check it fails now, and runs as saved: "
        f"{problem} (save it again, corrected)"
        for problem in (stale_checks(spec) if spec is not None else [])
    ]


def _shell_warnings(spec: RuleSpec) -> list[str]:
    named = [tool for tool in SHELL_TOOLS if tool in spec.tools]
    missing = [tool for tool in SHELL_TOOLS if tool not in spec.tools]
    if not named or not missing:
        return []
    return [
        f"{', '.join(named)}: the rule does not list {' or '.join(missing)}; Claude Code runs "
        f"shell commands with {', '.join(SHELL_TOOLS)}, and the agent picks which, so the same "
        f"command run with {' or '.join(missing)} is not this rule's (list all three)"
    ]


def _never_decided(expr: Expr, spec: RuleSpec) -> str | None:
    """Why the ``when`` never holds on any call, or None: it reads no field and is false,
    or it is a value, not a condition (never true or false, so always unknown)."""
    if not expr.is_condition():
        on_unknown = spec.on_unknown or "fire"
        return (
            f"when: {spec.when!r} is a value, not a condition (true or false): it is never "
            f"decided, and the rule always answers by its on_unknown ({on_unknown})"
        )
    if not expr.fields() and matches(expr, {})[0] is False:
        return f"when: {spec.when!r} is false on every call: the rule never applies"
    return None


def _never_checked(app: str, tool: str, registered: Mapping[str, Any]) -> str | None:
    """Why no check ever reaches a rule on ``tool``, or None: guards check writes only, so
    a tool the app's guard registered as a read (and the workspace does not hold as a
    write) goes to its server unchecked; and a tool the app's guard never registered is
    not called by that name (tools/call of a name the server did not list is refused)."""
    if not registered:
        return None  # no guard has registered the app yet: the field warnings say so
    info = registered.get(tool)
    if info is None:
        return (
            f"{tool}: {app}'s guard registered no tool by this name, so no call of it is "
            "checked and the rule never applies (tool names are matched exactly)"
        )
    if isinstance(info, Mapping) and info.get("read") and not info.get("held"):
        return (
            f"{tool}: {app}'s guard registered it as a read, and guards check writes only: "
            f"its calls go to the server unchecked and the rule never applies (run the guard "
            f"with --write {tool} if it changes anything)"
        )
    return None


def _warning(app: str, tool: str, path: str, name: str, has_schema: bool) -> str:
    if has_schema:
        why = f"{name!r} is not an argument in the input schema {app} registered for {tool}"
    else:
        why = f"{app} registered no input schema for {tool} (start its guard)"
    return (
        f"{tool}: the rule reads {path!r}, but {why}, and no mapping of {tool} provides "
        f"{name!r}: it will be unknown, and the rule then answers by its on_unknown"
    )


def saved_rule_warnings(
    store: Store, workspace: str, rules: Sequence[Mapping[str, Any]]
) -> dict[str, list[str]]:
    """The warnings of each active saved rule, by id (the web app's Rules page shows them:
    a tool registered or a mapping saved since the rule was can change them)."""
    out: dict[str, list[str]] = {}
    stale: dict[tuple[str, str], list[str]] = {}
    for state in rules:
        if state.get("status") != "active":
            continue
        try:
            spec = RuleSpec.model_validate(state.get("rule") or {})
        except ValueError:  # saved by an older version with other rules: nothing to say
            continue
        warnings = rule_warnings(store, workspace, spec, stale)
        if warnings:
            out[str(state.get("id"))] = warnings
    return out


def _root(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def _registered_tools(store: Store, workspace: str, app: str) -> Mapping[str, Any]:
    doc = store.get_doc(workspace, _APPS, app)
    tools = doc.value.get("tools") if doc else None
    return tools if isinstance(tools, Mapping) else {}


def _arguments(info: Any) -> set[str] | None:
    """The argument names a registered tool's input schema lists; {"*"} when it takes any
    object; None when no schema is registered."""
    schema = info.get("input_schema") if isinstance(info, Mapping) else None
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return {"*"}
    return {str(name) for name in properties}


def _mapped(store: Store, workspace: str, app: str, tool: str) -> set[str] | None:
    """The fact names a tool's mapping adds; None when any name may come from it."""
    spec = mapping_for(store, workspace, app, tool)
    if spec is None:
        return set()
    names: set[str] = set(spec.derived)
    if spec.fetch is not None:
        if not spec.fetch.into:
            return None
        names.add(_root(spec.fetch.into))
    names.update(str(lookup.var) for lookup in spec.lookups if lookup.var)
    names.update(str(query.var) for query in spec.queries if query.var)
    return names
