"""Overrides: a person's verdict on a check (a wrong stop, a right stop, a missed one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from claros.activity import asked_of, may_see
from claros.auth import PERSON_KINDS, Principal
from claros.checkpoints import record
from claros.clock import new_id, now_ms
from claros.errors import BadRequestError, ForbiddenError, NotFoundError
from claros.store.base import DocWrite, NewRecord, Store
from claros.wiring import Services

__all__ = ["OverrideRequest", "check_overrides", "overrides_collection", "record_override"]


class OverrideRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    verdict: Literal["wrong_stop", "right_stop", "missed"]
    note: str | None = Field(None, max_length=2000)
    rule_id: str | None = Field(None, max_length=64)

    @model_validator(mode="after")
    def _missed_names_a_rule(self) -> OverrideRequest:
        if self.verdict == "missed" and not self.rule_id:
            raise ValueError("a missed report names the rule that should have fired (rule_id)")
        return self


def overrides_collection(check_id: str) -> str:
    """The docs listing a check's overrides, one per override, keyed by override id."""
    return f"overrides:{check_id}"


MAX_SHOWN = 100  # overrides listed on one check's page (filed by hand: a few at most)


def check_overrides(store: Store, workspace: str, check_id: str) -> list[dict[str, Any]]:
    """A check's overrides, oldest first (filed since this index existed)."""
    docs = store.query_docs(workspace, overrides_collection(check_id), limit=MAX_SHOWN)
    return [d.value for d in docs]


def _owners(record: Mapping[str, Any] | None) -> list[Any]:
    return list(((record or {}).get("rule") or {}).get("owners") or [])


def _may_file(
    store: Store, principal: Principal, check: Mapping[str, Any], req: OverrideRequest
) -> bool:
    """Who files a verdict on a check: an admin on any; a person on a check they may see
    (made for them, or asking them: claros.activity), and a rule's owner about their rule:
    ``missed`` naming a rule they own now, ``wrong_stop`` / ``right_stop`` on a check one
    of their rules (as that version was written) matched. Not on anyone else's."""
    if may_see(principal, check) or asked_of(store, principal, check):
        return True
    person, workspace = principal.person, principal.workspace
    if req.verdict == "missed":
        current = store.get_doc(workspace, "rule", req.rule_id) if req.rule_id else None
        return current is not None and person in _owners(current.value)
    for rule in check.get("rules") or []:
        if isinstance(rule, Mapping) and rule.get("matched"):
            ref = f"{rule.get('id')}@{rule.get('version')}"
            if person in _owners(store.get_record(workspace, "rule_version", ref)):
                return True
    return False


def record_override(
    services: Services, principal: Principal, check_id: str, req: OverrideRequest
) -> dict[str, Any]:
    store, workspace = services.store, principal.workspace
    if not principal.person or principal.kind not in PERSON_KINDS:
        raise ForbiddenError("overrides are made by people: use your person key")
    check = store.get_record(workspace, "check", check_id)
    if check is None or not _may_file(store, principal, check, req):
        # A check the person may not file on does not exist for them (as on its page).
        raise NotFoundError(f"no check {check_id!r}")
    if principal.derives_from(str(check.get("key_id"))):
        raise ForbiddenError(
            "an override on a check is never filed with the key that made it, nor with a key "
            "derived from it: file it with another key of a person's"
        )
    if req.rule_id and store.get_doc(workspace, "rule", req.rule_id) is None:
        raise BadRequestError(f"rule_id: no rule {req.rule_id!r}")
    if req.verdict in ("wrong_stop", "right_stop") and check.get("result") not in ("stop", "ask"):
        raise BadRequestError(
            f"{req.verdict} is a verdict on a stop or ask; this check said {check.get('result')}"
        )
    ref = new_id("ovr")
    row = {
        "workspace": workspace,
        "override_id": ref,
        "check_id": check_id,
        "verdict": req.verdict,
        "rule_id": req.rule_id,
        "note": req.note,
        "by": principal.person,
        "at": now_ms(),
        "check_result": check.get("result"),
        "check_rules": [
            {"id": r["id"], "version": r["version"], "matched": r.get("matched")}
            for r in check.get("rules") or []
        ],
    }
    # Indexed under its check, in the same transaction, so the check's page lists it.
    shown = {k: row[k] for k in ("override_id", "verdict", "rule_id", "note", "by", "at")}
    index = DocWrite(workspace, overrides_collection(check_id), ref, shown, 0)
    entry = record(services, workspace, [NewRecord("override", ref, row)], [index])[0]
    return {"override_id": ref, "check_id": check_id, "verdict": req.verdict, "seq": entry.seq}
