"""The validated mappings a process keeps (claros.mapping.service._SPECS) are keyed by the
hash of the mapping's text. One process serves every workspace (a Lambda container, the
local server), so a doc whose text is not what its hash says (written around the API, or
corrupt) must not answer for another doc of that hash: before, the first one read kept its
text under the hash, and every workspace's mapping of that hash ran it."""

from __future__ import annotations

from typing import Any

import pytest

from claros.mapping import service
from claros.mapping.model import MappingSpec
from claros.rules.terms import rule_hash
from claros.store.base import Doc

QUERY = {"tool": "refund_list", "arguments": {"customer": "$customer"},
         "where": {"customer": "$customer"}, "op": "count", "var": "refunds_before"}  # fmt: skip
TEXT: dict[str, Any] = {"app": "shop", "tool": "refund_create", "queries": [QUERY]}


@pytest.fixture(autouse=True)
def _empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "_SPECS", {})


def _doc(mapping: dict[str, Any], digest: str) -> Doc:
    value = {"app": "shop", "tool": "refund_create", "version": 1, "hash": digest,
             "mapping": mapping, "status": "active"}  # fmt: skip
    return Doc("mappings", "shop/refund_create", value, 1)


def _var(spec: MappingSpec | None) -> str:
    assert spec is not None
    return str(spec.model_dump()["queries"][0]["var"])


def test_a_doc_whose_text_is_not_its_hash_answers_only_for_itself() -> None:
    written = MappingSpec.model_validate(TEXT).written()
    digest = rule_hash(written)
    other = {**written, "queries": [{**written["queries"][0], "var": "planted"}]}
    assert _var(service.mapping_from(_doc(other, digest))) == "planted"  # its own text
    # ... which is not kept: the doc whose text the hash is gets its own.
    assert _var(service.mapping_from(_doc(written, digest))) == "refunds_before"
    # Once the hash's own text is known, it is what the hash names (the version the
    # ledger recorded under it), for every doc that claims that hash.
    assert _var(service.mapping_from(_doc(other, digest))) == "refunds_before"


def test_a_doc_whose_text_is_its_hash_is_validated_once() -> None:
    written = MappingSpec.model_validate(TEXT).written()
    first = service.mapping_from(_doc(written, rule_hash(written)))
    assert service.mapping_from(_doc(written, rule_hash(written))) is first
