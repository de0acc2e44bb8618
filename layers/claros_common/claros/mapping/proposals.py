"""Proposed mappings: what the mapper is shown, what it answers, and how a proposal is kept.

``propose`` gathers the write tool's registered metadata, the rules on it, and every
guarded app's registered read tools (``claros.mapping.propose.ProposalInput``); the schema
proposer always drafts; a configured model proposer (``Services.mapper``) may replace that
draft. Whatever is shown is validated like a saved mapping first (the model, the tools it
names are registered reads): a model draft that fails is discarded with its reason (logged,
and kept in the proposal as ``discarded``), and the schema proposer's draft is shown.

A proposal is kept as a doc (``mapping_proposal``), so that saving a mapping "from" it
(``PUT /api/mappings/{app}/{tool}`` with ``proposal``) writes a confirm record the server
vouches for: ``made_by: proposed``, who confirmed, when, and which proposer drafted it.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from claros.auth import Principal
from claros.clock import new_id, now_ms
from claros.errors import BadRequestError, NotFoundError
from claros.mapping.mapper import ask_model
from claros.mapping.model import MappingSpec
from claros.mapping.propose import (
    SCHEMA_PROPOSER,
    Proposal,
    ProposalInput,
    propose_from_schemas,
    tool_meta,
)
from claros.mapping.tools import APPS, mapping_problem, registered_tools
from claros.rules.decide import applies
from claros.rules.service import active_rules
from claros.store.base import DocWrite, Store
from claros.wiring import Services

__all__ = ["PROPOSALS", "get_proposal", "proposal_input", "propose"]

log = logging.getLogger("claros.mapper")

PROPOSALS = "mapping_proposal"


def proposal_input(store: Store, workspace: str, app: str, tool: str) -> ProposalInput:
    """What the mapper sees for ``app`` ``tool``: metadata only (docs/rules.md)."""
    doc = store.get_doc(workspace, APPS, app)
    if doc is None:
        raise NotFoundError(f"app {app!r} has registered no tools (start its guard first)")
    info = doc.value["tools"].get(tool)
    if info is None:
        raise NotFoundError(f"{tool!r} is not a registered tool of {app}")
    write = tool_meta(app, info)
    if write.read:
        raise BadRequestError(
            f"{tool!r} of {app} is a read tool: mappings say which facts a write needs"
        )
    rules = [r["rule"] for r in active_rules(store, workspace) if applies(r, app, tool)]
    reads = {}
    for app_doc in store.query_docs(workspace, APPS, limit=1000):
        tools = [tool_meta(app_doc.key, t) for t in app_doc.value["tools"].values()]
        reads[app_doc.key] = [t for t in tools if t.read]
    return ProposalInput(app, write, rules, reads)


def _problem(store: Store, workspace: str, draft: dict[str, Any]) -> str | None:
    """Why ``draft`` could not be saved as it is (None when it could)."""
    try:
        spec = MappingSpec.model_validate(draft)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return f"not a valid mapping: {'.'.join(str(x) for x in first['loc'])}: {first['msg']}"
    return mapping_problem(spec, registered_tools(store, workspace))


def propose(services: Services, principal: Principal, app: str, tool: str) -> dict[str, Any]:
    store, workspace = services.store, principal.workspace
    given = proposal_input(store, workspace, app, tool)
    schema = propose_from_schemas(given)
    problem = _problem(store, workspace, schema.draft)
    if problem is not None:  # never expected: it names only registered reads
        log.error("schema proposal for %s %s is invalid: %s", app, tool, problem)
        schema = Proposal({"app": app, "tool": tool}, reason=f"no valid draft: {problem}")
    shown, discarded = schema, None
    if services.mapper is not None and not schema.reason.startswith("no read tool"):
        answer = ask_model(services.mapper, given, schema)
        if isinstance(answer, Proposal):
            problem = _problem(store, workspace, answer.draft)
            if problem is None:
                shown = answer
            else:
                log.warning("mapper %s: proposal for %s %s discarded: %s",
                            services.mapper.model_id, app, tool, problem)  # fmt: skip
                discarded = problem
        else:
            discarded = answer
    proposal_id = new_id("mp")
    value = {
        "id": proposal_id,
        "app": app,
        "tool": tool,
        **shown.as_dict(),
        "proposed_by": principal.person or principal.key_id,
        "proposed_at": now_ms(),
    }
    if shown.empty and not shown.reason:
        value["reason"] = schema.reason or "the model proposed no part"
    if discarded is not None:
        value["discarded"] = {
            "proposer": services.mapper.model_id if services.mapper else "",
            "reason": discarded,
        }
    store.write_docs([DocWrite(workspace, PROPOSALS, proposal_id, value, 0)])
    return value


def get_proposal(store: Store, workspace: str, proposal_id: str) -> dict[str, Any]:
    doc = store.get_doc(workspace, PROPOSALS, proposal_id)
    if doc is None:
        raise NotFoundError(f"no mapping proposal {proposal_id!r}")
    return dict(doc.value)


def confirm_of(
    store: Store, principal: Principal, proposal_id: str, app: str, tool: str
) -> dict[str, Any]:
    """The confirm record of a mapping saved from proposal ``proposal_id``."""
    proposal = get_proposal(store, principal.workspace, proposal_id)
    if (proposal["app"], proposal["tool"]) != (app, tool):
        raise BadRequestError(
            f"proposal {proposal_id} is for {proposal['app']} {proposal['tool']}, not {app} {tool}"
        )
    return {
        "made_by": "proposed",
        "proposal": proposal_id,
        "proposer": proposal.get("proposer") or SCHEMA_PROPOSER,
        "confirmed_by": principal.person or principal.key_id,
        "confirmed_at": now_ms(),
    }
