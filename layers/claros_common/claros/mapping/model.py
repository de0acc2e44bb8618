"""A mapping as written, and its validation (fetching-facts.txt, DESIGN.md).

Values in ``arguments`` and ``where`` are literals or exactly one ``$path`` (substitution
only: no templates, no expressions); ``$`` alone is a lookup's key value; the built-ins
``$now``, ``$today``, ``$month_start``, ``$quarter_start`` and ``$year_start`` are the
time of the check. Each of those objects holds at most 4 levels and 50 leaves.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from claros.empty import new_dict, new_list
from claros.names import NAME
from claros.rules.expr import ExprError, parse_derived

__all__ = [
    "BUILTINS",
    "STORED",
    "FetchSpec",
    "LookupSpec",
    "MappingSpec",
    "QuerySpec",
    "is_substitution",
    "stale_checks",
    "tools_named",
]

BUILTINS = frozenset({"$now", "$today", "$month_start", "$quarter_start", "$year_start"})
MAX_LEVELS = 4
MAX_LEAVES = 50
MAX_LOOKUPS = 20
MAX_QUERIES = 20

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = re.compile(rf"^{_IDENT}(?:\.{_IDENT}|\[\d+\])*$")
_KEY_PATH = re.compile(rf"^{_IDENT}(?:\[\]|\[\d+\])?(?:\.{_IDENT}(?:\[\]|\[\d+\])?)*$")
_INTO = re.compile(rf"^(?:{_IDENT}(?:\.{_IDENT})*)?$")
_VAR = re.compile(rf"^{_IDENT}$")
_WHERE_OPS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in"})


# The validation context of a mapping the store holds (``MappingSpec.model_validate(value,
# context=STORED)``): the checks added since it may have been saved (where keys as paths,
# one judge-context key per lookup field) apply when a mapping is saved, and never make
# a saved one unreadable, which would fail every registration of the workspace's tools.
STORED = {"stored": True}


def _stored(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and bool(info.context.get("stored"))


def is_substitution(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("$")


def _check_value(value: str, where: str, *, dollar_ok: bool) -> None:
    if value == "$":
        if not dollar_ok:
            raise ValueError(f"{where}: '$' (the key's value) is only for a lookup's arguments")
        return
    if value in BUILTINS:
        return
    if not _PATH.match(value[1:]):
        raise ValueError(
            f"{where}: {value!r} is not a single $path; values are literals or exactly one "
            "$path (no templates or expressions)"
        )


def _walk(value: Any, where: str, level: int, *, dollar_ok: bool, leaves: list[int]) -> None:
    # Levels are objects and lists (the arguments object itself is level 1), as the
    # API's nesting limit counts them; a leaf adds none.
    if isinstance(value, dict | list) and level > MAX_LEVELS:
        raise ValueError(f"{where}: deeper than {MAX_LEVELS} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            _walk(item, f"{where}.{key}", level + 1, dollar_ok=dollar_ok, leaves=leaves)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, f"{where}[{i}]", level + 1, dollar_ok=dollar_ok, leaves=leaves)
        return
    leaves[0] += 1
    if leaves[0] > MAX_LEAVES:
        raise ValueError(f"{where}: more than {MAX_LEAVES} leaves")
    if isinstance(value, str):
        if is_substitution(value):
            _check_value(value, where, dollar_ok=dollar_ok)
        elif "$" in value:
            raise ValueError(
                f"{where}: {value!r} mixes text and a $path; values are literals or exactly "
                "one $path (no templates)"
            )


def check_values(value: dict[str, Any], where: str, *, dollar_ok: bool = False) -> None:
    _walk(value, where, 1, dollar_ok=dollar_ok, leaves=[0])


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class FetchSpec(_Spec):
    tool: str = Field(pattern=NAME)
    arguments: dict[str, Any] = Field(default_factory=new_dict)
    into: str = ""

    @field_validator("into")
    @classmethod
    def _into(cls, into: str) -> str:
        if not _INTO.match(into):
            raise ValueError(f"into must be '' or a dotted field path, not {into!r}")
        return into

    @model_validator(mode="after")
    def _values(self) -> FetchSpec:
        check_values(self.arguments, "fetch.arguments")
        return self


class LookupSpec(_Spec):
    key: str
    tool: str = Field(pattern=NAME)
    arguments: dict[str, Any] = Field(default_factory=new_dict)
    pick: str | None = None
    var: str | None = None
    context: list[str] = Field(default_factory=new_list, max_length=10)
    app: str | None = Field(None, pattern=NAME)

    @field_validator("key")
    @classmethod
    def _key(cls, key: str) -> str:
        if not _KEY_PATH.match(key):
            raise ValueError(f"key must be a field path like items[].item_code, not {key!r}")
        return key

    def context_key(self, name: str) -> str:
        """The judge-context key of context field ``name`` (``item_code.item_name``)."""
        return f"{self.key.split('.')[-1].replace('[]', '')}.{name}"

    @model_validator(mode="after")
    def _shape(self) -> LookupSpec:
        check_values(self.arguments, "arguments", dollar_ok=True)
        if self.var is not None and not _VAR.match(self.var):
            raise ValueError(f"var must be a plain name, not {self.var!r}")
        if self.var and not self.pick:
            raise ValueError("a lookup with var needs pick (the field whose value it gives)")
        if not self.var and not self.context:
            raise ValueError("a lookup gives a fact (pick + var) or judge context (context)")
        for name in [*([self.pick] if self.pick else []), *self.context]:
            if not _PATH.match(name):
                raise ValueError(f"{name!r} is not a field path")
        return self


class QuerySpec(_Spec):
    tool: str = Field(pattern=NAME)
    arguments: dict[str, Any] = Field(default_factory=new_dict)
    where: dict[str, Any] = Field(default_factory=new_dict)
    op: Literal["count", "first", "last", "min", "max"]
    field: str | None = None
    var: str | None = None
    as_: str | None = Field(None, alias="as")
    app: str | None = Field(None, pattern=NAME)

    @model_validator(mode="after")
    def _shape(self, info: ValidationInfo) -> QuerySpec:
        check_values(self.arguments, "arguments")
        check_values(self.where, "where")
        for name, cond in self.where.items():
            if not _PATH.match(name) and not _stored(info):
                # Read as a path into each row, such a key matches no row: 0 on every call.
                raise ValueError(
                    f"where key {name!r} is not a field path of the rows (like customer or "
                    "customer.id)"
                )
            if isinstance(cond, dict):
                unknown = set(cond) - _WHERE_OPS
                if unknown:
                    raise ValueError(
                        f"where.{name}: unknown operator {sorted(unknown)[0]!r} "
                        f"(use {', '.join(sorted(_WHERE_OPS))})"
                    )
        if self.op != "count" and not self.field:
            raise ValueError(f"op {self.op} needs field (the value it reduces)")
        if self.field is not None and not _PATH.match(self.field):
            raise ValueError(f"field must be a field path, not {self.field!r}")
        if bool(self.var) == bool(self.as_):
            raise ValueError("a query gives its value under var (a fact) or as (judge context)")
        for given in (self.var, self.as_):
            if given is not None and not _VAR.match(given):
                raise ValueError(f"{given!r} must be a plain name")
        return self


class MappingSpec(_Spec):
    app: str = Field(pattern=NAME)
    tool: str = Field(pattern=NAME)
    fetch: FetchSpec | None = None
    derived: dict[str, str] = Field(default_factory=new_dict, max_length=50)
    lookups: list[LookupSpec] = Field(default_factory=new_list, max_length=MAX_LOOKUPS)
    queries: list[QuerySpec] = Field(default_factory=new_list, max_length=MAX_QUERIES)

    @field_validator("derived")
    @classmethod
    def _derived(cls, derived: dict[str, str]) -> dict[str, str]:
        for name, text in derived.items():
            if not _VAR.match(name):
                raise ValueError(f"derived name {name!r} must be a plain name")
            try:
                parse_derived(text)
            except ExprError as exc:
                raise ValueError(f"{name}: {exc}") from exc
        return derived

    @model_validator(mode="after")
    def _names(self) -> MappingSpec:
        names = [*self.derived, *(x.var for x in self.lookups if x.var),
                 *(q.var for q in self.queries if q.var)]  # fmt: skip
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"{sorted(dup)[0]!r} is given by two parts of the mapping")
        return self

    @model_validator(mode="after")
    def _context(self, info: ValidationInfo) -> MappingSpec:
        # Two lookups giving one judge-context key: the judge would see only the last. (A
        # query's ``as`` is a plain name and a lookup's key has a dot: they never meet.)
        given: dict[str, str] = {}
        for i, lookup in enumerate([] if _stored(info) else self.lookups):
            part = f"lookups[{i}]"
            for key in map(lookup.context_key, lookup.context):
                if key in given:
                    raise ValueError(
                        f"{part} gives the judge {key!r}, as {given[key]} does: the judge "
                        "would see one of them (leave the field out of one context, or give "
                        "it as a var)"
                    )
                given[key] = part
        return self

    def written(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, by_alias=True)


def tools_named(spec: MappingSpec) -> Iterator[tuple[str, str, str]]:
    """(app, tool, where) for every read tool the mapping uses."""
    if spec.fetch:
        yield spec.app, spec.fetch.tool, "fetch.tool"
    for i, lookup in enumerate(spec.lookups):
        yield lookup.app or spec.app, lookup.tool, f"lookups[{i}].tool"
    for i, query in enumerate(spec.queries):
        yield query.app or spec.app, query.tool, f"queries[{i}].tool"


def stale_checks(spec: MappingSpec) -> list[str]:
    """What a mapping read as saved (``STORED``) fails of the checks applied when a
    mapping is saved now: one saved by an earlier version runs as saved, and the rule
    warnings say so (claros.rules.warnings)."""
    try:
        MappingSpec.model_validate(spec.written())
    except ValidationError as exc:
        return [_problem(error) for error in exc.errors()]
    return []


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc") or ())
    message = str(error.get("msg", "")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
